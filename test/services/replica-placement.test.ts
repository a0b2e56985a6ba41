// Two replicas place at the same moment on one PostgreSQL database (issue 28): each plans over its
// own snapshot, and only the plan applier's check at commit (orchestrator/plan-applier.ts, the
// nodes' placement generations) keeps the second from taking what the first took: the same
// published host port on a one-node cluster, the last free memory of a node. Exactly one commits;
// the other plans again on a fresh snapshot and goes to another node if one fits, or its action
// fails with the scheduler's reason.
//
// The race is made, not hoped for: the test holds a SHARE lock on the containers table, which lets
// every read through and holds every insert of container records. Both replicas read their
// snapshots and plan; the first to reach its commit waits on the lock, the other behind it (at the
// nodes' generations with the applier, at the same insert without). Once both wait, the lock goes.
//
// Replicas share PostgreSQL, so this file runs in the PostgreSQL tier (BERTH_TEST_DATABASE_URL).
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import pg from "pg";
import type { Platform } from "../../src/platform.ts";
import { assembleReplicaB } from "../replicas/support.ts";
import { type Caller, createUser, freshDatabaseUrl } from "../support/harness.ts";
import {
  call,
  containersOf,
  createService,
  deployCluster,
  finished,
  RecordingEngine,
  type Sim,
  startSim,
  until,
  waitFor,
} from "./sim.ts";

const onPostgres = process.env.BERTH_TEST_DATABASE_URL?.startsWith("postgres") ?? false;
if (process.env.CI === "true" && !process.env.BERTH_TEST_PG_URL?.startsWith("postgres")) {
  throw new Error(
    "BERTH_TEST_PG_URL must name a PostgreSQL server in CI: the replica placement race runs there",
  );
}

