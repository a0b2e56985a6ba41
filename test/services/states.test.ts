// The state tables of services and containers through the API on simulated nodes: every refusal
// is a 409 naming the state and where the operation is allowed (CONTRACT §6), and leaves a Failed
// action; start is allowed in Partly running (CONTRACT decides the spec's contradiction).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  call,
  containersOf,
  createService,
  deployCluster,
  finished,
  operate,
  type RecordingEngine,
  runningService,
  type Sim,
  startSim,
  until,
  uuidOf,
  waitFor,
} from "./sim.ts";

let s: Sim;
let engine: RecordingEngine;

before(async () => {
  s = await startSim();
  const cluster = await deployCluster(s, { name: "pool", target_num_nodes: 1 });
  engine = s.engines.get(uuidOf(cluster.nodes[0]))!;
});
after(() => s.close());

/** Asserts a 409 state refusal with its message, and that the refused call left a Failed action. */
async function refused(
  method: "POST" | "PATCH" | "DELETE",
  url: string,
  message: string | RegExp,
  body?: Record<string, unknown>,
) {
  const res = await call(s.h, s.alice, method, url, body);
  assert.equal(res.status, 409, `${method} ${url}: ${res.raw}`);
  if (typeof message === "string") assert.equal(res.body.error, message);
  else assert.match(res.body.error, message);
  assert.equal(typeof res.body.code, "string");
  const a = await finished(s, res);
  assert.equal(a.state, "Failed", `${method} ${url} leaves a Failed action`);
  return res;
}

const ALLOWED = {
  start: "start is allowed in Not running, Stopped, Partly running",
  stop: "stop is allowed in Running, Partly running",
  redeploy: "redeploy is allowed in Running, Partly running, Stopped",
  scale: "scale is allowed in Not running, Running, Partly running, Stopped",
  terminate: "terminate is allowed in Not running, Running, Partly running, Stopped",
  update: "update is allowed in Not running, Running, Partly running, Stopped",
};

