// A drain written by another replica while a build is under way (issue 30, router/controller.ts):
// replica A drains one container, and its push's build reads the drains just before replica B
// drains another one (B's routers are configured without it, B's engine stops it). A's build
// must not hand A's routers that container back: before a build is handed over, the drains are
// read again and a build that read older ones is made again.
//
// On PostgreSQL, B is a second replica over the same database; on SQLite, where replicas cannot
// share the database, B's drain is written by a second Drains over the same store (what B's
// RouterModule does) whose push reaches no router of A's.
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, test } from "node:test";
import type { Platform } from "../../src/platform.ts";
import { type DrainState, Drains } from "../../src/router/drains.ts";
import type { ContainerRow } from "../../src/store/services.ts";
import { assembleReplicaB } from "../replicas/support.ts";
import { createService, deployCluster, operate, type Sim, startSim, until, uuidOf } from "../services/sim.ts";
import { freshDatabaseUrl } from "../support/harness.ts";

const onPostgres = process.env.BERTH_TEST_DATABASE_URL?.startsWith("postgres") ?? false;
const QUIET = { BERTH_ROUTER_DRAIN_GRACE_MS: "0", BERTH_ROUTER_INTERVAL_MS: "3600000" };

let s: Sim;
let b: Platform | undefined;
let db: { url: string; cleanup(): Promise<void> } | undefined;

before(async () => {
  if (onPostgres) db = await freshDatabaseUrl("");
  s = await startSim({
    env: { ...(db ? { BERTH_DATABASE_URL: db.url, BERTH_REPLICA_ID: "replica-a" } : {}), ...QUIET },
  });
  await deployCluster(s, { name: "pool", target_num_nodes: onPostgres ? 2 : 1 });
  if (db)
    b = await assembleReplicaB({ dataDir: path.join(s.h.dataDir, "b"), databaseUrl: db.url, env: QUIET });
});
after(async () => {
  await b?.close();
  await s?.close();
  await db?.cleanup();
});

test("a container another replica drained during a build is not routed again by that build", async () => {
  const svc = await createService(s, {
    image: "busybox:local",
    name: "race",
    run_command: "sleep 100000",
    target_num_containers: 3,
    container_ports: [{ protocol: "tcp", inner_port: 8080 }],
    domains: [{ host: "race.test", tls: "off" }],
  });
  await operate(s, svc.resource_uri, "start");
  await until(s, svc.resource_uri, "Running");
  const rows: ContainerRow[] = (await s.h.store.services.liveContainers({ namespace: "alice" })).filter(
    (c) => c.service_uuid === uuidOf(svc.resource_uri),
  );
  assert.equal(rows.length, 3);
  const [byB, byA] = [rows[0]!, rows[1]!];
  const controller = s.h.router.controller;
  await controller.settle();
  if (b) await b.router.controller.settle();
  assert.ok(controller.routesOf("alice"), "A has built alice's routes");

  // Every read of A's drains while armed waits for the gate, after reading: a build that read the
  // drains before B's write cannot go on until B's drain is written.
  const drains = s.h.router.drains;
  const read = drains.state.bind(drains);
  let open!: () => void;
  const gate = new Promise<void>((r) => {
    open = r;
  });
  let armed = true;
  let reached!: () => void;
  const pushBuildRead = new Promise<void>((r) => {
    reached = r;
  });
  drains.state = async (namespace: string): Promise<DrainState> => {
    const state = await read(namespace);
    if (!armed) return state;
    if (state.draining.size > 0) reached();
    await gate;
    return state;
  };

  const seen = new Map([...s.h.router.fakes].map(([node, r]) => [node, r.applied.length]));
  assert.ok(seen.size > 0, "A has routers");
  const aDrains = s.h.router.drain([byA]);
  await pushBuildRead; // A's push is building, with the drains as they were before B's.
  if (b) await b.router.drain([byB]);
  else
    await new Drains({
      store: s.h.store,
      now: () => Date.now(),
      push: async () => {},
      routes: async () => true,
      graceMs: 0,
      timeoutMs: 0,
    }).drain([byB]);
  armed = false;
  open();
  await aDrains;
  await controller.settle();
  drains.state = read;

  for (const [node, router] of s.h.router.fakes) {
    const taken = router.applied.slice(seen.get(node) ?? 0);
    const upstreams = taken.map((c) =>
      (c.routes.find((r) => r.host === "race.test")?.upstreams ?? []).map((u) => u.container),
    );
    assert.ok(taken.length > 0, `${node}'s router took a configuration without ${byA.uuid}`);
    assert.ok(
      upstreams.every((u) => !u.includes(byA.uuid)),
      `${node}: A's own drained container left (${JSON.stringify(upstreams)})`,
    );
    assert.ok(
      upstreams.every((u) => !u.includes(byB.uuid)),
      `${node}: the container B drained was routed again by A's build (${JSON.stringify(upstreams)})`,
    );
    assert.deepEqual(upstreams.at(-1), [rows[2]!.uuid], `${node} routes the one container left`);
  }
});
