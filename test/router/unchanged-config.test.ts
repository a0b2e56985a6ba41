// The router controller's cost per change (issue 34 at scale, router/controller.ts): a change that
// leaves a namespace's router configuration as it was (a service without domains started, scaled,
// its environment edited) configures none of the namespace's nodes, however many it has; a change
// of the routes reaches every node once. At 5,000 nodes the old controller did a node read and a
// digest per node for every change of the namespace.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { NodeRow } from "../../src/store/nodes.ts";
import { call, createService, deployCluster, operate, type Sim, startSim, until } from "../services/sim.ts";

const NODES = 6;
let s: Sim;
/** The nodes whose router the controller looked at, in order. */
const looked: string[] = [];
// The simulated platform answers through inject and its timers are unref'd: this keeps the test's
// process alive while it waits for the controller's gathered work.
const alive = setInterval(() => {}, 60_000);

before(async () => {
  s = await startSim({ env: { BERTH_ROUTER_INTERVAL_MS: "3600000" } });
  const module = s.h.router;
  const forNode = module.forNode.bind(module);
  module.forNode = (node: NodeRow) => {
    looked.push(node.uuid);
    return forNode(node);
  };
  await deployCluster(s, { name: "wide", target_num_nodes: NODES });
  await module.controller.settle();
});
after(async () => {
  clearInterval(alive);
  await s?.close();
});

test("changes that leave the routes as they were configure no node; a new domain reaches each node once", async () => {
  const svc = await createService(s, {
    image: "busybox:local",
    name: "worker",
    run_command: "sleep 100000",
    target_num_containers: 2,
    container_ports: [{ protocol: "tcp", inner_port: 8080 }],
  });
  looked.length = 0;
  await operate(s, svc.resource_uri, "start");
  await until(s, svc.resource_uri, "Running");
  const edited = await call(s.h, s.alice, "PATCH", svc.resource_uri, {
    container_envvars: [{ key: "MODE", value: "quiet" }],
  });
  assert.equal(edited.status, 200, edited.raw);
  await operate(s, svc.resource_uri, "scale");
  await s.h.router.controller.settle();
  assert.deepEqual(looked, [], "no node's router was looked at for changes that route nothing");

  const routed = await call(s.h, s.alice, "PATCH", svc.resource_uri, {
    domains: [{ host: "worker.test", tls: "off", port: 8080 }],
  });
  assert.equal(routed.status, 200, routed.raw);
  await s.h.router.controller.settle();
  assert.equal(new Set(looked).size, NODES, "every node of the namespace took the new routes");
  for (const router of s.h.router.fakes.values())
    assert.ok(router.applied.at(-1)?.routes.some((r) => r.host === "worker.test"));
});
