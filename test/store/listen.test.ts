// Change notifications between replicas (store/listen.ts) belong to one installation. A
// PostgreSQL channel belongs to the whole database, so two installations in one database (two
// schemas, or two test files) woke each other's feed readers and dropped each other's caches and
// kept placement snapshots on every commit. A notification now names its schema.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Db } from "../../src/store/db.ts";
import { ChangeListener, type RemoteChange } from "../../src/store/listen.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import { Store } from "../../src/store/store.ts";
import { waitFor } from "../support/harness.ts";
import { pgUrl, targets } from "./targets.ts";

const postgres = targets.find((t) => t.name === "postgres");

/** A change-feed entry of `type`, appended in a transaction of its own. */
async function commitChange(store: Store, type: string): Promise<void> {
  await store.transaction(async (tx) => {
    await tx.appendChange({
      namespace: "ns",
      type,
      action: "update",
      resource_uri: `/api/app/v1/ns/${type}/x/`,
      state: "",
      parents: "[]",
      datetime: Date.now(),
    });
  });
}

describe("change notifications of two installations in one PostgreSQL database", { skip: !postgres }, () => {
  const opened: { db: Db; cleanup(): Promise<void> }[] = [];
  let mine: Store;
  let neighbour: Store;
  let listener: ChangeListener;
  const heard: RemoteChange[] = [];

  before(async () => {
    for (let i = 0; i < 2; i++) {
      const o = await postgres!.open();
      await migrateToLatest(o.db.kysely, "postgres");
      opened.push(o);
    }
    mine = new Store(opened[0]!.db.kysely, "postgres");
    mine.setOrigin("replica-1");
    neighbour = new Store(opened[1]!.db.kysely, "postgres");
    neighbour.setOrigin("elsewhere-1");
    // A second replica of the first installation listens, on the first one's schema.
    const schema = (
      await opened[0]!.db.kysely
        .selectNoFrom((eb) => eb.fn<string>("current_schema").as("s"))
        .executeTakeFirstOrThrow()
    ).s;
    const url = new URL(pgUrl!);
    url.searchParams.set("options", `-c search_path=${schema}`);
    listener = new ChangeListener({
      url: url.toString(),
      origin: "replica-2",
      onChange: (c) => heard.push(c),
    });
    listener.start();
    await waitFor("the listener connected", async () => listener.connected || undefined);
  });
  after(async () => {
    await listener?.stop();
    for (const o of opened) await o.cleanup();
  });

  test("a replica hears its own installation's commits, not the neighbour's", async () => {
    heard.length = 0;
    await commitChange(neighbour, "stack");
    await commitChange(mine, "service");
    await waitFor(
      "the first installation's commit heard",
      async () => heard.some((c) => c.type === "service") || undefined,
    );
    // Notifications of one connection arrive in commit order: the neighbour's came first, if at all.
    assert.deepEqual(
      heard.map((c) => [c.origin, c.type]),
      [["replica-1", "service"]],
    );
  });
});