describe("service state refusals", () => {
  test("Not running: stop and redeploy are refused", async () => {
    const svc = await createService(s, { image: "busybox:local", name: "idle" });
    await refused("POST", `${svc.resource_uri}stop/`, `service idle is Not running; ${ALLOWED.stop}`);
    await refused("POST", `${svc.resource_uri}redeploy/`, `service idle is Not running; ${ALLOWED.redeploy}`);
    assert.equal((await call(s.h, s.alice, "GET", svc.resource_uri)).body.state, "Not running");
  });

  test("Running: start is refused with the contract's message", async () => {
    const svc = await runningService(s, { name: "web" });
    const res = await refused(
      "POST",
      `${svc.resource_uri}start/`,
      "service web is Running; start is allowed in Not running, Stopped, Partly running",
    );
    assert.equal(res.body.code, "invalid_state");
  });

  test("Stopped: stop is refused; start and redeploy are allowed", async () => {
    const svc = (await call(s.h, s.alice, "GET", "/api/app/v1/service/?name=web")).body.objects[0];
    await operate(s, svc.resource_uri, "stop");
    const stopped = await until(s, svc.resource_uri, "Stopped");
    assert.notEqual(stopped.stopped_datetime, null);
    for (const c of await containersOf(s, stopped)) {
      assert.equal(c.state, "Stopped");
      assert.notEqual(c.stopped_datetime, null, "a stopped container shows when it stopped");
    }
    await refused("POST", `${svc.resource_uri}stop/`, `service web is Stopped; ${ALLOWED.stop}`);
    await operate(s, svc.resource_uri, "redeploy");
    await until(s, svc.resource_uri, "Running");
  });

  test("EVERY_NODE: scale is refused, the platform counts its containers", async () => {
    const svc = await runningService(s, { name: "agent", deployment_strategy: "EVERY_NODE" });
    const res = await refused("POST", `${svc.resource_uri}scale/`, /agent .*EVERY_NODE.*cannot be scaled/);
    assert.equal(res.body.code, "every_node");
  });

  test("while Starting: every operation, update and container operation is refused", async () => {
    const svc = await createService(s, {
      image: "busybox:local",
      name: "slow",
      run_command: "sleep 100000",
      target_num_containers: 2,
    });
    const release = engine.hold();
    let startRes: Awaited<ReturnType<typeof call>>;
    try {
      startRes = await call(s.h, s.alice, "POST", `${svc.resource_uri}start/`);
      assert.equal(startRes.status, 202, startRes.raw);
      assert.equal(startRes.body.state, "Starting");
      const uri = svc.resource_uri;
      await refused("PATCH", uri, `service slow is Starting; ${ALLOWED.update}`, {
        target_num_containers: 3,
      });
      await refused("PATCH", uri, `service slow is Starting; ${ALLOWED.update}`, { nickname: "x" });
      await refused("POST", `${uri}start/`, `service slow is Starting; ${ALLOWED.start}`);
      await refused("POST", `${uri}stop/`, `service slow is Starting; ${ALLOWED.stop}`);
      await refused("POST", `${uri}redeploy/`, `service slow is Starting; ${ALLOWED.redeploy}`);
      await refused("POST", `${uri}scale/`, `service slow is Starting; ${ALLOWED.scale}`);
      await refused("DELETE", uri, `service slow is Starting; ${ALLOWED.terminate}`);
      // Its containers exist (placed, Starting) and refuse operations of their own.
      const placed = await waitFor("containers placed", async () => {
        const r = (await call(s.h, s.alice, "GET", uri)).body;
        return r.containers.length === 2 ? r : undefined;
      });
      for (const c of await containersOf(s, placed)) {
        assert.equal(c.state, "Starting");
        await refused(
          "POST",
          `${c.resource_uri}start/`,
          `container ${c.name} is Starting; start is allowed in Stopped`,
        );
        await refused(
          "POST",
          `${c.resource_uri}stop/`,
          `container ${c.name} is Starting; stop is allowed in Running`,
        );
        await refused("DELETE", c.resource_uri, /is Starting; terminate is allowed in Running, Stopped/);
      }
    } finally {
      release();
    }
    const a = await finished(s, startRes);
    assert.equal(a.state, "Success", a.log.join("\n"));
    const done = await until(s, svc.resource_uri, "Running");
    assert.equal(done.running_num_containers, 2);
    assert.equal(done.target_num_containers, 2, "the refused PATCH changed nothing");
    assert.equal(done.nickname, "slow");
  });

  test("while Scaling, Redeploying, Stopping or Terminating: updates and operations are refused", async () => {
    const uri = (await call(s.h, s.alice, "GET", "/api/app/v1/service/?name=slow")).body.objects[0]
      .resource_uri as string;
    assert.equal((await call(s.h, s.alice, "PATCH", uri, { target_num_containers: 3 })).status, 200);
    const steps: [string, "POST" | "DELETE", string, string][] = [
      ["Scaling", "POST", `${uri}scale/`, "Running"],
      ["Redeploying", "POST", `${uri}redeploy/`, "Running"],
      ["Stopping", "POST", `${uri}stop/`, "Stopped"],
      ["Terminating", "DELETE", uri, "Terminated"],
    ];
    for (const [state, method, url, settled] of steps) {
      const release = engine.hold();
      let res: Awaited<ReturnType<typeof call>>;
      try {
        res = await call(s.h, s.alice, method, url);
        assert.equal(res.status, 202, res.raw);
        assert.equal(res.body.state, state);
        await refused("PATCH", uri, `service slow is ${state}; ${ALLOWED.update}`, { nickname: "x" });
        await refused("POST", `${uri}start/`, `service slow is ${state}; ${ALLOWED.start}`);
        await refused("POST", `${uri}stop/`, `service slow is ${state}; ${ALLOWED.stop}`);
        await refused("POST", `${uri}scale/`, `service slow is ${state}; ${ALLOWED.scale}`);
        await refused("DELETE", uri, `service slow is ${state}; ${ALLOWED.terminate}`);
        const [c] = (await call(s.h, s.alice, "GET", uri)).body.containers as string[];
        if (c) {
          const res = await call(s.h, s.alice, "POST", `${c}redeploy/`);
          assert.equal(res.status, 409, res.raw);
        }
      } finally {
        release();
      }
      const a = await finished(s, res);
      assert.equal(a.state, "Success", `${state}: ${a.log.join("\n")}`);
      const after = await until(s, uri, settled);
      if (settled !== "Terminated") assert.equal(after.current_num_containers, 3, state);
    }
  });

  test("Terminated: nothing is allowed any more", async () => {
    const svc = await runningService(s, { name: "gone" });
    await operate(s, svc.resource_uri, "terminate");
    await until(s, svc.resource_uri, "Terminated");
    const uri = svc.resource_uri;
    await refused("POST", `${uri}start/`, `service gone is Terminated; ${ALLOWED.start}`);
    await refused("POST", `${uri}stop/`, `service gone is Terminated; ${ALLOWED.stop}`);
    await refused("POST", `${uri}redeploy/`, `service gone is Terminated; ${ALLOWED.redeploy}`);
    await refused("POST", `${uri}scale/`, `service gone is Terminated; ${ALLOWED.scale}`);
    await refused("DELETE", uri, `service gone is Terminated; ${ALLOWED.terminate}`);
    await refused("PATCH", uri, `service gone is Terminated; ${ALLOWED.update}`, { nickname: "again" });
  });
});

