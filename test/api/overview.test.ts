// The overview's counts (issue 33): `GET /api/app/v1/overview/` counts a namespace's objects by
// state and failing reason, and the lists' `failing=true` gives the same objects: a running
// container whose health check fails is "unhealthy", a container that exited with an error is
// "crashed", and their services fail for the same reason. Simulated nodes (fake engines).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  call,
  createService,
  deployCluster,
  runningService,
  type Sim,
  startSim,
  until,
  uuidOf,
  waitFor,
} from "../services/sim.ts";

let s: Sim;

before(async () => {
  s = await startSim({ env: { BERTH_NODE_UNREACHABLE_GRACE_MS: "1" } });
  await deployCluster(s, { name: "pool", target_num_nodes: 1 });
});
after(() => s.close());

type Row = { state: string; reason: string | null; n: number };
const total = (rows: Row[], pick: (r: Row) => boolean) => rows.filter(pick).reduce((a, r) => a + r.n, 0);

describe("overview counts", () => {
  test("healthy, unhealthy and crashed containers and services, by reason, matching failing=true", async () => {
    await runningService(s, { image: "busybox:local", name: "fine", run_command: "httpd -f -p 80" });
    const sick = await createService(s, {
      image: "busybox:local",
      name: "sick",
      run_command: "httpd -f -p 80",
      health_check: {
        type: "command",
        command: "echo cannot reach the database; exit 1",
        interval: 0.1,
        timeout: 1,
        retries: 1,
      },
    });
    // Its start fails (the check never passes); its container goes on running, unhealthy.
    await call(s.h, s.alice, "POST", `${sick.resource_uri}start/`);
    const crash = await createService(s, {
      image: "busybox:local",
      name: "crash",
      run_command: 'sh -c "exit 3"',
    });
    await call(s.h, s.alice, "POST", `${crash.resource_uri}start/`);

    const counts = await waitFor("an unhealthy and a crashed container", async () => {
      const o = await call(s.h, s.alice, "GET", "/api/app/v1/overview/");
      assert.equal(o.status, 200, JSON.stringify(o.body));
      const c = o.body.container as Row[];
      return total(c, (r) => r.reason === "unhealthy") === 1 && total(c, (r) => r.reason === "crashed") === 1
        ? o.body
        : undefined;
    });
    assert.deepEqual(
      (counts.container as Row[]).filter((r) => r.reason === "unhealthy").map((r) => r.state),
      ["Running"],
    );
    assert.equal(
      total(counts.container, (r) => r.reason === null && r.state === "Running"),
      1,
    );
    assert.equal(
      total(counts.service, (r) => r.reason === "unhealthy"),
      1,
    );
    assert.equal(
      total(counts.service, (r) => r.reason === "crashed"),
      1,
    );
    assert.equal(
      total(counts.node, (r) => r.state === "Deployed"),
      1,
    );
    assert.equal(
      total(counts.nodecluster, () => true),
      1,
    );

    const failingContainers = await call(s.h, s.alice, "GET", "/api/app/v1/container/?failing=true");
    assert.equal(failingContainers.status, 200);
    assert.deepEqual(failingContainers.body.objects.map((c: { name: string }) => c.name).sort(), [
      "crash-1",
      "sick-1",
    ]);
    const sickOne = failingContainers.body.objects.find((c: { name: string }) => c.name === "sick-1");
    assert.equal(sickOne.health, "unhealthy");
    assert.equal(sickOne.health_output, "cannot reach the database", "why it is unhealthy");
    const fine = (await call(s.h, s.alice, "GET", "/api/app/v1/container/?name=fine-1")).body.objects[0];
    assert.equal(fine.health_output, null, "no check: no output");
    const failingServices = await call(s.h, s.alice, "GET", "/api/app/v1/service/?failing=true");
    assert.deepEqual(failingServices.body.objects.map((x: { name: string }) => x.name).sort(), [
      "crash",
      "sick",
    ]);
    const others = await call(s.h, s.alice, "GET", "/api/app/v1/service/?failing=false&name__icontains=i");
    assert.deepEqual(
      others.body.objects.map((x: { name: string }) => x.name),
      ["fine"],
    );

    const bad = await call(s.h, s.alice, "GET", "/api/app/v1/container/?failing=perhaps");
    assert.equal(bad.status, 400);
    assert.equal(typeof bad.body.error, "string");
  });

  test("stacks, nodes and node clusters: failing=true gives exactly the ones the overview counts failing", async () => {
    const stack = async (name: string, run_command: string) => {
      const res = await call(s.h, s.alice, "POST", "/api/app/v1/stack/", {
        name,
        services: [{ name: `${name}-app`, image: "busybox:local", run_command }],
      });
      assert.equal(res.status, 201, res.raw);
      assert.equal((await call(s.h, s.alice, "POST", `${res.body.resource_uri}start/`)).status, 202);
      return res.body as { resource_uri: string };
    };
    await stack("calm", "httpd -f -p 80");
    await stack("broken", 'sh -c "exit 5"');
    // A second cluster whose one node stops answering: the node fails, and so does its cluster
    // (whose own state stays Deployed while nodes flap).
    const flaky = await deployCluster(s, { name: "flaky", target_num_nodes: 1 });
    const nodeUuid = uuidOf(flaky.nodes[0]);
    const engine = s.h.engines.forNode((await s.h.store.nodes.findNode(nodeUuid))!) as unknown as {
      setReachable(v: boolean): void;
    };
    engine.setReachable(false);
    await s.h.health.sweep();
    await until(s, flaky.nodes[0], "Unreachable");

    const counts = await waitFor("a crashed stack and an unreachable node", async () => {
      const o = (await call(s.h, s.alice, "GET", "/api/app/v1/overview/")).body;
      return total(o.stack, (r: Row) => r.reason === "crashed") === 1 ? o : undefined;
    });
    assert.equal(
      total(counts.stack, (r) => r.reason === null),
      1,
      "calm",
    );
    assert.deepEqual(
      (counts.node as Row[]).filter((r) => r.reason !== null).map((r) => [r.state, r.reason, r.n]),
      [["Unreachable", "unreachable", 1]],
    );
    assert.deepEqual(
      (counts.nodecluster as Row[]).filter((r) => r.reason !== null).map((r) => [r.state, r.reason, r.n]),
      [["Deployed", "unreachable", 1]],
    );

    const names = async (path: string, pick: (o: Record<string, string>) => string) =>
      ((await call(s.h, s.alice, "GET", path)).body.objects as Record<string, string>[]).map(pick).sort();
    assert.deepEqual(await names("/api/app/v1/stack/?failing=true", (o) => o.name!), ["broken"]);
    assert.deepEqual(await names("/api/app/v1/stack/?failing=false", (o) => o.name!), ["calm"]);
    assert.deepEqual(await names("/api/infra/v1/node/?failing=true", (o) => o.uuid!), [nodeUuid]);
    assert.deepEqual(await names("/api/infra/v1/nodecluster/?failing=true", (o) => o.name!), ["flaky"]);
    assert.deepEqual(await names("/api/infra/v1/nodecluster/?failing=false", (o) => o.name!), ["pool"]);
    const bad = await call(s.h, s.alice, "GET", "/api/infra/v1/node/?failing=maybe");
    assert.equal(bad.status, 400);
    assert.equal(typeof bad.body.error, "string");
  });

  test("another namespace's overview is its own: nothing of alice's", async () => {
    const bob = await call(s.h, s.alice, "GET", "/api/app/v1/bob-nobody/overview/");
    assert.equal(bob.status, 404);
  });
});
