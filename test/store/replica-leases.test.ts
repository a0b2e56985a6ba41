// A replica's heartbeat (ops/replicas.ts) takes and renews every lease it wants (its share of the
// nodes' watchers and the once-only jobs) in one statement, whatever the number of nodes; two
// replicas still split the nodes between them, each lease held by one. Runs on SQLite and PostgreSQL.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ReplicaCoordinator } from "../../src/ops/replicas.ts";
import type { Db } from "../../src/store/db.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import { Store } from "../../src/store/store.ts";
import { targets } from "./targets.ts";

for (const target of targets) {
  describe(`replica leases on ${target.name}`, () => {
    let db: Db;
    let cleanup: () => Promise<void>;
    let store: Store;

    before(async () => {
      ({ db, cleanup } = await target.open());
      await migrateToLatest(db.kysely, db.dialect);
      store = new Store(db.kysely, db.dialect);
    });
    after(async () => {
      await cleanup?.();
    });

    test("a heartbeat's leases cost one statement for 300 nodes; two replicas split them", async () => {
      const nodes = Array.from({ length: 300 }, (_, i) => `node-${String(i).padStart(3, "0")}`);
      const now = Date.now();
      const replica = (id: string) =>
        new ReplicaCoordinator({
          store,
          clock: { now: () => now },
          replicaId: id,
          leaseMs: 10_000,
          nodesToWatch: async () => nodes,
        });
      const a = replica("replica-a");
      const b = replica("replica-b");
      await a.tick();
      await b.tick();
      // a's second beat sees b alive: it hands b's preferred nodes over and renews its own.
      await a.tick();
      const { statements } = await db.statements.during(() => b.tick());
      // The heartbeat row, the live replicas, the leases as they are, and one statement for every
      // lease it takes or renews (a handed b its preferred nodes: b takes them in that one too).
      assert.ok(statements <= 4, `${statements} statements for one heartbeat`);
      const owned = [...a.ownedNodes(), ...b.ownedNodes()].sort();
      assert.deepEqual(owned, nodes, "every node is watched by exactly one replica");
      assert.ok(a.ownedNodes().length > 0 && b.ownedNodes().length > 0);
      const leases = await store.replicas.listLeases("node:");
      assert.equal(leases.length, 300);
      for (const l of leases) assert.equal(l.owner, b.ownsNode(l.name.slice(5)) ? "replica-b" : "replica-a");
      assert.ok(a.leads("reconcile") !== b.leads("reconcile"), "one replica leads each job");
    });
  });
}
