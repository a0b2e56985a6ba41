// A migration keeps what users see of the data it finds. Migration 0013 split containers' and
// nodes' `state` into an action's `phase` and an engine's `observed` and backfilled both from
// `state`: rows written by a Berth of migration 0012 — one per state a container or node can be
// in, with and without an engine container where that matters — must show the same state after
// the upgrade, derived the way the store derives it now (domain/states.ts). Runs on SQLite and
// PostgreSQL.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { sql } from "kysely";
import { containerState, nodeState } from "../../src/domain/states.ts";
import { newNodeRow } from "../../src/nodes/records.ts";
import type { Db } from "../../src/store/db.ts";
import { migrateToLatest, migrateUpTo } from "../../src/store/migrations.ts";
import { newContainerRow } from "../../src/store/services.ts";
import { targets } from "./targets.ts";

const NOW = 1_800_000_000_000;
const SERVICE = {
  namespace: "mig",
  uuid: "a0000000-0000-4000-8000-000000000001",
  name: "web",
  spec: "{}",
  spec_version: 1,
};
const CLUSTER = "c0000000-0000-4000-8000-000000000001";

/** The containers of a 0012 database: a state, and whether the engine had made the container. */
const CONTAINERS: { state: string; engine: boolean }[] = [
  { state: "Starting", engine: false },
  { state: "Starting", engine: true },
  { state: "Running", engine: true },
  { state: "Stopping", engine: true },
  { state: "Stopped", engine: true },
  { state: "Stopped", engine: false },
  { state: "Terminating", engine: true },
  { state: "Terminated", engine: true },
  { state: "Terminated", engine: false },
];
const NODES = ["Deploying", "Deployed", "Unreachable", "Upgrading", "Terminating", "Terminated"];

for (const target of targets) {
  describe(`migration 0013 on ${target.name}: states survive the split into phase and observed`, () => {
    let db: Db;
    let cleanup: () => Promise<void>;
    const containerUuids = new Map<string, string>();
    const nodeUuids = new Map<string, string>();

    before(async () => {
      ({ db, cleanup } = await target.open());
      await migrateUpTo(db.kysely, db.dialect, "0012_container_environment");
      const columns = async (table: string) => {
        const { rows } =
          db.dialect === "postgres"
            ? await sql<{ name: string }>`select column_name as name from information_schema.columns
                where table_schema = current_schema() and table_name = ${table}`.execute(db.kysely)
            : await sql<{ name: string }>`select name from pragma_table_info(${table})`.execute(db.kysely);
        return new Set(rows.map((r) => r.name));
      };
      // Rows as 0012 stored them: today's row builders, narrowed to the columns of that time.
      const narrowed = (row: Record<string, unknown>, cols: Set<string>) =>
        Object.fromEntries(Object.entries(row).filter(([k]) => cols.has(k)));
      const containerCols = await columns("containers");
      const nodeCols = await columns("nodes");
      assert.ok(containerCols.has("state") && !containerCols.has("phase"), "a database of migration 0012");
      for (const [i, c] of CONTAINERS.entries()) {
        const row = newContainerRow(SERVICE, "d0000000-0000-4000-8000-000000000001", i + 1, NOW, {
          engine_id: c.engine ? `engine-${i}` : null,
          stopped_at: c.state === "Stopped" ? NOW + 5 : null,
        });
        containerUuids.set(`${c.state}/${c.engine}`, row.uuid);
        await db.kysely
          .insertInto("containers")
          .values({ ...narrowed(row, containerCols), state: c.state, version: 1 } as never)
          .execute();
      }
      for (const [i, state] of NODES.entries()) {
        const row = newNodeRow({
          uuid: `d0000000-0000-4000-8000-00000000000${i + 1}`,
          namespace: "mig",
          cluster_uuid: CLUSTER,
          provider: "aws",
          region: "us-east-1",
          node_type: "t2.micro",
          phase: null,
          created: NOW,
        });
        nodeUuids.set(state, row.uuid);
        await db.kysely
          .insertInto("nodes")
          .values({
            ...narrowed(row as unknown as Record<string, unknown>, nodeCols),
            state,
            version: 1,
          } as never)
          .execute();
      }
      await migrateToLatest(db.kysely, db.dialect);
    });
    after(async () => {
      await cleanup?.();
    });

    test("every container shows the state it had, derived from its phase and what was observed", async () => {
      const rows = await db.kysely.selectFrom("containers").selectAll().execute();
      for (const c of CONTAINERS) {
        const key = `${c.state}/${c.engine}`;
        const r = rows.find((x) => x.uuid === containerUuids.get(key));
        assert.ok(r, key);
        assert.equal(containerState(r), c.state, `${key}: phase ${r.phase}, observed ${r.observed}`);
        assert.equal(r.state, c.state, `${key}: the stored state column`);
      }
      // Only an unfinished operation leaves a phase; a terminated container has a destroy time.
      const phases = Object.fromEntries(
        rows.map((r) => [CONTAINERS[r.number - 1]!.state + (r.engine_id ? "+engine" : ""), r.phase]),
      );
      assert.deepEqual(phases, {
        Starting: "starting",
        "Starting+engine": null,
        "Running+engine": null,
        "Stopping+engine": "stopping",
        "Stopped+engine": null,
        Stopped: null,
        "Terminating+engine": "terminating",
        "Terminated+engine": null,
        Terminated: null,
      });
      for (const r of rows.filter((x) => x.state === "Terminated")) assert.notEqual(r.destroyed_at, null);
    });

    test("every node shows the state it had", async () => {
      const rows = await db.kysely.selectFrom("nodes").selectAll().execute();
      for (const state of NODES) {
        const r = rows.find((x) => x.uuid === nodeUuids.get(state));
        assert.ok(r, state);
        assert.equal(nodeState(r), state, `${state}: phase ${r.phase}, observed ${r.observed}`);
      }
    });
  });
}
