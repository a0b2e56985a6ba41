// Rolling redeploys (issue 29): a service's `rollout` strategy replaces its containers in batches;
// start-first keeps every container serving until its replacement is healthy (never more than
// max_surge extra), stop-first never takes more than max_unavailable down; a new definition whose
// containers turn unhealthy is rolled back (the previous revision runs again, the action Failed
// with "rolled back to revision N"); a rollout canceled between batches leaves one revision.
// The limits are checked at every engine call that creates, starts, stops or removes a container.
// Simulated nodes: fake engines with simulated HTTP servers and health checks.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { LABELS } from "../../src/domain/service.ts";
import {
  APP_CHECK,
  APP_IMAGES,
  call,
  containersOf,
  createService,
  deployCluster,
  finished,
  operate,
  type RecordingEngine,
  type Sim,
  startSim,
  until,
} from "./sim.ts";

let s: Sim;

before(async () => {
  s = await startSim({
    registry: APP_IMAGES,
  });
  await deployCluster(s, { name: "pair", target_num_nodes: 2 });
});
after(() => s.close());

interface Count {
  running: number;
  serving: number;
}

/** The service's engine containers over every node: running ones, and those that serve (running, healthy or without a check). */
async function countOf(serviceUuid: string): Promise<Count> {
  let running = 0;
  let serving = 0;
  for (const e of s.engines.values()) {
    for (const c of await e.listContainers({ labels: { [LABELS.service]: serviceUuid } })) {
      const v = await e.inspectContainer(c.id);
      if (!v?.running) continue;
      running += 1;
      if (!v.health || v.health.status === "healthy") serving += 1;
    }
  }
  return { running, serving };
}

/** Checks `limits` before and after every create, start, stop and remove on every engine; answers what it saw. */
function watch(serviceUuid: string, check: (c: Count) => void): { seen: Count[]; stop(): void } {
  const seen: Count[] = [];
  const restore: (() => void)[] = [];
  for (const e of s.engines.values()) {
    for (const m of ["createContainer", "startContainer", "stopContainer", "removeContainer"] as const) {
      const engine = e as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
      const original = engine[m]!;
      engine[m] = async (...args: unknown[]) => {
        const before = await countOf(serviceUuid);
        seen.push(before);
        check(before);
        const out = await original.apply(e as RecordingEngine, args);
        const after = await countOf(serviceUuid);
        seen.push(after);
        check(after);
        return out;
      };
      restore.push(() => {
        engine[m] = original;
      });
    }
  }
  return {
    seen,
    stop: () => {
      for (const r of restore) r();
    },
  };
}

async function redeploy(uri: string) {
  const res = await call(s.h, s.alice, "POST", `${uri}redeploy/`);
  assert.equal(res.status, 202, res.raw);
  return res;
}

const get = async (uri: string) => (await call(s.h, s.alice, "GET", uri)).body;

