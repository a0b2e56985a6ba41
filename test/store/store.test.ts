// The store's own suite, run against SQLite and against PostgreSQL (BERTH_TEST_PG_URL; required in CI).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { VersionConflict } from "../../src/domain/errors.ts";
import { newNodeRow } from "../../src/nodes/records.ts";
import { type Db, openDatabase } from "../../src/store/db.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import { newContainerRow } from "../../src/store/services.ts";
import { Store, UniqueViolation } from "../../src/store/store.ts";
import { pgUrl as sharedPgUrl, targets } from "./targets.ts";

const pgUrl = sharedPgUrl;

const user = (username: string) => ({
  username,
  email: `${username}@example.test`,
  password_hash: "x",
  full_name: "",
  is_admin: 0,
  is_active: 1,
  location: "",
  company: "",
  profile_url: "",
  date_joined: 1_700_000_000_000,
});

const action = (uuid: string, object: string, state = "In progress") => ({
  uuid,
  namespace: "alice",
  object,
  action: "Widget Work",
  kind: "k",
  params: null,
  method: "POST",
  path: "/",
  user: "alice",
  user_agent: "",
  ip: "",
  location: "",
  start_date: Date.now(),
  end_date: null,
  state,
  is_user_action: 1,
});

for (const target of targets) {
  describe(`store on ${target.name}`, () => {
    let db: Db;
    let store: Store;
    let cleanup: () => Promise<void>;

    before(async () => {
      ({ db, cleanup } = await target.open());
      await migrateToLatest(db.kysely, db.dialect);
      await migrateToLatest(db.kysely, db.dialect); // idempotent
      store = new Store(db.kysely, db.dialect);
    });
    after(() => cleanup());

    test("users and organizations share one namespace of names", async () => {
      await store.identity.createUser(user("alice"));
      await assert.rejects(store.identity.createUser(user("alice")), UniqueViolation);
      await assert.rejects(store.identity.createOrg("alice", "alice", Date.now()), UniqueViolation);
      await store.identity.createOrg("acme", "alice", Date.now());
      assert.deepEqual(await store.identity.orgsOf("alice"), ["acme"]);
      assert.equal((await store.identity.findNamespace("acme"))?.kind, "org");
    });

    test("a failed transaction leaves nothing behind", async () => {
      await assert.rejects(
        store.transaction(async (tx) => {
          await tx.identity.createOrg("halfway", "alice", Date.now());
          throw new Error("boom");
        }),
      );
      assert.equal(await store.identity.namespaceExists("halfway"), false);
      assert.equal(await store.identity.membership("halfway", "alice"), undefined);
    });

    test("optimistic versioning refuses a stale update", async () => {
      const a = await store.actions.insertAction(action("v-1", "/api/app/v1/alice/widget/v/"));
      const updated = await store.actions.updateAction(a, { state: "Success" });
      assert.equal(updated.version, a.version + 1);
      await assert.rejects(store.actions.updateAction(a, { state: "Failed" }), VersionConflict);
      assert.equal((await store.actions.findAction("v-1"))?.state, "Success");
    });

    test("retrying: a transaction whose version check lost runs again from the start; the lost attempt leaves nothing", async () => {
      const a = await store.actions.insertAction(action("r-1", "/api/app/v1/alice/widget/r/"));
      let attempts = 0;
      const result = await store.retrying(async (tx) => {
        attempts++;
        await tx.identity.createOrg(`retry-${attempts}`, "alice", Date.now());
        const current = (await tx.actions.findAction("r-1"))!;
        // The first attempt decides on a stale read, as if another writer had won meanwhile.
        return tx.actions.updateAction(attempts === 1 ? a : current, { state: "Success" }).then(async (r) => {
          if (attempts === 1) throw new VersionConflict("action r-1");
          return r;
        });
      });
      assert.equal(attempts, 2);
      assert.equal(result.state, "Success");
      assert.equal(
        await store.identity.namespaceExists("retry-1"),
        false,
        "the lost attempt's writes are gone",
      );
      assert.equal(await store.identity.namespaceExists("retry-2"), true);
      let tries = 0;
      await assert.rejects(
        store.retrying(async () => {
          tries++;
          throw new VersionConflict("always");
        }, 3),
        VersionConflict,
      );
      assert.equal(tries, 3, "it gives up after its attempts");
    });

    test("mutate: concurrent writers on one row all land, each with its change entry", async () => {
      await store.actions.insertAction(action("m-1", "/o/m/", "Pending"));
      const start = await store.latestRevision();
      const writers = 8;
      await Promise.all(
        Array.from({ length: writers }, (_, i) =>
          // Each writer appends its mark to what it read (a lost update would drop a mark) and
          // moves the state on, so that each write is a change of the action with its entry.
          store.mutate("action", "m-1", (a) => ({ location: `${a.location}${i},`, state: `step ${i}` })),
        ),
      );
      const row = await store.actions.findAction("m-1");
      const marks = row!.location.split(",").filter(Boolean).map(Number);
      assert.deepEqual(
        marks.sort((a, b) => a - b),
        Array.from({ length: writers }, (_, i) => i),
      );
      const entries = await store.changesSince(start, 100);
      assert.equal(entries.length, writers, "one change entry per write");
      assert.equal(entries.at(-1)!.state, row!.state, "the last entry is the row as it is now");
      assert.equal(await store.mutate("action", "gone", () => ({ state: "Success" })), undefined);
      const unchanged = await store.mutate("action", "m-1", () => undefined);
      assert.equal(unchanged?.version, row!.version, "a change with nothing to do writes nothing");
      assert.equal((await store.mutate("action", "m-1", () => ({})))?.version, row!.version);
      assert.equal((await store.changesSince(start, 100)).length, writers, "and appends nothing");
    });

    test("claimable actions: lapsed leases, and only the oldest Pending of a free object", async () => {
      const now = Date.now();
      const held = await store.actions.insertAction(action("c-1", "/o/1/"));
      await store.actions.updateAction(held, { lease_owner: "w", lease_until: now + 60_000 });
      await store.actions.insertAction(action("c-2", "/o/1/", "Pending"));
      const lapsed = await store.actions.insertAction(action("c-3", "/o/2/"));
      await store.actions.updateAction(lapsed, { lease_owner: "dead", lease_until: now - 1 });
      await store.actions.insertAction(action("c-4", "/o/3/", "Pending"));
      await store.actions.insertAction(action("c-5", "/o/3/", "Pending"));
      const ids = (await store.actions.claimableActions(now, 50))
        .map((a) => a.uuid)
        .filter((u) => u.startsWith("c-"));
      assert.deepEqual(ids.sort(), ["c-3", "c-4"]);
    });

    test("the change feed gives strictly increasing revisions in commit order, also under concurrency", async () => {
      const start = await store.latestRevision();
      let woken = 0;
      const off = store.onChange(() => woken++);
      await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          store.transaction(async (tx) => {
            await tx.appendChange({
              namespace: "alice",
              type: "service",
              action: "update",
              resource_uri: `/api/app/v1/alice/service/${i}/`,
              state: "Running",
              parents: "[]",
              datetime: Date.now(),
            });
          }),
        ),
      );
      off();
      const changes = await store.changesSince(start, 100);
      assert.equal(changes.length, 20);
      for (let i = 1; i < changes.length; i++) assert.ok(changes[i]!.revision > changes[i - 1]!.revision);
      assert.equal(woken, 20, "every commit wakes in-process readers");
      assert.deepEqual(await store.changesSince(changes.at(-1)!.revision, 10), []);
    });

    test("action logs keep their order and the tail is the last lines", async () => {
      for (let i = 1; i <= 12; i++) await store.actions.appendActionLog("log-1", Date.now(), `line ${i}`);
      const tail = await store.actions.actionLogTail("log-1", 5);
      assert.deepEqual(
        tail.map((l) => l.line),
        ["line 8", "line 9", "line 10", "line 11", "line 12"],
      );
      assert.deepEqual(
        (await store.actions.actionLogAfter("log-1", tail[3]!.id)).map((l) => l.line),
        ["line 12"],
      );
    });

    test("containers in batches: multi-row inserts and version-checked multi-row updates, in order", async () => {
      const now = Date.now();
      const rows = await store.services.insertContainers(
        Array.from({ length: 7 }, (_, i) =>
          newContainerRow(
            { namespace: "batchns", uuid: "batch-svc", name: "web", spec: "{}", spec_version: 1 },
            `node-${i % 2}`,
            i + 1,
            now,
            { uuid: `batch-${i}`, generation: `g${i}` },
          ),
        ),
      );
      assert.deepEqual(
        rows.map((r) => [r.uuid, r.version]),
        Array.from({ length: 7 }, (_, i) => [`batch-${i}`, 1]),
      );
      // Integers, text and nulls in one statement (PostgreSQL types a CASE of parameters as text).
      const updated = await store.services.updateContainers(
        rows.map((r, i) => ({
          row: r,
          patch:
            i === 6
              ? { phase: null, observed: "exited" as const, exit_code: 1 }
              : {
                  phase: null,
                  observed: "running" as const,
                  engine_id: `e${i}`,
                  started_at: now + i,
                  exit_code: null,
                },
        })),
      );
      assert.deepEqual(
        updated.map((r) => [r.uuid, r.state, r.engine_id, r.started_at, r.exit_code, r.version]),
        [
          ...Array.from({ length: 6 }, (_, i) => [`batch-${i}`, "Running", `e${i}`, now + i, null, 2]),
          ["batch-6", "Stopped", null, null, 1, 2],
        ],
      );
      assert.equal(typeof updated[0]!.started_at, "number");
      // The records answered (built from the rows as read and their patches, not read back) are
      // the records stored, for inserts and updates alike.
      const stored = new Map(
        (await store.services.containersByUuid(rows.map((r) => r.uuid))).map((r) => [r.uuid, r]),
      );
      for (const r of updated) assert.deepEqual(r, stored.get(r.uuid));
      const [fresh] = await store.services.insertContainers([
        newContainerRow(
          { namespace: "batchns", uuid: "batch-svc", name: "web", spec: "{}", spec_version: 1 },
          "node-0",
          8,
          now,
          { uuid: "batch-7" },
        ),
      ]);
      assert.deepEqual(fresh, (await store.services.containersByUuid(["batch-7"]))[0]);
      // Rows the caller knows are used only while they are current: a stale one is read again.
      const seen = new Map<string, number>();
      const patched = await store.services.patchContainers(
        ["batch-0", "batch-1"],
        (r) => {
          seen.set(r.uuid, r.version);
          return { exit_code_msg: `seen at ${r.version}` };
        },
        {
          known: new Map([
            ["batch-0", updated[0]!],
            ["batch-1", rows[1]!],
          ]),
        },
      );
      assert.deepEqual(
        [...seen],
        [
          ["batch-0", 2],
          ["batch-1", 2],
        ],
      );
      assert.deepEqual(
        [...patched.values()].map((r) => [r.uuid, r.version, r.exit_code_msg]),
        [
          ["batch-0", 3, "seen at 2"],
          ["batch-1", 3, "seen at 2"],
        ],
      );
      // One record moved on meanwhile: the batch is refused as a whole.
      await assert.rejects(
        store.transaction((tx) =>
          tx.services.updateContainers(
            rows.slice(2, 5).map((r) => ({ row: r, patch: { phase: "stopping" as const } })),
          ),
        ),
        VersionConflict,
      );
      assert.deepEqual(
        (await store.services.containersByUuid(["batch-2", "batch-3", "batch-4"])).map((r) => r.state),
        ["Running", "Running", "Running"],
      );
    });

    test("the store derives a container's and a node's state from phase, observed and destroyed_at on every write", async () => {
      const svc = { namespace: "derivens", uuid: "derive-svc", name: "web", spec: "{}", spec_version: 1 };
      const [a, b] = await store.services.insertContainers([
        newContainerRow(svc, "node-x", 1, 1, { uuid: "derive-a" }),
        newContainerRow(svc, "node-x", 2, 1, { uuid: "derive-b", phase: null, observed: "running" }),
      ]);
      assert.deepEqual([a!.state, b!.state], ["Starting", "Running"], "insertRows");
      // The engine says it runs while the action still holds it: the action's state shows.
      const seen = await store.services.updateContainer(a!, { observed: "running" });
      assert.equal(seen.state, "Starting", "updateRow");
      const ended = await store.mutate("container", "derive-a", () => ({ phase: null }));
      assert.equal(ended?.state, "Running", "mutate");
      const [stopping, exited] = await store.services.updateContainers([
        { row: ended!, patch: { phase: "stopping" } },
        { row: (await store.services.findContainer("derive-b"))!, patch: { observed: "exited" } },
      ]);
      assert.deepEqual([stopping!.state, exited!.state], ["Stopping", "Stopped"], "updateContainers");
      const gone = await store.services.patchContainers(["derive-a"], () => ({ destroyed_at: 2 }));
      assert.equal(gone.get("derive-a")?.state, "Terminated", "patchContainers");

      const node = await store.nodes.insertNode(
        newNodeRow({
          uuid: "derive-node",
          namespace: "derivens",
          cluster_uuid: null,
          provider: "sim",
          region: "r",
          node_type: "t",
          phase: "deploying",
          created: 1,
        }),
      );
      assert.equal(node.state, "Deploying");
      const deployed = await store.nodes.updateNode(node, { phase: null });
      assert.equal(deployed.state, "Deployed");
      const silent = await store.mutate("node", node.uuid, () => ({ observed: "unreachable" as const }));
      assert.equal(silent?.state, "Unreachable");
      const terminated = await store.mutate("node", node.uuid, () => ({ destroyed_at: 3 }));
      assert.equal(terminated?.state, "Terminated");
    });
  });
}

