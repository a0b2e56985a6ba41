// Placement through the API on simulated nodes: the strategies, node tags, the explanation when
// nothing fits, and EVERY_NODE following the cluster as it grows.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  call,
  containersOf,
  createService,
  deployCluster,
  finished,
  runningService,
  type Sim,
  startSim,
  until,
  uuidOf,
  waitFor,
} from "./sim.ts";

let s: Sim;
let left: { resource_uri: string; nodes: string[] };
let right: { resource_uri: string; nodes: string[] };

before(async () => {
  s = await startSim();
  left = await deployCluster(s, { name: "left", target_num_nodes: 1, tags: [{ name: "left" }] });
  right = await deployCluster(s, { name: "right", target_num_nodes: 1, tags: [{ name: "right" }] });
});
after(() => s.close());

/** Node URI → number of the service's containers on it. */
async function spread(service: { containers: string[] }): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const c of await containersOf(s, service)) out.set(c.node, (out.get(c.node) ?? 0) + 1);
  return out;
}

describe("scheduler through the API", () => {
  test("tags keep containers off nodes without them", async () => {
    const svc = await runningService(s, {
      name: "ballast",
      target_num_containers: 3,
      tags: [{ name: "left" }],
    });
    assert.deepEqual([...(await spread(svc))], [[left.nodes[0], 3]]);
  });

  test("EMPTIEST_NODE fills the emptier node", async () => {
    const svc = await runningService(s, { name: "emptiest", target_num_containers: 2 });
    assert.equal(svc.deployment_strategy, "EMPTIEST_NODE");
    // left holds 3 containers, right none: both go right.
    assert.deepEqual([...(await spread(svc))], [[right.nodes[0], 2]]);
  });

  test("HIGH_AVAILABILITY spreads a service over the nodes, even onto the fuller one", async () => {
    const svc = await runningService(s, {
      name: "ha",
      target_num_containers: 4,
      deployment_strategy: "HIGH_AVAILABILITY",
    });
    const placed = await spread(svc);
    assert.equal(placed.get(left.nodes[0]!), 2);
    assert.equal(placed.get(right.nodes[0]!), 2);
  });

  test("when nothing fits the start fails, and its log explains node by node", async () => {
    const svc = await createService(s, {
      image: "busybox:local",
      name: "gpu",
      run_command: "sleep 100000",
      tags: [{ name: "gpu" }],
    });
    const res = await call(s.h, s.alice, "POST", `${svc.resource_uri}start/`);
    assert.equal(res.status, 202, res.raw);
    const a = await finished(s, res);
    assert.equal(a.state, "Failed");
    const summary = a.log.find((l) => l.startsWith("no node can take a container"));
    assert.ok(summary, a.log.join("\n"));
    assert.match(summary, /needs a Deployed node with tag gpu, and none of the 2 nodes qualifies/);
    for (const node of [...left.nodes, ...right.nodes]) {
      const line = a.log.find((l) => l.includes(uuidOf(node)));
      assert.ok(line, `a line for ${node}: ${a.log.join("\n")}`);
      assert.match(line, /lacks tag gpu/);
    }
    const after = await until(s, svc.resource_uri, "Not running");
    assert.deepEqual(after.containers, []);
  });

  test("EVERY_NODE runs one container per node, and a node added by scaling a cluster gets one", async () => {
    const svc = await runningService(s, { name: "agent", deployment_strategy: "EVERY_NODE" });
    assert.equal(svc.current_num_containers, 2);
    assert.equal(svc.target_num_containers, 2);
    const placed = await spread(svc);
    assert.deepEqual([...placed.values()], [1, 1]);

    const scale = await call(s.h, s.alice, "PATCH", right.resource_uri, { target_num_nodes: 2 });
    assert.equal(scale.status, 202, scale.raw);
    const grown = await waitFor("the cluster's second node", async () => {
      const c = (await call(s.h, s.alice, "GET", right.resource_uri)).body;
      return c.state === "Deployed" && c.nodes.length === 2 ? c : undefined;
    });
    const newNode = grown.nodes.find((n: string) => n !== right.nodes[0]);
    const three = await waitFor(
      "a container on the new node",
      async () => {
        const r = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
        return r.state === "Running" && r.running_num_containers === 3 ? r : undefined;
      },
      15_000,
    );
    assert.equal(three.target_num_containers, 3);
    const now = await spread(three);
    assert.equal(now.size, 3, "one container on each of the three nodes");
    assert.equal(now.get(newNode), 1);
    // The platform did it: a Service Scale action by the reconciler, not by the user.
    const actions = (
      await call(s.h, s.alice, "GET", `/api/audit/v1/action/?object=${encodeURIComponent(svc.resource_uri)}`)
    ).body.objects as { action: string; state: string; is_user_action: boolean }[];
    const scaled = actions.find((x) => x.action === "Service Scale");
    assert.ok(scaled, JSON.stringify(actions));
    assert.equal(scaled.state, "Success");
    assert.equal(scaled.is_user_action, false);
  });
});
