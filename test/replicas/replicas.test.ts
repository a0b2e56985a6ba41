// Three Berth processes on one PostgreSQL and one real Docker engine (issue 16). A service deploy of
// six containers is started through replica A and A is SIGKILLed in the middle: B or C finishes it
// under the action's lease, without duplicating containers. An events subscriber on C sees every
// change made through A and B, in revision order, none missing (compared with the feed table). The
// node's watcher moves to a live replica when its owner dies, and a container killed on the engine
// afterwards is still noticed (the periodic reconcile is set far off, so only a watcher can).
//
// Run under the real-engine lock: flock /tmp/berth-real.lock node scripts/test.mjs test/replicas/
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import Docker from "dockerode";
import { openStream, type StreamClient } from "../streams/support.ts";
import { dockerdUnavailable, type PrivateDockerd, startPrivateDockerd } from "../support/dockerd.ts";
import { waitFor } from "../support/harness.ts";
import {
  adminAuth,
  api,
  cleanup,
  type FreshDatabase,
  freshPgDatabase,
  kill,
  pgUnavailable,
  type Replica,
  startReplica,
} from "./support.ts";

const pgMissing = pgUnavailable();
const engineMissing = dockerdUnavailable();
if (engineMissing && process.env.CI === "true") {
  throw new Error(`the replica tier needs a real engine in CI: ${engineMissing}`);
}
const skip = pgMissing ?? (engineMissing ? `real engines unavailable: ${engineMissing}` : false);

const GRACE_MS = 8000;
const ENV = {
  BERTH_ACTION_LEASE_MS: "1500",
  BERTH_ACTION_POLL_MS: "200",
  BERTH_REPLICA_LEASE_MS: "2000",
  BERTH_NODE_HEALTH_INTERVAL_MS: "500",
  BERTH_NODE_UNREACHABLE_GRACE_MS: String(GRACE_MS),
  // Only an engine watcher can notice a container dying in time: the periodic pass is far off.
  BERTH_RECONCILE_INTERVAL_MS: "600000",
  BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
  BERTH_SHUTDOWN_TIMEOUT_MS: "5000",
  BERTH_LOGIN_MAX_FAILURES_PER_USER: "4",
};

