// Placement that knows ports and capacity, through the API on simulated nodes (issue 14 item 1):
// a fixed published port fits once per node, memory is compared with what nodes have, the action
// fails naming the port or the resource, no container record is left that never ran, and a dry
// run answers the plan without changing anything.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  call,
  containersOf,
  createService,
  deployCluster,
  finished,
  type Sim,
  startSim,
  until,
} from "./sim.ts";

let s: Sim;

before(async () => {
  s = await startSim();
  await deployCluster(s, { name: "pool", target_num_nodes: 2 });
});
after(() => s.close());

const actionCount = async () =>
  (await call(s.h, s.alice, "GET", "/api/audit/v1/action/?limit=1")).body.meta.total_count as number;

describe("ports and capacity", () => {
  test("a fixed port scaled past the node count: Failed naming the port, the fitting containers Running", async () => {
    const svc = await createService(s, {
      image: "busybox:local",
      name: "fixed",
      run_command: "sleep 100000",
      target_num_containers: 3,
      container_ports: [{ protocol: "tcp", inner_port: 80, outer_port: 8080, published: true }],
    });

    const dry = await call(s.h, s.alice, "POST", `${svc.resource_uri}start/?dry_run=true`);
    assert.equal(dry.status, 200, dry.raw);
    assert.equal(dry.body.dry_run, true);
    assert.equal(dry.body.fits, false);
    assert.equal(dry.body.placements.length, 2);
    assert.match(dry.body.explanation.join("\n"), /only 2 of 3/);
    assert.match(dry.body.explanation.join("\n"), /8080\/tcp already taken/);
    const unchanged = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
    assert.equal(unchanged.state, "Not running", "a dry run changes nothing");
    assert.deepEqual(unchanged.containers, []);

    const res = await call(s.h, s.alice, "POST", `${svc.resource_uri}start/`);
    assert.equal(res.status, 202, res.raw);
    const a = await finished(s, res);
    assert.equal(a.state, "Failed", a.log.join("\n"));
    assert.ok(
      a.log.some((l) => /8080\/tcp already taken/.test(l)),
      a.log.join("\n"),
    );
    const after = await until(s, svc.resource_uri, "Partly running");
    const containers = await containersOf(s, after);
    assert.equal(containers.length, 2, "no record for the container that could not be placed");
    assert.deepEqual(
      containers.map((c) => c.state),
      ["Running", "Running"],
    );
    assert.notEqual(containers[0].node, containers[1].node, "one per node");
  });

  test("a scale dry run plans for a target without changing anything", async () => {
    const svc = await createService(s, {
      image: "busybox:local",
      name: "small",
      run_command: "sleep 100000",
    });
    const before = await actionCount();
    const dry = await call(
      s.h,
      s.alice,
      "POST",
      `${svc.resource_uri}scale/?dry_run=true&target_num_containers=4`,
    );
    assert.equal(dry.status, 200, dry.raw);
    assert.equal(dry.body.fits, true);
    assert.equal(dry.body.target_num_containers, 4);
    assert.equal(dry.body.placements.length, 4);
    assert.match(dry.body.placements[0].node, /^\/api\/infra\/v1\/alice\/node\//);
    const unchanged = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
    assert.equal(unchanged.target_num_containers, 1);
    assert.deepEqual(unchanged.containers, []);
    // Only the call itself is audited (CONTRACT §7); nothing is queued.
    assert.equal(await actionCount(), before + 1);
  });

  test("more memory than any node has: start Failed with the figures, no container record", async () => {
    const svc = await createService(s, {
      image: "busybox:local",
      name: "huge",
      run_command: "sleep 100000",
      memory: 1_000_000,
    });
    const res = await call(s.h, s.alice, "POST", `${svc.resource_uri}start/`);
    const a = await finished(s, res);
    assert.equal(a.state, "Failed");
    assert.ok(
      a.log.some((l) => /needs 1000000 MB of memory, \d+ MB of \d+ MB are free/.test(l)),
      a.log.join("\n"),
    );
    const after = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
    assert.deepEqual(after.containers, []);
    assert.notEqual(after.state, "Running");
  });
});
