// Drains and holds (issue 30, router/drains.ts), on simulated nodes: a start-first redeploy keeps
// each old container routed until its replacement is ready (the routes never shrink below the
// service's size), and what is drained or held lives in the database, so two replicas over one
// database build the same routes and only the replica that owns a node configures its router.
//
// The replica part needs PostgreSQL (replicas share it): it runs in the PostgreSQL tier
// (BERTH_TEST_DATABASE_URL), the rest everywhere.
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { Platform } from "../../src/platform.ts";
import type { ContainerRow } from "../../src/store/services.ts";
import { assembleReplicaB } from "../replicas/support.ts";
import {
  call,
  containersOf,
  createService,
  deployCluster,
  operate,
  type Sim,
  startSim,
  until,
  uuidOf,
  waitFor,
} from "../services/sim.ts";
import { freshDatabaseUrl } from "../support/harness.ts";

const onPostgres = process.env.BERTH_TEST_DATABASE_URL?.startsWith("postgres") ?? false;

let s: Sim;
let db: { url: string; cleanup(): Promise<void> } | undefined;

before(async () => {
  if (onPostgres) db = await freshDatabaseUrl("");
  s = await startSim({
    env: {
      ...(db ? { BERTH_DATABASE_URL: db.url, BERTH_REPLICA_ID: "replica-a" } : {}),
      BERTH_ROUTER_DRAIN_GRACE_MS: "0",
      BERTH_ROUTER_INTERVAL_MS: "200",
    },
  });
  await deployCluster(s, { name: "pool", target_num_nodes: onPostgres ? 4 : 1 });
});
after(async () => {
  await s?.close();
  await db?.cleanup();
});

async function web(name: string, body: Record<string, unknown>) {
  const svc = await createService(s, {
    image: "busybox:local",
    name,
    run_command: "sleep 100000",
    container_ports: [{ protocol: "tcp", inner_port: 8080 }],
    ...body,
  });
  await operate(s, svc.resource_uri, "start");
  return until(s, svc.resource_uri, "Running");
}

/** How many upstreams the host's route has in each configuration a router took after `from` of its configurations. */
function upstreamCounts(host: string, from = new Map<string, number>()): number[] {
  const counts: number[] = [];
  for (const [node, router] of s.h.router.fakes)
    for (const config of router.applied.slice(from.get(node) ?? 0)) {
      const route = config.routes.find((r) => r.host === host);
      if (route) counts.push(route.upstreams.length);
    }
  return counts;
}

describe("a start-first redeploy", () => {
  test("keeps each old container routed until its replacement is ready, then drains it", async () => {
    const svc = await web("front", {
      target_num_containers: 2,
      domains: [{ host: "front.test", tls: "off" }],
      rollout: { order: "start-first", max_surge: 2 },
    });
    await s.h.router.controller.settle();
    const old = (await containersOf(s, svc)).map((c) => c.private_ip).sort();
    const seen = new Map([...s.h.router.fakes].map(([node, r]) => [node, r.applied.length]));
    await operate(s, svc.resource_uri, "redeploy");
    await s.h.router.controller.settle();
    const during = upstreamCounts("front.test", seen);
    assert.ok(during.length >= 2, `configurations taken during the redeploy: ${during.length}`);
    assert.ok(
      during.every((n) => n >= 2),
      `upstreams in each configuration during the redeploy: ${during.join(", ")} (never fewer than 2)`,
    );
    // The old containers were marked held while kept (what a rollout paused after a failure shows).
    const heldSeen = [...s.h.router.fakes].some(([node, router]) =>
      router.applied
        .slice(seen.get(node) ?? 0)
        .some((c) => c.routes.some((r) => r.host === "front.test" && r.upstreams.some((u) => u.held))),
    );
    assert.ok(heldSeen, "an old container was routed as held during the redeploy");
    const routes = (await call(s.h, s.alice, "GET", `${svc.resource_uri}routes/`)).body.objects;
    const now = routes[0].upstreams.map((u: { address: string }) => u.address.split(":")[0]).sort();
    assert.equal(now.length, 2, "only the new containers stay");
    assert.deepEqual(
      routes[0].upstreams.map((u: { held: boolean }) => u.held),
      [false, false],
      "none is held once the redeploy ended",
    );
    assert.notDeepEqual(now, old, "the old containers left");
  });
});

