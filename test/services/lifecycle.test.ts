// Services and containers on simulated nodes (fake engines): the whole lifecycle through the API.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";

let h: Harness;
let alice: Caller;
let nodes: string[];

const AWS = {
  region: "/api/infra/v1/region/aws/us-east-1/",
  node_type: "/api/infra/v1/nodetype/aws/t2.micro/",
};

before(async () => {
  h = await startHarness({
    env: { BERTH_RECONCILE_INTERVAL_MS: "200", BERTH_CONTAINER_STOP_TIMEOUT_S: "1" },
  });
  alice = await createUser(h, "alice");
  const c = (
    await call(h, alice, "POST", "/api/infra/v1/nodecluster/", { name: "pool", ...AWS, target_num_nodes: 2 })
  ).body;
  await call(h, alice, "POST", `${c.resource_uri}deploy/`);
  const done = await waitFor("cluster", async () => {
    const r = (await call(h, alice, "GET", c.resource_uri)).body;
    return r.state === "Deployed" ? r : undefined;
  });
  nodes = done.nodes;
});
after(() => h.close());

async function until(uri: string, state: string, timeoutMs = 10_000) {
  return waitFor(
    `${uri} ${state}`,
    async () => {
      const r = (await call(h, alice, "GET", uri)).body;
      return r.state === state ? r : undefined;
    },
    timeoutMs,
  );
}

async function actionOf(res: { headers: Record<string, unknown> }) {
  const uri = res.headers["x-platform-action-uri"] as string;
  try {
    return await waitFor(`action ${uri}`, async () => {
      const a = (await call(h, alice, "GET", uri)).body;
      return ["Success", "Failed", "Canceled"].includes(a.state) ? a : undefined;
    });
  } catch (err) {
    const a = (await call(h, alice, "GET", uri)).body;
    const log = await h.store.actions.actionLogTail(a.uuid, 50);
    throw new Error(
      `${(err as Error).message}: ${a.action} ${a.state}\n${log.map((l) => l.line).join("\n")}`,
    );
  }
}

describe("service lifecycle on simulated nodes", () => {
  test("create → start → Running with every container Running on a node, with a private address", async () => {
    const res = await call(h, alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "web",
      target_num_containers: 2,
      run_command: "sleep 100000",
      deployment_strategy: "HIGH_AVAILABILITY",
      container_ports: [{ protocol: "tcp", inner_port: 80, published: true }],
      container_envvars: [{ key: "GREETING", value: "hi" }],
    });
    assert.equal(res.status, 201, res.raw);
    const s = res.body;
    assert.equal(s.state, "Not running");
    assert.equal(s.image_name, "busybox:local");
    assert.deepEqual(s.containers, []);
    const start = await call(h, alice, "POST", `${s.resource_uri}start/`);
    assert.equal(start.status, 202, start.raw);
    assert.equal(start.body.state, "Starting");
    const a = await actionOf(start);
    assert.equal(a.state, "Success", JSON.stringify(await h.store.actions.actionLogTail(a.uuid, 50)));
    const running = await until(s.resource_uri, "Running");
    assert.equal(running.current_num_containers, 2);
    assert.equal(running.running_num_containers, 2);
    assert.equal(running.synchronized, true);
    const placed = new Set<string>();
    for (const uri of running.containers) {
      const c = (await call(h, alice, "GET", uri)).body;
      assert.equal(c.state, "Running");
      assert.match(c.name, /^web-[12]$/);
      assert.match(c.private_ip, /^\d+\.\d+\.\d+\.\d+$/);
      assert.ok(c.container_ports[0].outer_port > 0, "a dynamic outer port is reported");
      assert.match(c.container_ports[0].endpoint_uri, /^http:\/\/.+:\d+\/$/);
      assert.ok(c.calculated_envvars.some((e: { key: string }) => e.key === "PLATFORM_CONTAINER_API_URI"));
      placed.add(c.node);
    }
    assert.equal(placed.size, 2, "HIGH_AVAILABILITY spreads the two containers");
  });

  test("stop, start, scale up and down, redeploy and terminate leave the engines as the API says", async () => {
    const s = (await call(h, alice, "GET", "/api/app/v1/service/?name=web")).body.objects[0];
    const stop = await call(h, alice, "POST", `${s.resource_uri}stop/`);
    assert.equal(stop.status, 202);
    await actionOf(stop);
    const stopped = await until(s.resource_uri, "Stopped");
    assert.equal(stopped.stopped_num_containers, 2);
    const refuse = await call(h, alice, "POST", `${s.resource_uri}stop/`);
    assert.equal(refuse.status, 409);
    assert.match(refuse.body.error, /is Stopped; stop is allowed in Running, Partly running/);

    await actionOf(await call(h, alice, "POST", `${s.resource_uri}start/`));
    await until(s.resource_uri, "Running");

    assert.equal((await call(h, alice, "PATCH", s.resource_uri, { target_num_containers: 3 })).status, 200);
    await actionOf(await call(h, alice, "POST", `${s.resource_uri}scale/`));
    const three = await until(s.resource_uri, "Running");
    assert.equal(three.current_num_containers, 3);

    const patched = await call(h, alice, "PATCH", s.resource_uri, {
      container_envvars: [{ key: "GREETING", value: "hello" }],
    });
    assert.equal(patched.status, 200, patched.raw);
    assert.equal(patched.body.synchronized, false);
    const c1 = (await call(h, alice, "GET", patched.body.containers[0])).body;
    assert.equal(c1.synchronized, false);
    await actionOf(await call(h, alice, "POST", `${s.resource_uri}redeploy/`));
    const redeployed = await until(s.resource_uri, "Running");
    assert.equal(redeployed.synchronized, true);

    assert.equal((await call(h, alice, "PATCH", s.resource_uri, { target_num_containers: 1 })).status, 200);
    await actionOf(await call(h, alice, "POST", `${s.resource_uri}scale/`));
    const one = await until(s.resource_uri, "Running");
    assert.equal(one.current_num_containers, 1);

    const del = await call(h, alice, "DELETE", s.resource_uri);
    assert.equal(del.status, 202);
    assert.equal(del.body.state, "Terminating");
    await actionOf(del);
    const gone = await until(s.resource_uri, "Terminated");
    assert.notEqual(gone.destroyed_datetime, null);
    for (const uuid of nodes.map((n) => n.split("/").at(-2)!)) {
      const node = (await h.store.nodes.findNode(uuid))!;
      const left = await h.engines
        .forNode(node)
        .listContainers({ all: true, labels: { "io.berth.namespace": "alice" } });
      assert.deepEqual(left, [], "no engine container is left");
    }
  });
});
