// EVERY_NODE on simulated nodes: a node added to the cluster gets its container from the
// reconciler (a system scale), while a user's scale of such a service is still refused.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";

let h: Harness;
let alice: Caller;

const AWS = {
  region: "/api/infra/v1/region/aws/us-east-1/",
  node_type: "/api/infra/v1/nodetype/aws/t2.micro/",
};

before(async () => {
  h = await startHarness({
    env: { BERTH_RECONCILE_INTERVAL_MS: "200", BERTH_CONTAINER_STOP_TIMEOUT_S: "1" },
  });
  alice = await createUser(h, "alice");
});
after(() => h.close());

const clusterIn = (uri: string, state: string, nodes: number) =>
  waitFor(`cluster ${state} with ${nodes} nodes`, async () => {
    const c = (await call(h, alice, "GET", uri)).body;
    return c.state === state && c.nodes.length === nodes ? c : undefined;
  });

test("an EVERY_NODE service gets a container on a node added by scaling the cluster, and keeps the others", async () => {
  const c = (
    await call(h, alice, "POST", "/api/infra/v1/nodecluster/", { name: "pool", ...AWS, target_num_nodes: 2 })
  ).body;
  assert.equal((await call(h, alice, "POST", `${c.resource_uri}deploy/`)).status, 202);
  await clusterIn(c.resource_uri, "Deployed", 2);

  const s = (
    await call(h, alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "agent",
      // The fake engine runs `sleep` on a real timer: infinity keeps none that would hold the process.
      run_command: "sleep infinity",
      deployment_strategy: "EVERY_NODE",
    })
  ).body;
  assert.equal((await call(h, alice, "POST", `${s.resource_uri}start/`)).status, 202);
  const running = await waitFor("2 running", async () => {
    const r = (await call(h, alice, "GET", s.resource_uri)).body;
    return r.state === "Running" && r.running_num_containers === 2 ? r : undefined;
  });
  const before = new Set(running.containers);

  const refused = await call(h, alice, "POST", `${s.resource_uri}scale/`);
  assert.equal(refused.status, 409, refused.raw);
  assert.match(refused.body.error, /EVERY_NODE/);

  assert.equal((await call(h, alice, "PATCH", c.resource_uri, { target_num_nodes: 3 })).status, 202);
  const grown = await clusterIn(c.resource_uri, "Deployed", 3);
  const three = await waitFor("3 running, one per node", async () => {
    const r = (await call(h, alice, "GET", s.resource_uri)).body;
    return r.state === "Running" && r.running_num_containers === 3 ? r : undefined;
  });
  assert.equal(three.current_num_containers, 3);
  for (const uri of before) assert.ok(three.containers.includes(uri), `${uri} was kept`);
  const nodes = new Set<string>();
  for (const uri of three.containers) nodes.add((await call(h, alice, "GET", uri)).body.node);
  assert.deepEqual([...nodes].sort(), [...grown.nodes].sort(), "one container on each node");
});
