// No write can forget its event: every write method of a resource with events (services,
// containers, stacks, nodes, node clusters, actions) appends its change-feed entry itself, in the
// transaction of the write, with the type, resource_uri, state and parents of CONTRACT §8; a write
// that rolls back leaves no entry, a write that changes nothing adds none. A write method added to
// the store without a case here fails the first test. Runs on SQLite and PostgreSQL.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { actionUri, clusterUri, containerUri, nodeUri, serviceUri, stackUri } from "../../src/domain/uri.ts";
import { newNodeRow } from "../../src/nodes/records.ts";
import { ActionStore } from "../../src/store/actions.ts";
import type { Db } from "../../src/store/db.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import { NodeStore } from "../../src/store/nodes.ts";
import { type NewService, newContainerRow, ServiceStore } from "../../src/store/services.ts";
import { StackStore } from "../../src/store/stacks.ts";
import { Store } from "../../src/store/store.ts";
import { targets } from "./targets.ts";

const NS = "feedns";
const NOW = 1_800_000_000_000;
const ids = {
  cluster: "f0000000-0000-4000-8000-00000000c001",
  node: "f0000000-0000-4000-8000-00000000d001",
  stack: "f0000000-0000-4000-8000-00000000e001",
  stack2: "f0000000-0000-4000-8000-00000000e002",
  web: "f0000000-0000-4000-8000-00000000a001",
  lb: "f0000000-0000-4000-8000-00000000a002",
  action: "f0000000-0000-4000-8000-00000000b001",
};
const cluster = clusterUri({ namespace: NS, uuid: ids.cluster });
const node = nodeUri({ namespace: NS, uuid: ids.node });
const stack = stackUri(NS, ids.stack);
const web = serviceUri({ namespace: NS, uuid: ids.web });
const lb = serviceUri({ namespace: NS, uuid: ids.lb });
/** The parents of a container of `web` (CONTRACT §8), and of one of `lb` (no stack). */
const webParents = [web, stack, node, cluster];
const lbParents = [lb, node, cluster];

const service = (uuid: string, name: string, fields: Partial<NewService> = {}): NewService => ({
  uuid,
  namespace: NS,
  name,
  nickname: name,
  state: "Not running",
  stack_uuid: null,
  target_num_containers: 1,
  spec: "{}",
  spec_version: 1,
  auth_secret: null,
  deployed_at: null,
  started_at: null,
  stopped_at: null,
  destroyed_at: null,
  created: NOW,
  ...fields,
});

interface Entry {
  type: string;
  action: string;
  resource_uri: string;
  state: string;
  parents: string[];
}

/** A write method and what one call of it must append, given the store it runs on. */
interface Case {
  method: string;
  write(s: Store): Promise<unknown>;
  entries: Entry[] | (() => Entry[]);
}

const e = (type: string, action: string, resource_uri: string, state: string, parents: string[]): Entry => ({
  type,
  action,
  resource_uri,
  state,
  parents,
});

/** Container uuids by name, as inserted. */
const containers = new Map<string, string>();
const c = (name: string) => containerUri({ namespace: NS, uuid: containers.get(name)! });
const row = async (s: Store, name: string) => (await s.services.findContainer(containers.get(name)!))!;
const webRow = (s: Store) => s.services.findService(ids.web).then((r) => r!);

