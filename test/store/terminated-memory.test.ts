// Memory follows what runs, not history (issue 34, item 2): the heap a store holds after N
// containers were created and terminated does not grow with N, nor does it hold anything per running
// container. Each container is written as the
// runtime writes it (created, then Terminated) through the store's write methods, whose change-feed
// entries remember per container what they need; after a full collection, 20,000 more terminated
// containers may add at most 3 MB (about 150 bytes each; the feed remembered ~300 bytes of parents
// per container for good before). A heap check with a generous bound, not a benchmark.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import v8 from "node:v8";
import vm from "node:vm";
import type { Db } from "../../src/store/db.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import { newContainerRow } from "../../src/store/services.ts";
import { Store } from "../../src/store/store.ts";
import type { NodeRow, ServiceRow } from "../../src/store/types.ts";
import { fakeEngineNodeRow } from "../support/rows.ts";
import { targets } from "./targets.ts";

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;

function heapBytes(): number {
  for (let i = 0; i < 4; i++) gc();
  return process.memoryUsage().heapUsed;
}

const NS = "memns";
const NOW = 1_800_000_000_000;

for (const target of targets) {
  describe(`memory after terminated containers on ${target.name}`, () => {
    let db: Db;
    let cleanup: () => Promise<void>;
    let store: Store;
    let service: ServiceRow;
    let node: NodeRow;

    before(async () => {
      ({ db, cleanup } = await target.open());
      await migrateToLatest(db.kysely, db.dialect);
      store = new Store(db.kysely, db.dialect, { clock: { now: () => NOW } });
      node = await store.nodes.insertNode(fakeEngineNodeRow(NS, NOW));
      service = await store.services.insertService({
        uuid: "5e1f0000-0000-4000-8000-000000000001",
        namespace: NS,
        name: "web",
        nickname: "web",
        state: "Running",
        stack_uuid: null,
        target_num_containers: 1,
        spec: "{}",
        spec_version: 1,
        auth_secret: null,
        deployed_at: NOW,
        started_at: NOW,
        stopped_at: null,
        destroyed_at: null,
        created: NOW,
      });
    });
    after(() => cleanup());

    /** `count` containers created, then terminated, 1,000 to a transaction. */
    async function createAndTerminate(count: number, first: number): Promise<void> {
      for (let at = 0; at < count; at += 1000) {
        const n = Math.min(1000, count - at);
        const rows = await store.transaction((tx) =>
          tx.services.insertContainers(
            Array.from({ length: n }, (_, i) =>
              newContainerRow(service, node.uuid, first + at + i, NOW, { phase: null, observed: "running" }),
            ),
          ),
        );
        await store.transaction((tx) =>
          tx.services.patchContainers(
            rows.map((r) => r.uuid),
            () => ({ observed: "none", destroyed_at: NOW }),
          ),
        );
      }
    }

    test("20,000 running containers written through the store leave the heap within 3 MB", async () => {
      // What the store keeps in memory for its writes (the change feed's parents) is kept per
      // service and per node, not per container: a cache of each container's parents held ~300
      // bytes per running container (6-7 MB here).
      const baseline = heapBytes();
      for (let at = 0; at < 20_000; at += 1000) {
        await store.transaction((tx) =>
          tx.services.insertContainers(
            Array.from({ length: 1000 }, (_, i) =>
              newContainerRow(service, node.uuid, 100_000 + at + i, NOW, {
                phase: null,
                observed: "running",
              }),
            ),
          ),
        );
      }
      const grown = heapBytes() - baseline;
      assert.ok(
        grown < 3 * 1024 * 1024,
        `the heap grew by ${(grown / 1024 / 1024).toFixed(2)} MB for 20,000 running containers`,
      );
    });

    test("20,000 more terminated containers leave the heap within 3 MB of 2,000", async () => {
      await createAndTerminate(2000, 1);
      const gone = await store.services.containersOfServices([service.uuid], { states: ["Terminated"] });
      assert.equal(gone.length, 2000, "every container terminated");
      const baseline = heapBytes();
      await createAndTerminate(20_000, 2001);
      const grown = heapBytes() - baseline;
      assert.ok(
        grown < 3 * 1024 * 1024,
        `the heap grew by ${(grown / 1024 / 1024).toFixed(2)} MB for 20,000 terminated containers`,
      );
    });
  });
}
