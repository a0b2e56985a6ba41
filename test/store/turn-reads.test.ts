// Checks of cached answers asked for in one turn of the event loop share their statement
// (store/turn-reads.ts, Store.namespaceRevision), and sharing never hides a commit: each caller
// gets a revision read after it asked. Runs on SQLite and PostgreSQL.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Db } from "../../src/store/db.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import { Store } from "../../src/store/store.ts";
import { TurnReads } from "../../src/store/turn-reads.ts";
import { targets } from "./targets.ts";

describe("TurnReads", () => {
  test("a lone read is sent at once; the rest of its turn share one read", async () => {
    const sent: string[] = [];
    const reads = new TurnReads(async (key) => {
      sent.push(key);
      return key.length;
    });
    const first = reads.get("a");
    assert.deepEqual(sent, ["a"], "the first read of a turn is not delayed");
    const rest = Array.from({ length: 50 }, (_, i) => reads.get(i % 2 ? "a" : "bb"));
    assert.deepEqual(await Promise.all([first, ...rest]), [1, ...rest.map((_, i) => (i % 2 ? 1 : 2))]);
    assert.deepEqual(sent.sort(), ["a", "a", "bb"], "one read per key for the rest of the turn");
    // The next turn starts over: its first read is sent at once again.
    await reads.get("a");
    assert.equal(sent.length, 4);
  });

  test("every caller sees what was committed before it asked", async () => {
    let committed = 0;
    const reads = new TurnReads(async () => committed);
    const answers: Promise<number>[] = [];
    for (let i = 0; i < 10; i++) {
      committed = i;
      // asked after commit i: must see i or later
      answers.push(reads.get("ns"));
    }
    const got = await Promise.all(answers);
    got.forEach((v, i) => {
      assert.ok(v >= i, `caller ${i} asked after commit ${i} and got ${v}`);
    });
  });

  test("a failed read fails each of its callers", async () => {
    const reads = new TurnReads<number>(async () => {
      throw new Error("database gone");
    });
    const all = [reads.get("x"), reads.get("x"), reads.get("x")];
    for (const p of all) await assert.rejects(p, /database gone/);
  });
});

for (const target of targets) {
  describe(`Store.namespaceRevision on ${target.name}`, () => {
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

    const append = (namespace: string) =>
      store.transaction((tx) =>
        tx.appendChange({
          type: "service",
          action: "update",
          resource_uri: `/api/app/v1/${namespace}/service/x/`,
          state: "Running",
          parents: "[]",
          namespace,
          datetime: 1,
        }),
      );

    test("checks of one turn share a statement, and each sees the commits made before it", async () => {
      await append("tr-a");
      const before = await store.namespaceRevision(["tr-a"]);
      const n0 = db.statements.count;
      const checks = await Promise.all(Array.from({ length: 40 }, () => store.namespaceRevision(["tr-a"])));
      assert.ok(db.statements.count - n0 <= 2, `${db.statements.count - n0} statements for 40 checks`);
      assert.ok(checks.every((r) => r === before));
      await append("tr-a");
      const after = await Promise.all([store.namespaceRevision(["tr-a"]), store.namespaceRevision(["tr-a"])]);
      assert.ok(
        after.every((r) => r > before),
        "a check asked after a commit sees it",
      );
    });
  });
}
