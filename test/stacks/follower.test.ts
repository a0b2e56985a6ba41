// The stack follower reads the change feed when a change can move a stack's state (a service's, an
// action's), not on every commit: during a large deploy hundreds of container changes commit each
// second, and reading the feed after each of them was the most frequent statement of the server.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { StackFollower } from "../../src/stacks/follower.ts";
import type { Db } from "../../src/store/db.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import { Store } from "../../src/store/store.ts";
import { targets } from "../store/targets.ts";
import { waitFor } from "../support/harness.ts";

describe("the stack follower", () => {
  let db: Db;
  let cleanup: () => Promise<void>;
  let store: Store;
  let follower: StackFollower;
  const settled: string[] = [];
  const STACK = "5e1f0a0e-0000-4000-8000-000000000001";

  /** The follower's reads of the feed so far. */
  let reads = 0;

  before(async () => {
    ({ db, cleanup } = await targets[0]!.open());
    await migrateToLatest(db.kysely, db.dialect);
    const counter = db.statements;
    const record = counter.record;
    counter.record = (event) => {
      if (/select \* from "changes" where "revision" >/.test(event.query.sql)) reads += 1;
      record.call(counter, event);
    };
    store = new Store(db.kysely, db.dialect);
    follower = new StackFollower({
      store,
      pollMs: 3_600_000,
      settle: async (uuid) => {
        settled.push(uuid);
      },
    });
    follower.start();
    // Started once it has read the feed from where it stood.
    await waitFor("the follower's first read", async () => (reads > 0 ? true : undefined));
  });
  after(async () => {
    follower.stop();
    await cleanup?.();
  });

  const change = (type: string, parents: string[] = []) => ({
    namespace: "alice",
    type,
    action: "update",
    resource_uri: `/api/app/v1/${type}/${crypto.randomUUID()}/`,
    state: "Running",
    parents: JSON.stringify(parents),
    datetime: Date.now(),
  });

  /** The follower's reads of the feed while `fn` ran, and for a moment after (it reads after commits). */
  async function feedReads(fn: () => Promise<void>): Promise<number> {
    const before = reads;
    await fn();
    await new Promise((r) => setTimeout(r, 50));
    return reads - before;
  }

  test("container changes alone do not make it read the feed", async () => {
    const reads = await feedReads(async () => {
      for (let i = 0; i < 50; i++) {
        await store.transaction((tx) => tx.appendChanges([change("container")]));
      }
    });
    assert.equal(reads, 0);
  });

  test("a service's change under a stack is read, and the stack settled", async () => {
    const reads = await feedReads(async () => {
      await store.transaction((tx) =>
        tx.appendChanges([change("service", [`/api/app/v1/alice/stack/${STACK}/`])]),
      );
      await waitFor("the stack settled", async () => (settled.includes(STACK) ? true : undefined));
    });
    assert.ok(reads >= 1);
  });
});