describe("container state refusals", () => {
  test("start while Running and stop while Stopped are refused", async () => {
    const svc = await runningService(s, { name: "box" });
    const [c] = await containersOf(s, svc);
    await refused(
      "POST",
      `${c.resource_uri}start/`,
      "container box-1 is Running; start is allowed in Stopped",
    );
    await operate(s, c.resource_uri, "stop");
    await until(s, c.resource_uri, "Stopped");
    await refused("POST", `${c.resource_uri}stop/`, "container box-1 is Stopped; stop is allowed in Running");
  });

  test("a Terminated container refuses every operation and stays readable", async () => {
    const svc = (await call(s.h, s.alice, "GET", "/api/app/v1/service/?name=box")).body.objects[0];
    const [c] = await containersOf(s, svc);
    await operate(s, c.resource_uri, "terminate");
    const gone = await until(s, c.resource_uri, "Terminated");
    assert.notEqual(gone.destroyed_datetime, null);
    await refused(
      "POST",
      `${c.resource_uri}start/`,
      "container box-1 is Terminated; start is allowed in Stopped",
    );
    await refused(
      "POST",
      `${c.resource_uri}stop/`,
      "container box-1 is Terminated; stop is allowed in Running",
    );
    await refused(
      "POST",
      `${c.resource_uri}redeploy/`,
      "container box-1 is Terminated; redeploy is allowed in Running, Stopped",
    );
    await refused(
      "DELETE",
      c.resource_uri,
      "container box-1 is Terminated; terminate is allowed in Running, Stopped",
    );
  });

  test("start is allowed in Partly running and brings every container up", async () => {
    const svc = await runningService(s, { name: "half", target_num_containers: 2 });
    const [one] = await containersOf(s, svc);
    await operate(s, one.resource_uri, "stop");
    const partly = await until(s, svc.resource_uri, "Partly running");
    assert.equal(partly.running_num_containers, 1);
    assert.equal(partly.stopped_num_containers, 1);
    await operate(s, svc.resource_uri, "start");
    const full = await until(s, svc.resource_uri, "Running");
    assert.equal(full.running_num_containers, 2);
    for (const c of await containersOf(s, full)) assert.equal(c.state, "Running", c.name);
  });
});
