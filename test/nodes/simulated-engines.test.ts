// A simulated node's engine is one engine for every replica (issue 34, item 4): two copies of it
// (as two replicas hold them) over one database agree on containers, states, logs and events; a
// stop through the copy that did not start the container ends the process the other copy ran; a
// removal reaches both. test/replicas/simulated.test.ts holds the same through three processes.
// Writers of different nodes share no lock (each node has its own clock): on PostgreSQL a call on
// one node finishes while another replica's write of another node is held open; on the old code
// every write took one clock row's lock, and the call waited for it.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { sql } from "kysely";
import type { ContainerEvent, Engine } from "../../src/drivers/engine.ts";
import { SyncedFakeEngine } from "../../src/drivers/fake/synced.ts";
import { SimulatedEngines } from "../../src/nodes/simulated-engines.ts";
import type { Db } from "../../src/store/db.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import { SimulatedEngineStore } from "../../src/store/simulated.ts";
import { Store } from "../../src/store/store.ts";
import { targets } from "../store/targets.ts";
import { waitFor } from "../support/harness.ts";

const NODE = { uuid: "0b7c1a52-8a43-4d38-9d3c-2f1f1f0f0001", node_type: "", slot: 1 };

async function lines(engine: Engine, id: string): Promise<string[]> {
  const out: string[] = [];
  for await (const l of engine.logs(id, { follow: false })) out.push(l.line.trimEnd());
  return out;
}