// In order: each case starts from the state the ones before it left.
const cases: Case[] = [
  {
    method: "NodeStore.insertCluster",
    write: (s) =>
      s.nodes.insertCluster({
        uuid: ids.cluster,
        namespace: NS,
        name: "pool",
        nickname: "pool",
        state: "Init",
        provider: "sim",
        region: "r",
        node_type: "t",
        disk: null,
        target_num_nodes: 1,
        tags: "[]",
        provider_options: null,
        deployed_at: null,
        destroyed_at: null,
        created: NOW,
      }),
    entries: [e("nodecluster", "create", cluster, "Init", [])],
  },
  {
    method: "NodeStore.insertNode",
    write: (s) =>
      s.nodes.insertNode(
        newNodeRow({
          uuid: ids.node,
          namespace: NS,
          cluster_uuid: ids.cluster,
          provider: "sim",
          region: "r",
          node_type: "t",
          phase: "deploying",
          created: NOW,
        }),
      ),
    entries: [e("node", "create", node, "Deploying", [cluster])],
  },
  {
    method: "StackStore.insertStack",
    write: (s) =>
      s.stacks.insertStack({
        uuid: ids.stack,
        namespace: NS,
        name: "st",
        nickname: "st",
        state: "Not Running",
        deployed_at: null,
        destroyed_at: null,
        created: NOW,
      }),
    entries: [e("stack", "create", stack, "Not Running", [])],
  },
  {
    method: "ServiceStore.insertService",
    write: async (s) => {
      await s.services.insertService(service(ids.web, "web", { stack_uuid: ids.stack }));
      // lb links to web: its containers' links follow web's containers.
      const spec = JSON.stringify({ linked_to_service: [{ to_service: ids.web, name: "web" }] });
      await s.services.insertService(service(ids.lb, "lb", { spec }));
    },
    entries: [
      e("service", "create", web, "Not running", [stack]),
      e("service", "create", lb, "Not running", []),
    ],
  },
  {
    method: "ServiceStore.insertContainer",
    write: async (s) => {
      const r = await s.services.insertContainer(newContainerRow(await webRow(s), ids.node, 1, NOW));
      containers.set("web-1", r.uuid);
    },
    entries: () => [e("container", "create", c("web-1"), "Starting", webParents)],
  },
  {
    method: "ServiceStore.insertContainers",
    write: async (s) => {
      const lbRow = (await s.services.findService(ids.lb))!;
      const rows = await s.services.insertContainers([
        newContainerRow(await webRow(s), ids.node, 2, NOW),
        newContainerRow(lbRow, ids.node, 1, NOW, {
          phase: null,
          observed: "running",
          private_ip: "10.9.0.9",
        }),
      ]);
      containers.set("web-2", rows[0]!.uuid);
      containers.set("lb-1", rows[1]!.uuid);
    },
    entries: () => [
      e("container", "create", c("web-2"), "Starting", webParents),
      e("container", "create", c("lb-1"), "Running", lbParents),
    ],
  },
  {
    method: "ActionStore.insertAction",
    write: (s) =>
      s.actions.insertAction({
        uuid: ids.action,
        namespace: NS,
        object: web,
        action: "Service Start",
        kind: "service.start",
        params: null,
        method: "POST",
        path: "/",
        user: "alice",
        user_agent: "",
        ip: "",
        location: "",
        start_date: NOW,
        end_date: null,
        state: "Pending",
        is_user_action: 1,
      }),
    entries: [e("action", "create", actionUri(ids.action), "Pending", [web])],
  },
  {
    method: "NodeStore.updateCluster",
    write: async (s) =>
      s.nodes.updateCluster((await s.nodes.findCluster(ids.cluster))!, { state: "Deploying" }),
    entries: [e("nodecluster", "update", cluster, "Deploying", [])],
  },
  {
    method: "NodeStore.updateNode",
    write: async (s) => s.nodes.updateNode((await s.nodes.findNode(ids.node))!, { phase: null }),
    entries: [e("node", "update", node, "Deployed", [cluster])],
  },
  {
    method: "StackStore.updateStack",
    write: async (s) => s.stacks.updateStack((await s.stacks.findStack(ids.stack))!, { state: "Starting" }),
    entries: [e("stack", "update", stack, "Starting", [])],
  },
  {
    method: "ServiceStore.updateService",
    write: async (s) => s.services.updateService(await webRow(s), { state: "Starting" }),
    entries: [e("service", "update", web, "Starting", [stack])],
  },
  {
    // web-1 starts offering an address: lb's container, which links to web, changes with it.
    method: "ServiceStore.updateContainer",
    write: async (s) =>
      s.services.updateContainer(await row(s, "web-1"), {
        phase: null,
        observed: "running",
        private_ip: "10.9.0.1",
      }),
    entries: () => [
      e("container", "update", c("web-1"), "Running", webParents),
      e("container", "update", c("lb-1"), "Running", lbParents),
    ],
  },
  {
    method: "ServiceStore.updateContainers",
    write: async (s) =>
      s.services.updateContainers([
        { row: await row(s, "web-1"), patch: { desired: "stopped" } },
        { row: await row(s, "web-2"), patch: { phase: null, observed: "running", private_ip: "10.9.0.2" } },
      ]),
    entries: () => [
      e("container", "update", c("web-1"), "Running", webParents),
      e("container", "update", c("web-2"), "Running", webParents),
      e("container", "update", c("lb-1"), "Running", lbParents),
    ],
  },
  {
    method: "ServiceStore.patchContainers",
    write: (s) =>
      s.services.patchContainers([containers.get("web-1")!, containers.get("web-2")!], (r) =>
        r.name === "web-1" ? { observed: "exited" } : undefined,
      ),
    entries: () => [
      e("container", "update", c("web-1"), "Stopped", webParents),
      e("container", "update", c("lb-1"), "Running", lbParents),
    ],
  },
  {
    method: "ActionStore.updateAction",
    write: async (s) =>
      s.actions.updateAction((await s.actions.findAction(ids.action))!, { state: "In progress" }),
    entries: [e("action", "update", actionUri(ids.action), "In progress", [web])],
  },
  {
    method: "Store.mutate",
    write: async (s) => {
      await s.mutate("service", ids.web, () => ({ state: "Running" }));
      await s.mutate("container", containers.get("web-2")!, () => ({ exit_code: 0 }));
      await s.mutate("stack", ids.stack, () => ({ state: "Running" }));
      await s.mutate("nodecluster", ids.cluster, () => ({ state: "Deployed" }));
      await s.mutate("action", ids.action, () => ({ state: "Success", end_date: NOW }));
      await s.mutate("node", ids.node, () => ({ destroyed_at: NOW }));
    },
    entries: () => [
      e("service", "update", web, "Running", [stack]),
      e("container", "update", c("web-2"), "Running", webParents),
      e("stack", "update", stack, "Running", []),
      e("nodecluster", "update", cluster, "Deployed", []),
      e("action", "update", actionUri(ids.action), "Success", [web]),
      e("node", "delete", node, "Terminated", [cluster]),
    ],
  },
  {
    method: "Store.containersTouched",
    write: async (s) => s.containersTouched([await row(s, "lb-1")]),
    entries: () => [e("container", "update", c("lb-1"), "Running", lbParents)],
  },
  {
    method: "Store.insertRows",
    write: (s) =>
      s.insertRows("stack", [
        {
          uuid: ids.stack2,
          namespace: NS,
          name: "st2",
          nickname: "st2",
          state: "Not Running",
          deployed_at: null,
          destroyed_at: null,
          created: NOW,
        },
      ]),
    entries: [e("stack", "create", stackUri(NS, ids.stack2), "Not Running", [])],
  },
  {
    method: "Store.updateRow",
    write: async (s) => s.updateRow("service", await webRow(s), { state: "Terminated" }),
    entries: [e("service", "delete", web, "Terminated", [stack])],
  },
];

