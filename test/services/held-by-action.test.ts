// Containers an action of this process holds are left to it by the reconciler without a read
// (ActionEngine.runsOnAny): their change-feed entries (link host checks) and their engines'
// events would find them busy, and a large deploy's every container was read for nothing. What
// the engine reports of them meanwhile is not lost: an end of the container a record holds is
// looked at again once the action is over.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import {
  call,
  containersOf,
  createService,
  deployCluster,
  engineContainer,
  finished,
  runningService,
  type Sim,
  startSim,
  until,
  waitFor,
} from "./sim.ts";

let s: Sim;

before(async () => {
  // No periodic pass (its orphan sweep reads every container of a node): what is read is what
  // the start's changes and engine events bring.
  s = await startSim({ env: { BERTH_RECONCILE_INTERVAL_MS: "3600000" } });
  await deployCluster(s, { name: "pool", target_num_nodes: 2 });
  // One pass now: it starts the watchers of the nodes' engine events (and sweeps what is there).
  await s.h.reconciler.resync();
});
after(() => s.close());

/** A running service of one container, with that container and its engine container. */
async function oneRunning(name: string) {
  const svc = await runningService(s, { name, target_num_containers: 1 });
  const [c] = await containersOf(s, svc);
  return { svc, c, ...(await engineContainer(s, c.resource_uri)) };
}

/** The container's record once it says Stopped (within 5 s, far before any periodic pass). */
async function recordedStopped(uuid: string) {
  return waitFor(
    "the record says the container stopped",
    async () => {
      const r = await s.h.store.services.findContainer(uuid);
      return r?.state === "Stopped" ? r : undefined;
    },
    5000,
  );
}

describe("link hosts while an action holds the service", () => {
  test("a sequential start's containers are left to it: the reconciler asks the store nothing about them meanwhile", async () => {
    // Each container of a sequential service follows its started siblings, so each start changes
    // the siblings' desired entries and brings them through the change feed. The start rewrites
    // nothing meanwhile (the action holds them): the reconciler, in the process that runs the
    // action, leaves them without reading them or asking whether they are busy.
    const svc = await createService(s, {
      image: "busybox:local",
      run_command: "sleep 100000",
      name: "seq-held",
      target_num_containers: 4,
      sequential_deployment: true,
    });
    // Watched until three run: the action still holds the service (its fourth container is next).
    const { queries } = await s.h.db.statements.queriesDuring(async () => {
      const res = await call(s.h, s.alice, "POST", `${svc.resource_uri}start/`);
      assert.equal(res.status, 202, res.raw);
      await waitFor("three running", async () => {
        const rows = await s.h.store.services.containersOfService(svc.uuid);
        return rows.filter((c) => c.state === "Running").length >= 3 || undefined;
      });
    });
    const uuids = new Set((await s.h.store.services.containersOfService(svc.uuid)).map((c) => c.uuid));
    // The reconciler's reads of the containers' link hosts (Reconciler.followLinksQueued).
    const linkReads = queries.filter(
      (q) => /"link_hosts" from "containers"/.test(q.sql) && q.parameters.some((p) => uuids.has(String(p))),
    );
    assert.deepEqual(
      linkReads.map((q) => q.sql),
      [],
    );
    const after = await until(s, svc.resource_uri, "Running");
    assert.equal(after.containers.length, 4);
  });
});

describe("a container that ends while an action holds its service", () => {
  test("is recorded as it ended once the action is over, not at the next periodic pass (an hour away)", async () => {
    const { svc, c, engine, id } = await oneRunning("ends-held");
    // A scale-up whose engine work is held: its action holds the service meanwhile.
    const releases = [...s.engines.values()].map((e) => e.hold());
    assert.equal(
      (await call(s.h, s.alice, "PATCH", svc.resource_uri, { target_num_containers: 2 })).status,
      200,
    );
    const scale = await call(s.h, s.alice, "POST", `${svc.resource_uri}scale/`);
    assert.equal(scale.status, 202, scale.raw);
    await waitFor("the new container's create held", async () =>
      [...s.engines.values()].some((e) => e.waiting > 0),
    );
    // The running container's process exits by itself: its engine's die event finds the record
    // held by the scale, which leaves it alone.
    engine.exitProcess(id, 3);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal((await s.h.store.services.findContainer(c.uuid))?.state, "Running", "left to the action");
    for (const release of releases) release();
    const a = await finished(s, scale);
    assert.equal(a.state, "Success", a.log.join("\n"));
    const row = await recordedStopped(c.uuid);
    assert.equal(row.exit_code, 3);
    assert.equal(row.engine_id, id);
  });
});

describe("a container that ends while another replica's action holds its service", () => {
  test("is recorded as it ended once that action is over", async () => {
    const { svc, c, engine, id } = await oneRunning("ends-elsewhere");
    // Another replica's worker runs an action on the service, under a lease of its own: this
    // process learns that it holds the service from the store only.
    const now = Date.now();
    const held = await s.h.store.actions.insertAction(
      {
        uuid: randomUUID(),
        namespace: svc.resource_uri.split("/")[4],
        object: svc.resource_uri,
        action: "Service Scale",
        kind: "service.scale",
        params: JSON.stringify({ service: svc.uuid }),
        method: "POST",
        path: `${svc.resource_uri}scale/`,
        user: "alice",
        user_agent: "test",
        ip: "127.0.0.1",
        location: "",
        start_date: now,
        end_date: null,
        state: "In progress",
        is_user_action: 1,
      },
      { owner: "another-replica", until: now + 3_600_000 },
    );
    engine.exitProcess(id, 4);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal((await s.h.store.services.findContainer(c.uuid))?.state, "Running", "left to that action");
    await s.h.store.actions.updateAction(held, {
      state: "Success",
      end_date: Date.now(),
      lease_owner: null,
      lease_until: null,
    });
    const row = await recordedStopped(c.uuid);
    assert.equal(row.exit_code, 4);
  });
});