describe("rolling redeploys", () => {
  test("start-first with a health check: never fewer than 4 serving, never more than 4 + max_surge running", async () => {
    const svc = await createService(s, {
      image: "app:1",
      name: "web",
      target_num_containers: 4,
      health_check: APP_CHECK,
      rollout: { order: "start-first", max_surge: 1 },
    });
    assert.deepEqual(svc.rollout, {
      order: "start-first",
      max_unavailable: 1,
      max_surge: 1,
      delay: 0,
      failure_action: "rollback",
    });
    await operate(s, svc.resource_uri, "start");
    const patched = await call(s.h, s.alice, "PATCH", svc.resource_uri, { image: "app:2" });
    assert.equal(patched.status, 200, patched.raw);
    const w = watch(svc.uuid, (c) => {
      assert.ok(c.serving >= 4, `serving ${c.serving} of 4`);
      assert.ok(c.running <= 5, `running ${c.running}, max_surge 1 over 4`);
    });
    try {
      const a = await finished(s, await redeploy(svc.resource_uri));
      assert.equal(a.state, "Success", a.log.join("\n"));
      assert.ok(
        a.log.some((l) =>
          /Rolling out revision \d+ of web: 4 container\(s\), start-first, 1 at a time/.test(l),
        ),
        a.log.join("\n"),
      );
      assert.ok(
        w.seen.some((c) => c.running === 5),
        "a new container ran beside the old ones",
      );
    } finally {
      w.stop();
    }
    const after = await until(s, svc.resource_uri, "Running");
    const cs = await containersOf(s, after);
    assert.deepEqual(
      cs.map((c) => [c.image_name, c.health]),
      Array(4).fill(["app:2", "healthy"]),
    );
    assert.deepEqual(await countOf(svc.uuid), { running: 4, serving: 4 }, "the old containers are gone");
  });

  test("stop-first never takes more than max_unavailable down", async () => {
    const svc = await createService(s, {
      image: "app:1",
      name: "batch",
      target_num_containers: 5,
      rollout: { order: "stop-first", max_unavailable: 2 },
    });
    await operate(s, svc.resource_uri, "start");
    await call(s.h, s.alice, "PATCH", svc.resource_uri, { image: "app:2" });
    const w = watch(svc.uuid, (c) => {
      assert.ok(c.serving >= 3, `serving ${c.serving}: at most 2 of 5 down`);
      assert.ok(c.running <= 5, `running ${c.running}: no surge in stop-first`);
    });
    try {
      const a = await finished(s, await redeploy(svc.resource_uri));
      assert.equal(a.state, "Success", a.log.join("\n"));
      assert.ok(a.log.includes("Batch 3 of 3: batch-5"), a.log.join("\n"));
      assert.ok(
        w.seen.some((c) => c.serving === 3),
        "two at a time were replaced",
      );
    } finally {
      w.stop();
    }
  });

  test("a new definition whose containers turn unhealthy is rolled back: the previous revision runs again", async () => {
    const svc = await createService(s, {
      image: "app:1",
      name: "guarded",
      target_num_containers: 3,
      health_check: APP_CHECK,
      rollout: { order: "start-first", max_surge: 1 },
    });
    await operate(s, svc.resource_uri, "start");
    const before = await get(svc.resource_uri);
    const revision = (await s.h.store.services.findService(svc.uuid))!.spec_version;
    await call(s.h, s.alice, "PATCH", svc.resource_uri, { image: "app:sick" });
    const w = watch(svc.uuid, (c) =>
      assert.ok(c.serving >= 3, `serving ${c.serving} of 3 during the rollout and its rollback`),
    );
    let a: Awaited<ReturnType<typeof finished>>;
    try {
      a = await finished(s, await redeploy(svc.resource_uri));
    } finally {
      w.stop();
    }
    assert.equal(a.state, "Failed", a.log.join("\n"));
    const log = a.log.join("\n");
    assert.match(log, /guarded-1 is unhealthy/);
    assert.match(log, new RegExp(`rolled back to revision ${revision}`));
    assert.ok(!log.includes("Batch 2 of 3"), "the rollout stopped at the failed batch");
    const after = await until(s, svc.resource_uri, "Running");
    assert.equal(after.image_name, "app:1", "the service's definition is the previous revision again");
    assert.equal((await s.h.store.services.findService(svc.uuid))!.spec_version, revision);
    assert.equal(after.synchronized, true);
    const cs = await containersOf(s, after);
    assert.deepEqual(
      cs.map((c) => c.image_name),
      ["app:1", "app:1", "app:1"],
    );
    assert.deepEqual(before.containers, after.containers, "the same containers, on their old definition");
    assert.deepEqual(await countOf(svc.uuid), { running: 3, serving: 3 });
  });

  test("a rollout canceled between batches leaves every container on one revision", async () => {
    const svc = await createService(s, {
      image: "app:1",
      name: "halted",
      target_num_containers: 3,
      rollout: { order: "stop-first", max_unavailable: 1, delay: 1 },
    });
    await operate(s, svc.resource_uri, "start");
    await call(s.h, s.alice, "PATCH", svc.resource_uri, { image: "app:2" });
    const res = await redeploy(svc.resource_uri);
    const uri = res.headers["x-platform-action-uri"] as string;
    await until(s, svc.resource_uri, "Redeploying");
    // Cancel while the rollout waits between its first and second batch.
    await new Promise((r) => setTimeout(r, 600));
    const cancel = await call(s.h, s.alice, "POST", `${uri}cancel/`);
    assert.equal(cancel.status, 200, cancel.raw);
    const a = await finished(s, res);
    assert.equal(a.state, "Canceled", a.log.join("\n"));
    assert.match(a.log.join("\n"), /canceled after 1 of 3 container\(s\); rolled back to revision/);
    const after = await until(s, svc.resource_uri, "Running");
    const rows = await s.h.store.services.containersOfService(svc.uuid);
    const versions = new Set(rows.filter((c) => c.state !== "Terminated").map((c) => c.spec_version));
    assert.equal(versions.size, 1, "one revision");
    assert.deepEqual([...versions], [(await s.h.store.services.findService(svc.uuid))!.spec_version]);
    assert.equal(after.synchronized, true);
  });

  test("bad strategies are refused naming the field", async () => {
    for (const [rollout, field] of [
      [{ order: "start-first", max_surge: 0 }, "rollout.max_surge"],
      [{ order: "sideways" }, "rollout.order"],
      [{ failure_action: "panic" }, "rollout.failure_action"],
      [{ max_unavailable: 0 }, "rollout.max_unavailable"],
    ] as const) {
      const res = await call(s.h, s.alice, "POST", "/api/app/v1/service/", { image: "app:1", rollout });
      assert.equal(res.status, 400, res.raw);
      assert.ok(res.raw.includes(field), `${JSON.stringify(rollout)} names ${field}: ${res.raw}`);
    }
  });
});