describe("two replicas placing at the same moment", {
  skip: onPostgres ? false : "replicas share a PostgreSQL database: this file runs in the PostgreSQL tier",
}, () => {
  let db: { url: string; cleanup(): Promise<void> };
  let s: Sim;
  let b: Platform;
  let sql: pg.Client;

  before(async () => {
    db = await freshDatabaseUrl("");
    s = await startSim({
      env: {
        BERTH_DATABASE_URL: db.url,
        BERTH_REPLICA_ID: "replica-a",
        BERTH_RECONCILE_INTERVAL_MS: "3600000",
      },
    });
    b = await assembleReplicaB({
      dataDir: path.join(s.h.dataDir, "b"),
      databaseUrl: db.url,
      env: {
        BERTH_RECONCILE_INTERVAL_MS: "3600000",
        BERTH_ACTION_POLL_MS: "100",
        BERTH_SIM_DELAY_FACTOR: "0.01",
      },
      options: {
        // B's engines of the simulated nodes are made as A's are, so both report the same node
        // facts (memory) when they probe a node.
        makeFakeEngine: (n) =>
          new RecordingEngine({
            name: `sim-b-${n.uuid.slice(0, 8)}`,
            subnet: `10.${128 + Math.floor(n.slot / 256)}.${n.slot % 256}.0/24`,
            registry: [],
          }),
      },
    });
    // B takes no action until the test lets it (so that each replica runs one of the two starts).
    await b.actions.stop();
    sql = new pg.Client({ connectionString: db.url });
    await sql.connect();
  });
  after(async () => {
    await sql?.end();
    await b?.close();
    await s?.close();
    await db?.cleanup();
  });

  /**
   * Sessions of the replicas waiting to write placements: inserts of container records held by the
   * test's lock (they wait on the containers table, blocked by the test's session), and sessions
   * waiting behind one of those (for the nodes' placement generations it holds).
   */
  const waitingPlacements = async (): Promise<number> => {
    const r = await sql.query(
      `with held as (
         select l.pid from pg_locks l
          where not l.granted and l.relation = 'containers'::regclass
            and pg_backend_pid() = any(pg_blocking_pids(l.pid)))
       select (select count(*) from held)::int
            + (select count(distinct l.pid) from pg_locks l
                where not l.granted and l.pid not in (select pid from held)
                  and exists (select 1 from held where held.pid = any(pg_blocking_pids(l.pid))))::int as n`,
    );
    return r.rows[0].n as number;
  };

  /**
   * Starts `first` on replica A and `second` on replica B so that both plan before either commits;
   * answers both actions once they end.
   */
  async function race(who: Caller, first: string, second: string) {
    await sql.query("begin");
    await sql.query("lock table containers in share mode");
    let released = false;
    try {
      const one = await call(s.h, who, "POST", `${first}start/`);
      assert.equal(one.status, 202, one.raw);
      await waitFor("replica A waits to write its placements", async () => (await waitingPlacements()) === 1);
      // A holds its action and takes no other; B takes the second start.
      const stoppingA = s.h.actions.stop({ graceMs: 60_000 });
      b.actions.start();
      const two = await call(s.h, who, "POST", `${second}start/`);
      assert.equal(two.status, 202, two.raw);
      await waitFor(
        "both replicas wait to write their placements",
        async () => (await waitingPlacements()) === 2,
      );
      await sql.query("commit");
      released = true;
      const results = [await finished(s, one, who), await finished(s, two, who)];
      await stoppingA;
      s.h.actions.start();
      await b.actions.stop();
      return results;
    } finally {
      if (!released) await sql.query("rollback");
    }
  }

  test("the same published host port on a one-node cluster: one container, the other start fails naming the port", async () => {
    const alice = await createUser(s.h, "ports");
    const cluster = await deployCluster(s, { name: "one", target_num_nodes: 1 }, alice);
    const port = [{ protocol: "tcp", inner_port: 80, outer_port: 8080, published: true }];
    const web = await createService(
      s,
      { image: "busybox:local", name: "web", run_command: "sleep 100000", container_ports: port },
      alice,
    );
    const api = await createService(
      s,
      { image: "busybox:local", name: "api", run_command: "sleep 100000", container_ports: port },
      alice,
    );

    const actions = await race(alice, web.resource_uri, api.resource_uri);

    const outcomes = actions.map((a) => a.state).sort();
    assert.deepEqual(outcomes, ["Failed", "Success"], actions.map((a) => a.log.join("\n")).join("\n---\n"));
    const failed = actions.find((a) => a.state === "Failed")!;
    assert.ok(
      failed.log.some((l) => /published port 8080\/tcp already taken on this node/.test(l)),
      failed.log.join("\n"),
    );
    assert.ok(
      failed.log.some((l) => /Another replica placed containers on node\(s\) .* planning again/.test(l)),
      failed.log.join("\n"),
    );
    const services = await Promise.all(
      [web, api].map(async (x) => (await call(s.h, alice, "GET", x.resource_uri)).body),
    );
    const live = (await Promise.all(services.map((x) => containersOf(s, x, alice))))
      .flat()
      .filter((c) => c.state !== "Terminated");
    assert.equal(live.length, 1, "one container holds 8080/tcp on the node");
    assert.equal(live[0].node, cluster.nodes[0]);
  });

  test("the last free memory of a node: the second plan goes to the other node", async () => {
    const bob = await createUser(s.h, "memory");
    const cluster = await deployCluster(s, { name: "two", target_num_nodes: 2 }, bob);
    const nodes = await Promise.all(
      cluster.nodes.map(async (uri: string) => (await call(s.h, bob, "GET", uri)).body),
    );
    const memoryMb = Math.min(...nodes.map((n) => n.memory as number));
    assert.ok(memoryMb > 0, "simulated nodes know their memory");
    // Two such containers never fit on one node.
    const memory = Math.floor(memoryMb * 0.6);
    const big = (name: string) =>
      createService(s, { image: "busybox:local", name, run_command: "sleep 100000", memory }, bob);
    const one = await big("one");
    const two = await big("two");
    // A small container on one node makes the other the emptiest for both replicas (their own
    // tie-breaks among equally empty nodes would otherwise send each to a node of its own).
    const ballast = await createService(
      s,
      { image: "busybox:local", name: "ballast", run_command: "sleep 100000" },
      bob,
    );
    const started = await call(s.h, bob, "POST", `${ballast.resource_uri}start/`);
    assert.equal(started.status, 202, started.raw);
    assert.equal((await finished(s, started, bob)).state, "Success");

    const actions = await race(bob, one.resource_uri, two.resource_uri);

    assert.deepEqual(
      actions.map((a) => a.state),
      ["Success", "Success"],
      actions.map((a) => a.log.join("\n")).join("\n---\n"),
    );
    const placed = await Promise.all(
      [one, two].map(async (x) => containersOf(s, await until(s, x.resource_uri, "Running", bob), bob)),
    );
    assert.deepEqual(
      placed.map((cs) => cs.length),
      [1, 1],
    );
    assert.notEqual(
      placed[0]![0].node,
      placed[1]![0].node,
      `each node holds ${memory} MB of its ${memoryMb} MB once`,
    );
    assert.equal(
      actions.filter((a) => a.log.some((l) => /Another replica placed containers on node\(s\)/.test(l)))
        .length,
      1,
      "exactly one of the plans met the other's commit and was made again",
    );
  });
});
