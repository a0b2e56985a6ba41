// Every column of a container record can be written by `updateContainers`, whatever its type, on
// both dialects: the columns come from the database's own catalogue, so a column a migration adds
// is covered the day it exists. (On PostgreSQL a batch is one UPDATE whose columns are each a CASE
// of parameters, which PostgreSQL types as text: an integer column once had to be named in a hand
// list to get a cast, and one that was missed broke every batch writing it.)
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { sql } from "kysely";
import type { Db } from "../../src/store/db.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import { newContainerRow } from "../../src/store/services.ts";
import { Store } from "../../src/store/store.ts";
import { targets } from "./targets.ts";

/** Columns no caller writes (identity, version, the derived state) or that hold a closed set of words. */
const NOT_WRITTEN_HERE = new Set(["id", "uuid", "version", "state", "phase", "observed", "health"]);

interface Column {
  name: string;
  integer: boolean;
  nullable: boolean;
}

async function containerColumns(db: Db): Promise<Column[]> {
  if (db.dialect === "sqlite") {
    const { rows } = await sql<{
      name: string;
      type: string;
      notnull: number;
    }>`pragma table_info(containers)`.execute(db.kysely);
    return rows.map((r) => ({ name: r.name, integer: /int/i.test(r.type), nullable: r.notnull === 0 }));
  }
  const { rows } = await sql<{ column_name: string; data_type: string; is_nullable: string }>`
    select column_name, data_type, is_nullable from information_schema.columns
    where table_schema = current_schema() and table_name = 'containers'`.execute(db.kysely);
  return rows.map((r) => ({
    name: r.column_name,
    integer: /int/i.test(r.data_type),
    nullable: r.is_nullable === "YES",
  }));
}

for (const target of targets) {
  describe(`container columns on ${target.name}`, () => {
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

    test("updateContainers writes every column of the table, integers and nulls included, in one batch", async () => {
      const columns = (await containerColumns(db)).filter((c) => !NOT_WRITTEN_HERE.has(c.name));
      assert.ok(columns.filter((c) => c.integer).length >= 8, JSON.stringify(columns));
      const svc = { namespace: "cols", uuid: "cols-svc", name: "web", spec: "{}", spec_version: 1 };
      const rows = await store.services.insertContainers(
        [1, 2, 3].map((n) => newContainerRow(svc, "node-c", n, 1, { uuid: `cols-${n}` })),
      );
      // Record i gets value i of each column: a number or a text, and null for the last record
      // where the column takes one.
      const valueAt = (c: Column, i: number) =>
        i === 2 && c.nullable ? null : c.integer ? 1000 + i : `${c.name}-${i}`;
      const patches = rows.map((row, i) => ({
        row,
        patch: Object.fromEntries(columns.map((c) => [c.name, valueAt(c, i)])),
      }));
      await store.services.updateContainers(patches);
      const stored = await store.services.containersByUuid(rows.map((r) => r.uuid));
      for (const [i, row] of rows.entries()) {
        const read = stored.find((r) => r.uuid === row.uuid) as unknown as Record<string, unknown>;
        for (const c of columns) assert.deepEqual(read[c.name], valueAt(c, i), `${c.name} of record ${i}`);
      }
    });
  });
}