describe("two replicas over one database", {
  skip: onPostgres ? false : "replicas share a PostgreSQL database: this part runs in the PostgreSQL tier",
}, () => {
  let b: Platform;

  before(async () => {
    b = await assembleReplicaB({
      dataDir: path.join(s.h.dataDir, "b"),
      databaseUrl: db!.url,
      env: { BERTH_ROUTER_INTERVAL_MS: "200", BERTH_ROUTER_DRAIN_GRACE_MS: "0" },
    });
  });
  after(async () => {
    await b?.close();
  });

  test("see the same drains and holds, and only a node's owner configures its router", async () => {
    const svc = await web("shared", {
      target_num_containers: 3,
      domains: [{ host: "shared.test", tls: "off" }],
    });
    const rows: ContainerRow[] = await s.h.store.services.liveContainers({ namespace: "alice" });
    const mine = rows.filter((c) => c.service_uuid === uuidOf(svc.resource_uri));
    assert.equal(mine.length, 3);
    const upstreamsOn = async (p: { router: Platform["router"] }) =>
      ((await p.router.routes("alice")).routes.find((r) => r.host === "shared.test")?.upstreams ?? [])
        .map((u) => u.container)
        .sort();
    assert.equal((await upstreamsOn(b)).length, 3, "B routes the three containers");

    // A drains one container: B's routes leave it out too, so B never routes it back.
    await s.h.router.drain([mine[0]!]);
    assert.ok(!(await upstreamsOn(b)).includes(mine[0]!.uuid), "B leaves out what A drained");
    // B holds one (a start-first redeploy on B): A's routes keep it as it was routed.
    await b.router.hold([mine[1]!]);
    assert.deepEqual(
      (await s.h.router.drains.state("alice")).held.map((c) => c.uuid),
      [mine[1]!.uuid],
      "A sees what B holds",
    );
    await b.router.release([mine[1]!]);
    assert.ok(!(await upstreamsOn(s.h)).includes(mine[1]!.uuid), "released: out of A's routes too");

    // Each node's router is configured by the replica owning the node, never by both.
    const nodes = await s.h.store.nodes.liveNodes({ namespace: "alice" });
    await waitFor(
      "every node owned by one replica",
      async () =>
        nodes.every((n) => s.h.coordinator!.ownsNode(n.uuid) !== b.coordinator!.ownsNode(n.uuid)) ||
        undefined,
      10_000,
    );
    const applies = (p: Platform, node: string) => p.router.fakes.get(node)?.applied.length ?? 0;
    const before = new Map(nodes.map((n) => [n.uuid, { a: applies(s.h, n.uuid), b: applies(b, n.uuid) }]));
    const patched = await call(s.h, s.alice, "PATCH", svc.resource_uri, {
      domains: [
        { host: "shared.test", tls: "off" },
        { host: "more.test", tls: "off" },
      ],
    });
    assert.equal(patched.status, 200, patched.raw);
    await waitFor(
      "every router takes the new domain",
      async () =>
        nodes.every((n) => {
          const owner = s.h.coordinator!.ownsNode(n.uuid) ? s.h : b;
          return owner.router.fakes.get(n.uuid)?.current?.routes.some((r) => r.host === "more.test");
        }) || undefined,
      10_000,
    );
    for (const p of [s.h, b]) await p.router.controller.settle();
    for (const n of nodes) {
      const was = before.get(n.uuid)!;
      const ownerIsA = s.h.coordinator!.ownsNode(n.uuid);
      const notOwner = ownerIsA ? applies(b, n.uuid) - was.b : applies(s.h, n.uuid) - was.a;
      assert.equal(notOwner, 0, `the replica not owning ${n.uuid} handed its router nothing`);
    }
  });
});
