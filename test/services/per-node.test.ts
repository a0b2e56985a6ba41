// Work bounded per node (orchestrator/per-node.ts): an item that released its slot (its engine
// work is done, it only waits for its record's group commit) lets the node's next item start, and
// the whole run still ends only when every item has ended.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { eachPerNode } from "../../src/orchestrator/per-node.ts";

describe("eachPerNode", () => {
  test("one at a time on a node: the next item starts once the previous releases its slot", async () => {
    const items = [1, 2, 3].map((n) => ({ n, node_uuid: "a" }));
    const events: string[] = [];
    let unblock = () => {};
    const committed = new Promise<void>((resolve) => {
      unblock = resolve;
    });
    let ended = false;
    const run = eachPerNode(items, { perNode: 1, total: 10 }, async (item, release) => {
      events.push(`start ${item.n}`);
      await Promise.resolve();
      events.push(`engine done ${item.n}`);
      release();
      // Waiting for a commit that comes only once the last item has released its slot.
      if (item.n === 3) unblock();
      await committed;
      events.push(`end ${item.n}`);
    }).then((errors) => {
      ended = true;
      return errors;
    });
    await committed;
    assert.equal(ended, false, "the run waits for items that released their slot");
    assert.deepEqual(await run, []);
    assert.deepEqual(events.slice(0, 6), [
      "start 1",
      "engine done 1",
      "start 2",
      "engine done 2",
      "start 3",
      "engine done 3",
    ]);
    assert.deepEqual(events.slice(6).sort(), ["end 1", "end 2", "end 3"]);
  });

  test("without a release, an item holds its node's slot until it ends", async () => {
    const items = [1, 2].map((n) => ({ n, node_uuid: "a" }));
    const events: string[] = [];
    const errors = await eachPerNode(items, { perNode: 1, total: 10 }, async (item) => {
      events.push(`start ${item.n}`);
      await new Promise((r) => setTimeout(r, 5));
      events.push(`end ${item.n}`);
    });
    assert.deepEqual(errors, []);
    assert.deepEqual(events, ["start 1", "end 1", "start 2", "end 2"]);
  });

  test("errors of items that released their slot are answered", async () => {
    const items = [1, 2].map((n) => ({ n, node_uuid: "a" }));
    const errors = await eachPerNode(items, { perNode: 1, total: 1 }, async (item, release) => {
      release();
      await Promise.resolve();
      if (item.n === 2) throw new Error("the batch could not be written");
    });
    assert.deepEqual(
      errors.map((e) => e.message),
      ["the batch could not be written"],
    );
  });
});