for (const target of targets) {
  describe(`two replicas' copies of a simulated engine on ${target.name}`, () => {
    let db: Db;
    let cleanup: () => Promise<void>;
    let one: SimulatedEngines;
    let two: SimulatedEngines;

    before(async () => {
      ({ db, cleanup } = await target.open());
      await migrateToLatest(db.kysely, db.dialect);
      const store = new Store(db.kysely, db.dialect);
      const make = () => new SyncedFakeEngine({ subnet: "10.128.1.0/24" });
      one = new SimulatedEngines(store, make, (err) => assert.fail(String(err)), 20);
      two = new SimulatedEngines(store, make, (err) => assert.fail(String(err)), 20);
    });
    after(async () => {
      await one.stop();
      await two.stop();
      await cleanup();
    });

    test("containers, logs, stops and removals are the same through either copy", async () => {
      const a = one.engineFor(NODE);
      const b = two.engineFor(NODE);
      // b watches the node: it hears of what happens through a.
      const heard: ContainerEvent[] = [];
      const watching = new AbortController();
      void (async () => {
        for await (const e of b.events({ signal: watching.signal })) heard.push(e);
      })().catch(() => undefined);

      const id = await a.createContainer({
        name: "talker",
        image: "busybox:local",
        cmd: ["sh", "-c", "echo hello; sleep 100000"],
        labels: { "io.berth.test": "1" },
      });
      await a.startContainer(id);
      await waitFor("a's process to print", async () => (await lines(a, id)).length === 1, 5000, 10);
      await waitFor("the line to reach b", async () => (await lines(b, id)).length === 1, 5000, 10);
      assert.deepEqual(await lines(b, id), ["hello"]);
      const viewA = await a.inspectContainer(id);
      const viewB = await b.inspectContainer(id);
      assert.equal(viewB?.state, "running");
      assert.deepEqual(
        { ...viewB, env: undefined },
        { ...viewA, env: undefined },
        "the same container through either copy",
      );
      assert.deepEqual(
        (await b.listContainers({ labels: { "io.berth.test": "1" } })).map((c) => c.id),
        [id],
      );
      await waitFor(
        "b's watcher to hear the create and start",
        async () => heard.some((e) => e.id === id && e.action === "start"),
        5000,
        10,
      );

      // b stops what a started: a's process ends, and a sees it exited.
      const stopped = await b.stopContainer(id, { timeoutS: 0 });
      assert.equal(stopped.killed, true, "sleep as PID 1 ignores SIGTERM: killed after the timeout");
      assert.equal((await b.inspectContainer(id))?.state, "exited");
      await waitFor(
        "a to see it exited",
        async () => (await a.inspectContainer(id))?.state === "exited",
        5000,
        10,
      );
      assert.equal((await a.inspectContainer(id))?.exitCode, 137);
      assert.deepEqual(await lines(a, id), ["hello"], "no line twice");

      // a starts it again (its process runs in a again); b removes it; both lose it.
      await a.startContainer(id);
      assert.equal((await b.inspectContainer(id))?.state, "running");
      await b.removeContainer(id, { force: true });
      assert.equal(await a.inspectContainer(id), undefined);
      assert.deepEqual(await a.listContainers({ all: true }), []);
      await waitFor(
        "b's watcher to hear a die or destroy",
        async () => heard.some((e) => e.id === id && e.action === "destroy"),
        5000,
        10,
      );
      watching.abort();
    });

    test("a copy made later (a watcher moved) reads the node whole", async () => {
      const a = one.engineFor({ ...NODE, uuid: "0b7c1a52-8a43-4d38-9d3c-2f1f1f0f0002" });
      const id = await a.createContainer({ image: "busybox:local", cmd: ["sleep", "100000"] });
      await a.startContainer(id);
      const store = new Store(db.kysely, db.dialect);
      const three = new SimulatedEngines(store, () => new SyncedFakeEngine({ subnet: "10.128.2.0/24" }));
      try {
        const late = three.engineFor({ ...NODE, uuid: "0b7c1a52-8a43-4d38-9d3c-2f1f1f0f0002" });
        const found = await late.listContainers();
        assert.deepEqual(
          found.map((c) => [c.id, c.state]),
          [[id, "running"]],
        );
      } finally {
        await three.stop();
      }
    });

    test("a call on one node never waits for another replica's write of another node", {
      skip: target.name !== "postgres" && "SQLite has one writer",
    }, async () => {
      const store = new Store(db.kysely, db.dialect);
      const held = { ...NODE, uuid: "0b7c1a52-8a43-4d38-9d3c-2f1f1f0f0005" };
      const free = { ...NODE, uuid: "0b7c1a52-8a43-4d38-9d3c-2f1f1f0f0006" };
      let release!: () => void;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let writing!: (pid: number) => void;
      const holderPid = new Promise<number>((resolve) => {
        writing = resolve;
      });
      // Another replica's write of `held`, left open (its locks kept) until the test releases it.
      const holder = store.transaction(async (tx) => {
        const row = { engineId: "held-container", nodeUuid: held.uuid, origin: "another-replica" };
        await new SimulatedEngineStore(tx).write(
          [{ ...row, container: undefined, claims: [] }],
          undefined,
          1,
        );
        const pid = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(tx.db);
        writing(Number(pid.rows[0]!.pid));
        await gate;
      });
      const pid = await holderPid;
      let done = false;
      try {
        const a = one.engineFor(free);
        const call = (async () => {
          const id = await a.createContainer({ image: "busybox:local", cmd: ["sleep", "100000"] });
          await a.startContainer(id);
          done = true;
        })();
        // Either the calls are done, or one waits for a lock the open write holds.
        await waitFor(
          "the calls to finish, or to wait for the open write",
          async () => {
            if (done) return true;
            const r = await sql<{ n: string }>`select count(*) as n from pg_stat_activity
                where ${pid} = any(pg_blocking_pids(pid))`.execute(db.kysely);
            return Number(r.rows[0]?.n) > 0;
          },
          20_000,
          20,
        );
        assert.equal(done, true, "a write of another node waited for the open write's lock");
        await call;
      } finally {
        release();
        await holder;
      }
    });

    test("a copy nobody watches applies others' writes at its next call, once per container", async () => {
      const node = { ...NODE, uuid: "0b7c1a52-8a43-4d38-9d3c-2f1f1f0f0003" };
      const other = { ...NODE, uuid: "0b7c1a52-8a43-4d38-9d3c-2f1f1f0f0004" };
      const store = new Store(db.kysely, db.dialect);
      const applied: string[] = [];
      const make = () => {
        const e = new SyncedFakeEngine({ subnet: "10.128.1.0/24" });
        const apply = e.applyContainer.bind(e);
        e.applyContainer = (c) => {
          applied.push(c.id);
          apply(c);
        };
        return e;
      };
      const reader = new SimulatedEngines(store, make, (err) => assert.fail(String(err)), 3_600_000);
      try {
        const a = one.engineFor(node);
        const mine = reader.engineFor(node);
        assert.deepEqual(await mine.listContainers({ all: true }), []);
        // Written four times by the other replica, read here by a call on another node.
        const id = await a.createContainer({ image: "busybox:local", cmd: ["sleep", "100000"] });
        await a.startContainer(id);
        await a.stopContainer(id, { timeoutS: 0 });
        await a.startContainer(id);
        await reader.engineFor(other).listContainers({ all: true });
        assert.deepEqual(applied, [], "read, not applied: nobody called or watches the node here");
        assert.equal((await mine.inspectContainer(id))?.state, "running");
        assert.deepEqual(applied, [id], "the latest write applied once, before the call");
      } finally {
        await reader.stop();
      }
    });
  });
}
