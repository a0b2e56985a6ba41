// Node rows as this process knows them (NodeStore.knownNodes), read by the work of actions and the
// reconciler: a burst of container work reads each node once. They follow every write this
// process commits, never answer a row older than one written meanwhile, and drop everything when
// another replica announces a change of nodes. Runs on SQLite and PostgreSQL.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Db } from "../../src/store/db.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import { LIVE_NODES_PAGE, type NodeRow, NodeRowCache } from "../../src/store/nodes.ts";
import { Store } from "../../src/store/store.ts";
import { fakeEngineNodeRow } from "../support/rows.ts";
import { targets } from "./targets.ts";

for (const target of targets) {
  describe(`known node rows on ${target.name}`, () => {
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

    /** Statements the store ran while `fn` ran. */
    const statements = async (fn: () => Promise<unknown>) => (await db.statements.during(fn)).statements;

    test("a node is read once, and a write of this process is answered without a read", async () => {
      const node = await store.nodes.insertNode(fakeEngineNodeRow("nr-a", 1));
      store.announceRemoteChange("node"); // start from nothing held
      assert.equal(await statements(() => store.nodes.knownNodes([node.uuid, node.uuid])), 1);
      assert.equal(await statements(() => store.nodes.knownNode(node.uuid)), 0);
      const renamed = await store.nodes.updateNode(node, { nickname: "renamed" });
      const known = await store.nodes.knownNode(node.uuid);
      assert.equal(known?.nickname, "renamed");
      assert.equal(known?.version, renamed.version);
    });

    test("another replica's write is seen once it is announced", async () => {
      const node = await store.nodes.insertNode(fakeEngineNodeRow("nr-b", 1));
      assert.equal((await store.nodes.knownNode(node.uuid))?.nickname, node.nickname);
      // Another replica: a store of its own on the same database.
      const other = new Store(db.kysely, db.dialect);
      await other.nodes.updateNode(node, { nickname: "elsewhere" });
      store.announceRemoteChange("node");
      assert.equal((await store.nodes.knownNode(node.uuid))?.nickname, "elsewhere");
    });

    test("in a transaction, nodes are read from the transaction", async () => {
      const node = await store.nodes.insertNode(fakeEngineNodeRow("nr-c", 1));
      await store.nodes.knownNode(node.uuid);
      await store.transaction(async (tx) => {
        await tx.nodes.updateNode(node, { nickname: "uncommitted" });
        assert.equal((await tx.nodes.knownNode(node.uuid))?.nickname, "uncommitted");
        // Outside it, nothing uncommitted is known.
        assert.equal((await store.nodes.knownNode(node.uuid))?.nickname, node.nickname);
      });
      assert.equal((await store.nodes.knownNode(node.uuid))?.nickname, "uncommitted");
    });

    test("live nodes are read in pages with the event loop given back between, all of them in order", async () => {
      // One read of 5,000 nodes held the loop for some 90 ms in the periodic passes (issue 34).
      const namespace = "nr-pages";
      const count = LIVE_NODES_PAGE * 2 + 5;
      await store.transaction(async (tx) => {
        for (let i = 0; i < count; i++)
          await tx.nodes.insertNode(fakeEngineNodeRow(namespace, 1, { slot: i }));
      });
      let turns = 0;
      let turning = true;
      const countTurns = () => {
        if (!turning) return;
        turns += 1;
        setImmediate(countTurns);
      };
      setImmediate(countTurns);
      let nodes: NodeRow[] = [];
      const n = await statements(async () => {
        nodes = await store.nodes.liveNodes({ namespace });
      });
      turning = false;
      assert.equal(nodes.length, count);
      assert.deepEqual(
        nodes.map((x) => x.id),
        [...nodes.map((x) => x.id)].sort((a, b) => a - b),
      );
      assert.equal(new Set(nodes.map((x) => x.uuid)).size, count);
      assert.equal(n, 3);
      assert.ok(turns >= 2, `${turns} turns`);
      // A namespace with fewer nodes than a page: one statement.
      assert.equal(await statements(() => store.nodes.liveNodes({ namespace: "nr-a" })), 1);
    });
  });
}

describe("NodeRowCache", () => {
  test("a read that started before a write does not keep the row it read", async () => {
    const cache = new NodeRowCache();
    const old = { uuid: "n1", nickname: "old" } as NodeRow;
    let answer: (rows: NodeRow[]) => void = () => {};
    const reading = cache.get(["n1"], () => new Promise((resolve) => (answer = resolve)));
    cache.wrote([{ ...old, nickname: "new" }]);
    answer([old]);
    // The read answers what it read, but what is held is the write's row.
    assert.equal((await reading).get("n1")?.nickname, "old");
    const after = await cache.get(["n1"], async () => assert.fail("no read: the written row is held"));
    assert.equal(after.get("n1")?.nickname, "new");
  });
});
