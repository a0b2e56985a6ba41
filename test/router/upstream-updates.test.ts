// What a router must load and what it takes as upstreams only (issue 30: routers configured
// "without dropping open connections"). A configuration load closes every WebSocket Caddy 2.6
// proxies, so a change of a route's upstreams (a scale, a start-first redeploy) reaches the
// routers as an upstream update (Caddy: the route resolver's answer, drivers/router/dns.ts) and
// never as a load; a change of domains is a load. The fake router counts both as Caddy's driver
// does (router.ts routingShape); test/real/router-ws.test.ts shows the WebSocket kept on Caddy.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { FakeRouter } from "../../src/drivers/router/fake-router.ts";
import type { ApplyCounts } from "../../src/drivers/router/router.ts";
import {
  call,
  containersOf,
  createService,
  deployCluster,
  operate,
  type Sim,
  startSim,
  until,
  waitFor,
} from "../services/sim.ts";

let s: Sim;

before(async () => {
  s = await startSim({ env: { BERTH_ROUTER_DRAIN_GRACE_MS: "0", BERTH_ROUTER_INTERVAL_MS: "3600000" } });
  await deployCluster(s, { name: "pool", target_num_nodes: 1 });
});
after(() => s.close());

async function router(): Promise<FakeRouter> {
  const [node] = await s.h.store.nodes.liveNodes({ namespace: "alice" });
  return waitFor("alice's router", async () => s.h.router.fakes.get(node!.uuid));
}

/** The route's upstream addresses in the router's last configuration. */
function upstreams(r: FakeRouter, host: string): string[] {
  const route = r.current?.routes.find((x) => x.host === host);
  return (route?.upstreams ?? []).map((u) => u.address).sort();
}

/** The service's containers' addresses now (the service read again). */
async function addresses(uri: string): Promise<string[]> {
  const svc = (await call(s.h, s.alice, "GET", uri)).body;
  return (await containersOf(s, svc)).map((c) => `${c.private_ip}:8080`).sort();
}

function since(r: FakeRouter, from: ApplyCounts): ApplyCounts {
  return {
    loads: r.applyCounts.loads - from.loads,
    upstreamUpdates: r.applyCounts.upstreamUpdates - from.upstreamUpdates,
  };
}

test("a scale and a start-first redeploy change upstreams without a load; a domain change loads", async () => {
  const created = await createService(s, {
    image: "busybox:local",
    name: "chat",
    run_command: "sleep 100000",
    target_num_containers: 2,
    container_ports: [{ protocol: "tcp", inner_port: 8080 }],
    domains: [{ host: "chat.test", tls: "off" }],
    rollout: { order: "start-first", max_surge: 1 },
  });
  await operate(s, created.resource_uri, "start");
  const svc = await until(s, created.resource_uri, "Running");
  await s.h.router.controller.settle();
  const r = await router();
  assert.equal(upstreams(r, "chat.test").length, 2);

  let from = { ...r.applyCounts };
  const patched = await call(s.h, s.alice, "PATCH", svc.resource_uri, { target_num_containers: 3 });
  assert.equal(patched.status, 200, patched.raw);
  await operate(s, svc.resource_uri, "scale");
  await s.h.router.controller.settle();
  const three = await addresses(svc.resource_uri);
  assert.equal(three.length, 3);
  assert.deepEqual(upstreams(r, "chat.test"), three, "the third container is routed");
  let moved = since(r, from);
  assert.equal(moved.loads, 0, "a scale loads no configuration");
  assert.ok(moved.upstreamUpdates >= 1, `upstream updates during the scale: ${moved.upstreamUpdates}`);

  from = { ...r.applyCounts };
  await operate(s, svc.resource_uri, "redeploy");
  await s.h.router.controller.settle();
  const renewed = await addresses(svc.resource_uri);
  assert.deepEqual(upstreams(r, "chat.test"), renewed, "the new containers are routed");
  assert.notDeepEqual(renewed, three, "the redeploy replaced the containers");
  moved = since(r, from);
  assert.equal(moved.loads, 0, "a start-first redeploy loads no configuration");
  assert.ok(moved.upstreamUpdates >= 2, `upstream updates during the redeploy: ${moved.upstreamUpdates}`);
  assert.equal(r.request("chat.test", "/").status, 200);

  from = { ...r.applyCounts };
  const domains = await call(s.h, s.alice, "PATCH", svc.resource_uri, {
    domains: [
      { host: "chat.test", tls: "off" },
      { host: "talk.test", tls: "off" },
    ],
  });
  assert.equal(domains.status, 200, domains.raw);
  await s.h.router.controller.settle();
  assert.deepEqual(upstreams(r, "talk.test"), renewed);
  assert.deepEqual(since(r, from), { loads: 1, upstreamUpdates: 0 }, "a new domain is one load");
});