if (pgUrl) {
  describe("one PostgreSQL shared with others", () => {
    test("migrating and introspecting a schema never fails because other schemas are dropped meanwhile", async () => {
      // Several installations (or test files) in one database: one drops its schema while another
      // migrates. Kysely's stock introspection read every schema by name and failed with
      // "schema … does not exist" in most of these rounds.
      const admin = openDatabase(pgUrl);
      const mine = `store_mine_${process.pid}`;
      await admin.kysely.schema.createSchema(mine).ifNotExists().execute();
      const url = new URL(pgUrl);
      url.searchParams.set("options", `-c search_path=${mine}`);
      const db = openDatabase(url.toString());
      try {
        for (let round = 0; round < 10; round++) {
          const others = Array.from({ length: 4 }, (_, i) => `store_other_${process.pid}_${round}_${i}`);
          for (const o of others) {
            await admin.kysely.schema.createSchema(o).execute();
            await admin.kysely.schema.createTable(`${o}.t`).addColumn("a", "integer").execute();
          }
          const drops = Promise.all(others.map((o) => admin.kysely.schema.dropSchema(o).cascade().execute()));
          const work = Promise.all([
            migrateToLatest(db.kysely, db.dialect),
            db.kysely.introspection.getTables(),
            db.kysely.introspection.getTables(),
          ]);
          const [, [, seen]] = await Promise.all([drops, work]);
          assert.ok(
            seen.every((t) => t.schema === mine),
            "only the schema the database works in is introspected",
          );
        }
        const tables = (await db.kysely.introspection.getTables()).map((t) => t.name);
        assert.ok(tables.includes("services"), "the migration ran to its end");
      } finally {
        await db.close();
        await admin.kysely.schema.dropSchema(mine).cascade().execute();
        await admin.close();
      }
    });
  });
}
