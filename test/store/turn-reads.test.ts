// Checks of cached answers asked for in one turn of the event loop share their statement
// (store/turn-reads.ts, Store.namespaceRevision), and sharing never hides a commit: each caller
// gets a revision read after it asked. Runs on SQLite and PostgreSQL.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Db } from "../../src/store/db.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import { Store } from "../../src/store/store.ts";
import { TurnReads } from "../../src/store/turn-reads.ts";
import { serviceChangeRow } from "../support/rows.ts";
import { targets } from "./targets.ts";

describe("TurnReads", () => {
  /** A TurnReads over `read`, keeping each read's keys in `sent`. */
  const reads = <V>(value: (key: string) => V, opts?: { firstAtOnce?: boolean }) => {
    const sent: string[][] = [];
    const r = new TurnReads<string, V>(async (keys) => {
      sent.push(keys);
      return new Map(keys.map((k) => [k, value(k)]));
    }, opts);
    return { r, sent };
  };

  test("the keys asked for in one turn go into one read, sent when the turn ends", async () => {
    const { r, sent } = reads((k) => k.length);
    const all = ["a", "bb", "a", "ccc"].map((k) => r.get(k));
    assert.deepEqual(sent, [], "nothing is sent before the turn ends");
    assert.deepEqual(await Promise.all(all), [1, 2, 1, 3]);
    assert.deepEqual(sent, [["a", "bb", "ccc"]]);
  });

  test("firstAtOnce: a lone read is sent at once; the rest of its turn share one read", async () => {
    const { r, sent } = reads((k) => k.length, { firstAtOnce: true });
    const first = r.get("a");
    assert.deepEqual(sent, [["a"]], "the first read of a turn is not delayed");
    const rest = Array.from({ length: 50 }, (_, i) => r.get(i % 2 ? "a" : "bb"));
    assert.deepEqual(await Promise.all([first, ...rest]), [1, ...rest.map((_, i) => (i % 2 ? 1 : 2))]);
    assert.deepEqual(sent, [["a"], ["bb", "a"]], "one read for the rest of the turn");
    // The next turn starts over: its first read is sent at once again.
    await r.get("a");
    assert.equal(sent.length, 3);
  });

  for (const firstAtOnce of [false, true]) {
    test(`every caller sees what was committed before it asked (firstAtOnce ${firstAtOnce})`, async () => {
      let committed = 0;
      const { r } = reads(() => committed, { firstAtOnce });
      const answers: Promise<number | undefined>[] = [];
      for (let i = 0; i < 10; i++) {
        committed = i;
        // asked after commit i: must see i or later
        answers.push(r.get("ns"));
      }
      (await Promise.all(answers)).forEach((v, i) => {
        assert.ok((v ?? -1) >= i, `caller ${i} asked after commit ${i} and got ${v}`);
      });
    });
  }

  test("a failed read fails each of its callers", async () => {
    const r = new TurnReads<string, number>(
      async () => {
        throw new Error("database gone");
      },
      { firstAtOnce: true },
    );
    const all = [r.get("x"), r.get("x"), r.get("x")];
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
      store.transaction((tx) => tx.appendChange(serviceChangeRow(namespace)));

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
