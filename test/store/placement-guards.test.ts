// A node's placement guard (store/placement-guards.ts) lives as long as plans can place on the node:
// the transaction that terminates the node deletes its row, and a plan that read the node's
// generation before is still refused at commit. Runs on SQLite and PostgreSQL.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Db } from "../../src/store/db.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import { PlacementGuardStore } from "../../src/store/placement-guards.ts";
import { Store } from "../../src/store/store.ts";
import { fakeEngineNodeRow } from "../support/rows.ts";
import { targets } from "./targets.ts";

for (const target of targets) {
  describe(`placement guards on ${target.name}`, () => {
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

    const guardRows = async (namespace: string) =>
      db.kysely.selectFrom("placement_guards").selectAll().where("namespace", "=", namespace).execute();
    const place = (namespace: string, expected: Map<string, number>) =>
      store.transaction((tx) => new PlacementGuardStore(tx).advance(namespace, expected));

    test("terminating a node deletes its guard; a plan that read it is refused at commit", async () => {
      const ns = "pg-guards";
      const kept = await store.nodes.insertNode(fakeEngineNodeRow(ns, 1));
      const ended = await store.nodes.insertNode(fakeEngineNodeRow(ns, 1));
      await place(
        ns,
        new Map([
          [kept.uuid, 0],
          [ended.uuid, 0],
        ]),
      );
      await place(ns, new Map([[ended.uuid, 1]]));
      const read = await new PlacementGuardStore(store).generations(ns);
      assert.deepEqual(
        [...read].sort(),
        [
          [kept.uuid, 1],
          [ended.uuid, 2],
        ].sort(),
      );

      const terminated = await store.mutate("node", ended.uuid, () => ({ phase: null, destroyed_at: 2 }));
      assert.equal(terminated?.state, "Terminated");
      assert.deepEqual(
        (await guardRows(ns)).map((r) => r.node_uuid),
        [kept.uuid],
        "only the live node keeps a guard",
      );
      // A plan made over the snapshot read before the node ended.
      const late = await place(ns, new Map([[ended.uuid, read.get(ended.uuid)!]]));
      assert.deepEqual(late.stale, [ended.uuid]);
    });

    test("a node's other writes leave its guard alone", async () => {
      const ns = "pg-guards-live";
      const node = await store.nodes.insertNode(fakeEngineNodeRow(ns, 1));
      await place(ns, new Map([[node.uuid, 0]]));
      await store.mutate("node", node.uuid, () => ({ nickname: "renamed" }));
      await store.mutate("node", node.uuid, () => ({ phase: "terminating" as const }));
      assert.deepEqual(
        (await guardRows(ns)).map((r) => [r.node_uuid, Number(r.generation)]),
        [[node.uuid, 1]],
      );
    });
  });
}