/** Writes that are not changes of the object as its events tell it append nothing; a write to an object
 * already Terminated is an update, not a second delete. */
const silent: Case[] = [
  {
    method: "an action's lease and step",
    write: async (s) =>
      s.actions.updateAction((await s.actions.findAction(ids.action))!, { lease_until: NOW, step: 3 }),
    entries: [],
  },
  {
    method: "a patch that sets what is already there",
    write: async (s) => {
      const w = await row(s, "web-2");
      await s.services.updateContainer(w, { observed: w.observed, private_ip: w.private_ip });
      const n = (await s.nodes.findNode(ids.node))!;
      await s.nodes.updateNode(n, { destroyed_at: n.destroyed_at });
    },
    entries: [],
  },
  {
    // A stop takes the container (Stopping: it no longer offers its address to lb, which links to
    // it). The engine then reports it exited while the stop still holds it: its state stays
    // Stopping until the action ends, so that report adds no event.
    method: "an engine's report while an action holds the container",
    write: async (s) => {
      await s.services.updateContainer(await row(s, "web-2"), { phase: "stopping" });
      await s.services.updateContainer(await row(s, "web-2"), { observed: "exited" });
    },
    entries: () => [
      e("container", "update", c("web-2"), "Stopping", webParents),
      e("container", "update", c("lb-1"), "Running", lbParents),
    ],
  },
  {
    method: "a write to an object already Terminated",
    write: async (s) => s.updateRow("service", await webRow(s), { destroyed_at: NOW + 1 }),
    entries: [e("service", "update", web, "Terminated", [stack])],
  },
];

