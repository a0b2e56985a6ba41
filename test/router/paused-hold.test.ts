// A paused rollout's holds (issues 29 and 30, router/drains.ts): a start-first rollout with
// `failure_action: pause` that pauses keeps the old container of the failed batch routed, shown as
// held, for as long as it is paused (not for a fixed time); resuming it (a redeploy) releases the
// hold, and the old container leaves the routes and stops; a stop releases it at once; a hold that
// outlived its rollout (a crash between the end of the pause and the release) is released by the
// router controller's periodic pass. Simulated nodes: fake engines, fake routers, HTTP checks.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { LABELS } from "../../src/domain/service.ts";
import type { Drains } from "../../src/router/drains.ts";
import {
  APP_CHECK,
  APP_IMAGES,
  call,
  createService,
  deployCluster,
  finished,
  operate,
  type Sim,
  startSim,
  until,
  waitFor,
} from "../services/sim.ts";
import { freshDatabaseUrl } from "../support/harness.ts";

const onPostgres = process.env.BERTH_TEST_DATABASE_URL?.startsWith("postgres") ?? false;

let s: Sim;
let db: { url: string; cleanup(): Promise<void> } | undefined;

before(async () => {
  if (onPostgres) db = await freshDatabaseUrl("");
  s = await startSim({
    registry: APP_IMAGES,
    env: {
      ...(db ? { BERTH_DATABASE_URL: db.url } : {}),
      BERTH_ROUTER_DRAIN_GRACE_MS: "0",
      BERTH_ROUTER_INTERVAL_MS: "200",
    },
  });
  await deployCluster(s, { name: "pool", target_num_nodes: 1 });
});
after(async () => {
  await s?.close();
  await db?.cleanup();
});

interface Upstream {
  container: string;
  name: string;
  address: string;
  held: boolean;
}

async function upstreams(uri: string): Promise<Upstream[]> {
  const res = await call(s.h, s.alice, "GET", `${uri}routes/`);
  assert.equal(res.status, 200, res.raw);
  return ((res.body.objects[0]?.upstreams ?? []) as Upstream[]).sort((a, b) => a.name.localeCompare(b.name));
}

/** The service's engine containers that run, on every node. */
async function runningOf(serviceUuid: string): Promise<string[]> {
  const ids: string[] = [];
  for (const e of s.engines.values())
    for (const c of await e.listContainers({ labels: { [LABELS.service]: serviceUuid } }))
      if ((await e.inspectContainer(c.id))?.running) ids.push(c.id);
  return ids;
}

/** A service of 2 healthy containers behind `host`, whose start-first rollout to a failing image paused. */
async function paused(name: string, host: string) {
  const svc = await createService(s, {
    image: "app:1",
    name,
    target_num_containers: 2,
    health_check: APP_CHECK,
    domains: [{ host, tls: "off" }],
    rollout: { order: "start-first", max_surge: 1, failure_action: "pause" },
  });
  await operate(s, svc.resource_uri, "start");
  await until(s, svc.resource_uri, "Running");
  const before = await waitFor("both containers routed", async () => {
    const u = await upstreams(svc.resource_uri);
    return u.length === 2 ? u : undefined;
  });
  const patched = await call(s.h, s.alice, "PATCH", svc.resource_uri, { image: "app:sick" });
  assert.equal(patched.status, 200, patched.raw);
  const res = await call(s.h, s.alice, "POST", `${svc.resource_uri}redeploy/`);
  assert.equal(res.status, 202, res.raw);
  const a = await finished(s, res);
  assert.equal(a.state, "Failed", a.log.join("\n"));
  assert.match(a.log.join("\n"), /the rollout is paused after 1 of 2 container/);
  // The first container's old engine container is held: routed at its old address, shown held.
  const during = await upstreams(svc.resource_uri);
  assert.deepEqual(
    during.map((u) => [u.name, u.address, u.held]),
    before.map((u, i) => [u.name, u.address, i === 0]),
    "paused: the failed batch's old container stays routed, held; the other is untouched",
  );
  return { svc, held: during[0]! };
}

const drainsOf = (): Drains => s.h.router.drains;
/** The drains' clock (what their rows' times are read against). */
const drainsClock = () => (s.h.router.drains as unknown as { d: { now(): number } }).d;

describe("a rollout paused after a failure", () => {
  test("keeps its old container routed and held while paused, past the running cap; a redeploy resumes it and releases the hold", async () => {
    const { svc, held } = await paused("paused", "paused.test");
    // An hour later the rollout is still paused: the old container is still routed (before, a
    // hold lasted 30 minutes whatever the rollout's state).
    const drains = drainsOf();
    const clock = drainsClock();
    const realNow = clock.now;
    clock.now = () => Date.now() + 60 * 60_000;
    try {
      const later = await upstreams(svc.resource_uri);
      assert.deepEqual(
        later.map((u) => [u.address, u.held]),
        [
          [held.address, true],
          [later[1]!.address, false],
        ],
        "an hour later the paused rollout's old container is still routed and held",
      );
    } finally {
      clock.now = realNow;
    }

    // Resumed with a fixed image: the hold is released, its container no longer routed nor running.
    assert.equal((await call(s.h, s.alice, "PATCH", svc.resource_uri, { image: "app:2" })).status, 200);
    const res = await call(s.h, s.alice, "POST", `${svc.resource_uri}redeploy/`);
    const a = await finished(s, res);
    assert.equal(a.state, "Success", a.log.join("\n"));
    const after = await upstreams(svc.resource_uri);
    assert.equal(after.length, 2);
    // (An address may be given again by the engine: the old container is known gone by the count.)
    assert.deepEqual(
      after.map((u) => u.held),
      [false, false],
      `resumed: nothing held (${JSON.stringify(after)})`,
    );
    assert.deepEqual((await drains.state("alice")).held, [], "no hold left");
    assert.equal((await runningOf(svc.uuid)).length, 2, "the old container stopped: 2 run, the new ones");
  });

  test("a stop releases the hold at once", async () => {
    const { svc } = await paused("stopped", "stopped.test");
    await operate(s, svc.resource_uri, "stop");
    await until(s, svc.resource_uri, "Stopped");
    assert.deepEqual(await upstreams(svc.resource_uri), [], "nothing routed, nothing held");
    const held = (await drainsOf().state("alice")).held.filter((c) => c.service_uuid === svc.uuid);
    assert.deepEqual(held, [], "no hold left");
    assert.deepEqual(await runningOf(svc.uuid), [], "the old container stopped with its record");
  });

  test("a hold that outlived its rollout (its record no longer meant to run) is released by the periodic pass", async () => {
    const { svc, held } = await paused("crashed", "crashed.test");
    // As after a crash between the end of the pause and its release: the record was told to stop,
    // but nothing released the hold.
    await s.h.store.services.patchContainers([held.container.split("/").at(-2)!], () => ({
      desired: "stopped",
    }));
    await waitFor("the periodic pass releases the hold", async () => {
      const h = (await drainsOf().state("alice")).held.filter((c) => c.service_uuid === svc.uuid);
      return h.length === 0 || undefined;
    });
    const now = await upstreams(svc.resource_uri);
    assert.deepEqual(
      now.map((u) => [u.name, u.held]),
      [["crashed-2", false]],
      `the released container is no longer routed (${JSON.stringify(now)})`,
    );
  });
});