describe("three replicas on one PostgreSQL", { skip, timeout: 900_000 }, () => {
  let engine: PrivateDockerd | undefined;
  let db: FreshDatabase | undefined;
  const replicas: Record<string, Replica> = {};
  let events: StreamClient | undefined;

  before(async () => {
    engine = await startPrivateDockerd();
    db = await freshPgDatabase("berth_replicas");
  });
  after(async () => {
    events?.close();
    for (const r of Object.values(replicas)) cleanup(r);
    await db?.drop();
    await engine?.stop();
  });

  test("replicas started together on an empty database migrate it once and are all ready", {
    timeout: 290_000,
  }, async () => {
    const [a, b, c] = await Promise.all(
      ["A", "B", "C"].map((name) => startReplica(name, { ...ENV, BERTH_DATABASE_URL: db!.url })),
    );
    Object.assign(replicas, { A: a, B: b, C: c });
    for (const r of [a!, b!, c!]) {
      const ready = await api(r, "GET", "/readyz");
      assert.equal(ready.status, 200, `${r.name}: ${JSON.stringify(ready.body)}`);
    }
    const live = await db!.store.replicas.liveReplicas(Date.now() - 5000);
    assert.deepEqual(live.map((r) => r.id).sort(), ["A", "B", "C"]);
  });

  test("failed sign-ins count across replicas: the limit holds whichever replica a guess reaches", async () => {
    const { A, B, C } = replicas as { A: Replica; B: Replica; C: Replica };
    const tryPassword = async (r: Replica, password: string) =>
      (
        await fetch(`${r.base}/api/v1.1/users/admin/`, {
          headers: { authorization: `Basic ${Buffer.from(`admin:${password}`).toString("base64")}` },
        })
      ).status;
    for (const r of [A, B, C, A]) assert.equal(await tryPassword(r, "wrong-password"), 401, r.name);
    const locked = await tryPassword(B, "admin-password");
    assert.equal(locked, 429, "the fifth try, on another replica, is refused even with the right password");
    // API keys are never limited.
    assert.equal((await api(C, "GET", "/api/app/v1/service/")).status, 200);
  });

  test("a deploy through A survives A's SIGKILL; C's events match the feed; watchers move on", async () => {
    const { A, B, C } = replicas as { A: Replica; B: Replica; C: Replica };
    const store = db!.store;
    const docker = new Docker({ socketPath: engine!.socketPath });

    // The subscriber on C resumes from the revision before any of this, so nothing can slip by.
    const before = await store.latestRevision();
    events = await openStream(`ws://127.0.0.1:${C.port}/api/audit/v1/events/?since=${before}`, {
      auth: adminAuth,
    });

    const node = await api(A, "POST", "/api/infra/v1/node/", {
      engine_url: `unix://${engine!.socketPath}`,
      nickname: "shared engine",
    });
    assert.equal(node.status, 201, JSON.stringify(node.body));
    const nodeUuid: string = node.body.uuid;

    const created = await api(A, "POST", "/api/app/v1/service/", {
      name: "six",
      image: "busybox:local",
      run_command: "sleep 100000",
      target_num_containers: 6,
      // One container after another: the deploy lasts long enough to be cut in the middle.
      sequential_deployment: true,
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const serviceUri: string = created.body.resource_uri;
    const serviceUuid: string = created.body.uuid;
    const started = await api(A, "POST", `${serviceUri}start/`);
    assert.equal(started.status, 202, JSON.stringify(started.body));
    const actionUri = started.headers.get("x-platform-action-uri")!;
    const actionUuid = actionUri.split("/").filter(Boolean).at(-1)!;

    // A is killed while the deploy is under way: some containers run, the action is not finished.
    await waitFor(
      "the deploy to be under way on A",
      async () => {
        const cs = await store.services.containersOfService(serviceUuid);
        return cs.some((c) => c.engine_id !== null);
      },
      60_000,
      20,
    );
    await kill(A);
    const atKill = await store.actions.findAction(actionUuid);
    assert.equal(atKill?.state, "In progress", "A died with the deploy unfinished");
    assert.equal(atKill?.lease_owner, "A");
    const runningAtKill = (await store.services.containersOfService(serviceUuid)).filter(
      (c) => c.state === "Running",
    ).length;
    assert.ok(runningAtKill < 6, `A died before the sixth container ran (${runningAtKill} ran)`);

    const done = await waitFor(
      "B or C to finish the deploy",
      async () => {
        const a = await store.actions.findAction(actionUuid);
        return a && (a.state === "Success" || a.state === "Failed") ? a : undefined;
      },
      90_000,
      100,
    );
    assert.ok(done.state === "Success" || done.state === "Failed", done.state);
    const log = (await store.actions.actionLogTail(actionUuid, 100)).map((l) => l.line);
    assert.ok(
      log.some((l) => l.startsWith("Resuming at step 1")),
      log.join("\n"),
    );
    const svc = await api(B, "GET", serviceUri);
    assert.equal(svc.body.state, "Running");
    const onEngine = await docker.listContainers({
      all: true,
      filters: { label: [`io.berth.service=${serviceUuid}`] },
    });
    assert.equal(onEngine.length, 6, "six engine containers, none duplicated by the resumed step");

    // A change through B, then every action of the installation has ended Success or Failed.
    const second = await api(B, "POST", "/api/app/v1/service/", {
      name: "second",
      image: "busybox:local",
      run_command: "sleep 100000",
    });
    assert.equal(second.status, 201);
    const unfinished = await waitFor("every action to end", async () => {
      const { rows } = await store.actions.listActions({ namespaces: ["admin"], limit: 1000, offset: 0 });
      return rows.every((r) => r.state === "Success" || r.state === "Failed") ? rows : undefined;
    });
    assert.ok(unfinished.length > 0);

    // C saw every change of the feed after `before`, in order, none missing.
    const expected = (await store.changesSince(before, 10_000))
      .filter((c) => c.namespace === "admin")
      .map((c) => Number(c.revision));
    const last = expected.at(-1)!;
    const frames = await events.until("C to have seen the last change", (f) =>
      f.some((x) => x.revision === last),
    );
    const seen = frames.map((f) => f.revision as number).filter((r) => r <= last);
    assert.deepEqual(seen, expected);
    assert.ok(
      frames.some((f) => f.resource_uri === serviceUri && f.action === "create"),
      "the service created through A",
    );
    assert.ok(
      frames.some((f) => f.resource_uri === second.body.resource_uri && f.action === "create"),
      "the service created through B",
    );

    // The node's watcher: owned by a live replica within the grace after A's death.
    const ownerOf = async () => {
      const lease = (await store.replicas.listLeases(`node:${nodeUuid}`))[0];
      return lease && lease.until > Date.now() ? lease.owner : undefined;
    };
    const owner = await waitFor(
      "a live replica to watch the node",
      async () => {
        const o = await ownerOf();
        return o === "B" || o === "C" ? o : undefined;
      },
      GRACE_MS,
      100,
    );
    // Its owner dies too: the survivor takes the node over within the grace.
    const survivor = owner === "B" ? C : B;
    await kill(owner === "B" ? B : C);
    await waitFor(
      "the survivor to watch the node",
      async () => (await ownerOf()) === survivor.name,
      GRACE_MS,
      100,
    );

    // A container killed on the engine now is noticed through the survivor's watcher.
    const victim = (await store.services.containersOfService(serviceUuid))[0]!;
    await docker.getContainer(victim.engine_id!).kill();
    const seenStopped = await waitFor(
      "the killed container to be noticed",
      async () => {
        const res = await api(survivor, "GET", `/api/app/v1/container/${victim.uuid}/`);
        return res.body?.state === "Stopped" ? res.body : undefined;
      },
      15_000,
      100,
    );
    assert.equal(seenStopped.state, "Stopped");
    const nodeNow = await api(survivor, "GET", `/api/infra/v1/node/${nodeUuid}/`);
    assert.equal(nodeNow.body.state, "Deployed", "its health checks kept it Deployed");
  });
});