/** The store's write methods of resources with events, by class. */
function writeMethods(): string[] {
  const of = (name: string, proto: object, keep: (m: string) => boolean) =>
    Object.getOwnPropertyNames(proto)
      .filter(keep)
      .map((m) => `${name}.${m}`);
  const writes = (m: string) => /^(insert|update|patch|mutate)/.test(m);
  return [
    ...of("ServiceStore", ServiceStore.prototype, writes),
    ...of("NodeStore", NodeStore.prototype, writes),
    ...of("StackStore", StackStore.prototype, writes),
    ...of("ActionStore", ActionStore.prototype, writes),
    ...of("Store", Store.prototype, (m) => /^(insertRows|updateRow|mutate|containersTouched)$/.test(m)),
  ].sort();
}

class Rollback extends Error {}

for (const target of targets) {
  describe(`change-feed entries of every write on ${target.name}`, () => {
    let db: Db;
    let store: Store;
    let cleanup: () => Promise<void>;

    before(async () => {
      ({ db, cleanup } = await target.open());
      await migrateToLatest(db.kysely, db.dialect);
      store = new Store(db.kysely, db.dialect, { clock: { now: () => NOW } });
    });
    after(() => cleanup());

    const appended = async (since: number): Promise<Entry[]> =>
      (await store.changesSince(since, 100)).map((r) => {
        assert.equal(r.namespace, NS);
        assert.equal(r.datetime, NOW, "the entry's time is the store's clock");
        return e(r.type, r.action, r.resource_uri, r.state, JSON.parse(r.parents) as string[]);
      });

    test("every write method of a resource with events has a case here", () => {
      assert.deepEqual(writeMethods(), [...new Set(cases.map((k) => k.method))].sort());
    });

    for (const k of [...cases, ...silent]) {
      test(`${k.method}: its entries commit with it, and roll back with it`, async () => {
        const start = await store.latestRevision();
        await assert.rejects(
          store.transaction(async (tx) => {
            await k.write(tx);
            throw new Rollback();
          }),
          Rollback,
        );
        assert.deepEqual(await appended(start), [], "a rolled-back write leaves no entry");
        await k.write(store);
        const expected = typeof k.entries === "function" ? k.entries() : k.entries;
        assert.deepEqual(await appended(start), expected);
      });
    }

    // A deploy inserts containers in bursts: their parents come from what the feed remembers of
    // their service (its stack) and node (its cluster), which never change, not from a read of
    // the services and nodes tables inside each burst's transaction.
    test("a burst of containers of a known service on a known node reads neither services nor nodes", async () => {
      const start = await store.latestRevision();
      const web = await webRow(store);
      const { result: rows, queries } = await db.statements.queriesDuring(() =>
        store.services.insertContainers([7, 8, 9].map((n) => newContainerRow(web, ids.node, n, NOW))),
      );
      const reads = queries.map((q) => q.sql).filter((q) => /from "(services|nodes)"/.test(q));
      assert.deepEqual(reads, []);
      assert.deepEqual(
        await appended(start),
        rows.map((r) =>
          e("container", "create", containerUri({ namespace: NS, uuid: r.uuid }), "Starting", webParents),
        ),
      );
    });
  });
}

// The feed's entries are written by `src/store/feed.ts` through the store's write methods; the raw
// `appendChange(s)` stay public only for tests and benchmarks that seed a feed. Code outside the
// store that called them would write an event with no row, or a row's event by hand.
describe("only the store appends change-feed entries", () => {
  test("no module outside src/store/ calls appendChange or appendChanges", async () => {
    const { readdir, readFile } = await import("node:fs/promises");
    const path = await import("node:path");
    const src = path.resolve(new URL(".", import.meta.url).pathname, "../../src");
    const files = (await readdir(src, { recursive: true }))
      .filter((f) => f.endsWith(".ts") && !f.startsWith(`store${path.sep}`))
      .map((f) => path.join(src, f));
    assert.ok(files.length > 100, `read ${files.length} source files`);
    const callers: string[] = [];
    for (const f of files) {
      if (/\.appendChanges?\(/.test(await readFile(f, "utf8"))) callers.push(path.relative(src, f));
    }
    assert.deepEqual(callers, []);
  });
});
