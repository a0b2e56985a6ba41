// Queries whose cost must follow the rows they answer, asked of the database's own planner: the
// live containers of a page of nodes are counted from the index of live containers alone
// (`containers_live_node`, migration 0017), never by reading the namespace's containers nor the
// terminated containers the nodes ran before. Runs on SQLite (EXPLAIN QUERY PLAN) and PostgreSQL
// (EXPLAIN, with sequential scans priced out so that a small table shows which index serves it).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { CompiledQuery, sql } from "kysely";
import type { Db } from "../../src/store/db.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import { newContainerRow } from "../../src/store/services.ts";
import { Store } from "../../src/store/store.ts";
import { fakeEngineNodeRow } from "../support/rows.ts";
import { targets } from "./targets.ts";

for (const target of targets) {
  describe(`query plans on ${target.name}`, () => {
    let db: Db;
    let store: Store;
    let cleanup: () => Promise<void>;
    const nodes: string[] = [];

    before(async () => {
      ({ db, cleanup } = await target.open());
      await migrateToLatest(db.kysely, db.dialect);
      store = new Store(db.kysely, db.dialect);
      const now = Date.now();
      const service = { namespace: "plans", uuid: randomUUID(), name: "web", spec: "{}", spec_version: 1 };
      await store.transaction(async (tx) => {
        for (let i = 0; i < 20; i++) {
          const n = await tx.nodes.insertNode(fakeEngineNodeRow("plans", now, { slot: i }));
          nodes.push(n.uuid);
          // Each node ran many containers before the two it runs now.
          for (let k = 0; k < 22; k++) {
            await tx.services.insertContainer(
              newContainerRow(service, n.uuid, i * 100 + k, now, {
                phase: null,
                observed: "running",
                destroyed_at: k < 20 ? now : null,
              }),
            );
          }
        }
      });
      // The planner's statistics, as a server that has run a while has them.
      await sql`analyze`.execute(db.kysely);
    });
    after(() => cleanup?.());

    /** The plan of each statement `fn` runs, as text. */
    async function plansOf(fn: () => Promise<unknown>): Promise<string[]> {
      const { queries } = await db.statements.queriesDuring(fn);
      assert.ok(queries.length > 0, "the store ran a statement");
      const plans: string[] = [];
      for (const q of queries) {
        if (db.dialect === "sqlite") {
          const r = await db.kysely.executeQuery<{ detail: string }>(
            CompiledQuery.raw(`explain query plan ${q.sql}`, [...q.parameters]),
          );
          plans.push(r.rows.map((x) => x.detail).join("\n"));
        } else {
          plans.push(
            await db.kysely.transaction().execute(async (tx) => {
              await sql`set local enable_seqscan = off`.execute(tx);
              const r = await tx.executeQuery<{ "QUERY PLAN": string }>(
                CompiledQuery.raw(`explain ${q.sql}`, [...q.parameters]),
              );
              return r.rows.map((x) => x["QUERY PLAN"]).join("\n");
            }),
          );
        }
      }
      return plans;
    }

    test("the live containers of a page of nodes are counted from the index of live containers alone", async () => {
      let counts = new Map<string, number>();
      const plans = await plansOf(async () => {
        counts = await store.services.countLiveContainersOnNodes(nodes.slice(0, 10));
      });
      assert.deepEqual([...counts.values()], Array(10).fill(2), "two live containers on each node");
      for (const plan of plans) {
        if (db.dialect === "sqlite") {
          assert.match(plan, /USING COVERING INDEX containers_live_node\b/, plan);
        } else {
          assert.match(plan, /containers_live_node\b/, plan);
          assert.doesNotMatch(plan, /Seq Scan/, plan);
        }
      }
    });

    test("a node's live containers are read through the index of live containers", async () => {
      let live = 0;
      const plans = await plansOf(async () => {
        live = (await store.services.liveContainers({ node: nodes[3]! })).length;
      });
      assert.equal(live, 2);
      for (const plan of plans) assert.match(plan, /containers_live_node\b/, plan);
    });
  });
}
