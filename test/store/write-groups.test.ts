// Group commit (issue 34, item 1; store/write-groups.ts): transactions that ask to be grouped and
// arrive together share one transaction and one commit, and each still gets its own outcome: a
// member that fails is rolled back alone (the first by rolling back the transaction, which holds
// nothing else yet; a later one to its savepoint), its feed entries with it; the others commit,
// their feed entries in the order they ran, and each answers only once its commit is done. Runs on
// SQLite, and on PostgreSQL when BERTH_TEST_PG_URL names one.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Db } from "../../src/store/db.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import { Store } from "../../src/store/store.ts";
import { serviceChangeRow } from "../support/rows.ts";
import { targets } from "./targets.ts";

for (const target of targets) {
  describe(`grouped transactions on ${target.name}`, () => {
    let db: Db;
    let store: Store;
    let cleanup: () => Promise<void>;

    before(async () => {
      ({ db, cleanup } = await target.open());
      await migrateToLatest(db.kysely, db.dialect);
      store = new Store(db.kysely, db.dialect);
    });
    after(async () => {
      await cleanup?.();
    });

    const facts = async (prefix: string) =>
      (
        await db.kysely
          .selectFrom("control_facts")
          .select("name")
          .where("name", "like", `${prefix}%`)
          .orderBy("name")
          .execute()
      ).map((r) => r.name);
    const feed = async (prefix: string) =>
      (
        await db.kysely
          .selectFrom("changes")
          .select("namespace")
          .where("namespace", "like", `${prefix}%`)
          .orderBy("revision")
          .execute()
      ).map((r) => r.namespace);

    /** A member that writes a row and a feed entry named `name`, then fails when told to. */
    const member = (name: string, fails: boolean) =>
      store.transaction(
        async (tx) => {
          await tx.db.insertInto("control_facts").values({ name, value: "1" }).execute();
          await tx.appendChanges([serviceChangeRow(name)]);
          if (fails) throw new Error(`${name} refused`);
          return name;
        },
        { group: true },
      );

    test("each member gets its own outcome; a failing one, first or later, leaves nothing behind", async () => {
      const told: string[] = [];
      const stop = store.onChange((type) => told.push(type));
      const before = { statements: db.statements.count, transactions: db.statements.transactions };
      // Called in one turn: on SQLite they join one group, in this order.
      const outcomes = await Promise.allSettled([
        member("g1-a", true),
        member("g1-b", false),
        member("g1-c", true),
        member("g1-d", false),
        member("g1-e", false),
      ]);
      stop();
      assert.deepEqual(
        outcomes.map((o) => (o.status === "fulfilled" ? o.value : (o.reason as Error).message)),
        ["g1-a refused", "g1-b", "g1-c refused", "g1-d", "g1-e"],
      );
      assert.deepEqual(await facts("g1-"), ["g1-b", "g1-d", "g1-e"]);
      assert.deepEqual(await feed("g1-"), ["g1-b", "g1-d", "g1-e"], "feed entries in the members' order");
      assert.ok(told.includes("service"), "the commit is told to the feed's followers");
      // The first member's transaction rolled back with it; the next began the one the rest shared.
      assert.equal(db.statements.transactions - before.transactions, 2);
    });

    test("a member answers once its commit is done: what it wrote is then read outside it", async () => {
      const names = ["g2-a", "g2-b", "g2-c"];
      const seen = await Promise.all(
        names.map(async (name) => {
          await member(name, false);
          return facts("g2-");
        }),
      );
      // The three shared one commit: each answered once all three had committed.
      for (const rows of seen) assert.deepEqual(rows, names);
    });

    test("a transaction that is not grouped never joins a group: its failure takes only itself", async () => {
      const grouped = member("g3-a", false);
      const alone = store.transaction(async (tx) => {
        await tx.db.insertInto("control_facts").values({ name: "g3-b", value: "1" }).execute();
        throw new Error("g3-b refused");
      });
      await assert.rejects(alone, /g3-b refused/);
      assert.equal(await grouped, "g3-a");
      assert.deepEqual(await facts("g3-"), ["g3-a"]);
    });
  });
}
