// Two replicas starting containers on one simulated node at once (issue 34, item 4): each copy of
// the node's engine hands out addresses and host ports from what it knows, so both could give out
// the same ones. The store claims them (migration 0036): the second copy to write finds them taken
// and its container gets others, as if given at its start; a host port asked for by number goes
// to the first, and the second's start fails as Docker's does. On PostgreSQL the test holds the
// engines' clock table until both copies have chosen and wait to write, so both chose from the
// same view (on the old code: the same address and port every run).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { sql } from "kysely";
import type { ContainerView, Engine } from "../../src/drivers/engine.ts";
import { SyncedFakeEngine } from "../../src/drivers/fake/synced.ts";
import { SimulatedEngines } from "../../src/nodes/simulated-engines.ts";
import type { Db } from "../../src/store/db.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import { SimulatedEngineStore } from "../../src/store/simulated.ts";
import { Store } from "../../src/store/store.ts";
import { targets } from "../store/targets.ts";
import { waitFor } from "../support/harness.ts";

const NODE = { uuid: "0b7c1a52-8a43-4d38-9d3c-2f1f1f0fc1a1", node_type: "", slot: 3 };

for (const target of targets) {
  describe(`two replicas starting containers on one simulated node on ${target.name}`, () => {
    let db: Db;
    let cleanup: () => Promise<void>;
    let store: Store;
    let one: SimulatedEngines;
    let two: SimulatedEngines;
    let a: Engine;
    let b: Engine;

    before(async () => {
      ({ db, cleanup } = await target.open());
      await migrateToLatest(db.kysely, db.dialect);
      store = new Store(db.kysely, db.dialect);
      const make = () => new SyncedFakeEngine({ subnet: "10.128.3.0/24" });
      one = new SimulatedEngines(store, make, (err) => assert.fail(String(err)), 20);
      two = new SimulatedEngines(store, make, (err) => assert.fail(String(err)), 20);
      a = one.engineFor(NODE);
      b = two.engineFor(NODE);
    });
    after(async () => {
      await one.stop();
      await two.stop();
      await cleanup();
    });

    /**
     * Runs both starts at once. On PostgreSQL, the engines' writes wait until both are waiting
     * (each chose its container's address and ports before it writes).
     */
    async function atOnce<T>(starts: () => Promise<T>[]): Promise<PromiseSettledResult<T>[]> {
      if (db.dialect !== "postgres") return Promise.allSettled(starts());
      let release!: () => void;
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      let locked!: () => void;
      const isLocked = new Promise<void>((resolve) => {
        locked = resolve;
      });
      const holder = db.kysely.transaction().execute(async (trx) => {
        await sql`lock table simulated_node_clocks in exclusive mode`.execute(trx);
        locked();
        await released;
      });
      await isLocked;
      const settled = Promise.allSettled(starts());
      try {
        await waitFor(
          "both copies to wait to write",
          async () => {
            const r = await sql<{ n: string }>`select count(*) as n from pg_locks
              where relation = 'simulated_node_clocks'::regclass and not granted`.execute(db.kysely);
            return Number(r.rows[0]?.n) >= 2;
          },
          20_000,
          20,
        );
      } finally {
        release();
        await holder;
      }
      return settled;
    }

    const view = async (engine: Engine, id: string): Promise<ContainerView> => {
      const v = await engine.inspectContainer(id);
      assert.ok(v, `container ${id}`);
      return v;
    };

    test("each container gets its own address and host port, seen alike by both", async () => {
      const spec = {
        image: "busybox:local",
        cmd: ["sleep", "100000"],
        portBindings: [{ containerPort: 80 }],
      };
      const x = await a.createContainer({ ...spec, name: "claim-x" });
      const y = await b.createContainer({ ...spec, name: "claim-y" });
      const results = await atOnce(() => [a.startContainer(x), b.startContainer(y)]);
      assert.deepEqual(
        results.map((r) => r.status),
        ["fulfilled", "fulfilled"],
      );
      const vx = await view(a, x);
      const vy = await view(b, y);
      assert.equal(vx.state, "running");
      assert.equal(vy.state, "running");
      assert.notEqual(vx.ipAddress, vy.ipAddress, "two containers of one node, one address");
      assert.notEqual(vx.ports["80/tcp"], vy.ports["80/tcp"], "two containers of one node, one host port");
      // Each copy shows the other's container as it runs.
      assert.deepEqual((await view(b, x)).ipAddress, vx.ipAddress);
      assert.deepEqual((await view(a, y)).ports, vy.ports);
      const claims = await new SimulatedEngineStore(store).claimsOf(NODE.uuid);
      assert.deepEqual(
        claims.map((c) => [c.claim, c.engineId]).sort(),
        [
          [`ip/${vx.ipAddress}`, x],
          [`ip/${vy.ipAddress}`, y],
          [`tcp/${vx.ports["80/tcp"]}`, x],
          [`tcp/${vy.ports["80/tcp"]}`, y],
        ].sort(),
      );
      // A third start on either copy takes none of them.
      const z = await a.createContainer({ ...spec, name: "claim-z" });
      await a.startContainer(z);
      const vz = await view(a, z);
      assert.ok(![vx.ipAddress, vy.ipAddress].includes(vz.ipAddress));
      for (const id of [x, y, z]) await b.removeContainer(id, { force: true });
      assert.deepEqual(await new SimulatedEngineStore(store).claimsOf(NODE.uuid), [], "removed: released");
    });

    test("a host port asked for by number goes to one of them; the other's start fails as Docker's", async () => {
      const spec = {
        image: "busybox:local",
        cmd: ["sleep", "100000"],
        portBindings: [{ containerPort: 80, hostPort: 8080 }],
      };
      const x = await a.createContainer({ ...spec, name: "fixed-x" });
      const y = await b.createContainer({ ...spec, name: "fixed-y" });
      const results = await atOnce(() => [a.startContainer(x), b.startContainer(y)]);
      const failed = results.flatMap((r, i) => (r.status === "rejected" ? [{ i, reason: r.reason }] : []));
      assert.equal(failed.length, 1, `one start of two fails: ${JSON.stringify(results)}`);
      assert.match(String(failed[0]!.reason), /port is already allocated/);
      const [winner, loser] = failed[0]!.i === 0 ? [y, x] : [x, y];
      for (const engine of [a, b]) {
        await waitFor(
          "both copies to agree",
          async () =>
            (await engine.inspectContainer(loser))?.state === "exited" &&
            (await engine.inspectContainer(winner))?.state === "running",
          5000,
          10,
        );
        assert.equal((await view(engine, winner)).ports["80/tcp"], 8080);
        assert.deepEqual((await view(engine, loser)).ports, {});
      }
      // Started again once the port is free, it runs.
      await a.stopContainer(winner, { timeoutS: 0 });
      await b.startContainer(loser);
      assert.equal((await view(a, loser)).ports["80/tcp"], 8080);
    });
  });
}
