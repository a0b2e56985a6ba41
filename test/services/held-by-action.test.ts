// Containers an action of this process holds are left to it by the reconciler without a read
// (ActionEngine.runsOnAny): their change-feed entries (link host checks) and their engines'
// events would find them busy, and a large deploy's every container was read for nothing.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { call, createService, deployCluster, type Sim, startSim, until, waitFor } from "./sim.ts";

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
