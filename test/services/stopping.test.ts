// How a service's containers are stopped (issue 27): `stop_signal` and `stop_grace_period` reach the
// engine (StopSignal and StopTimeout at create, the stop's timeout), a stop or redeploy says in its
// action log how long it may wait and for which signal, and says when the engine had to kill.
// Simulated nodes: fake engines that honour the stop signal and the timeout they are given.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  call,
  containersOf,
  createService,
  deployCluster,
  engineContainer,
  finished,
  operate,
  type Sim,
  startSim,
  until,
} from "./sim.ts";

let s: Sim;

before(async () => {
  // The platform's own stop timeout is long here, so a redeploy that takes less honoured the service's.
  s = await startSim({ env: { BERTH_CONTAINER_STOP_TIMEOUT_S: "10" } });
  await deployCluster(s, { name: "pool", target_num_nodes: 1 });
});
after(() => s.close());

async function started(body: Record<string, unknown>) {
  const svc = await createService(s, { image: "busybox:local", ...body });
  await operate(s, svc.resource_uri, "start");
  return until(s, svc.resource_uri, "Running");
}

async function timed(uri: string, op: string) {
  const began = Date.now();
  const res = await call(s.h, s.alice, "POST", `${uri}${op}/`);
  assert.equal(res.status, 202, res.raw);
  const a = await finished(s, res);
  assert.equal(a.state, "Success", a.log.join("\n"));
  return { ...a, ms: Date.now() - began };
}

describe("stopping a service's containers", () => {
  test("a command that ignores SIGTERM is redeployed within its stop_grace_period, and the log says why it waits", async () => {
    // PID 1 without a handler ignores SIGTERM: only the kill after the grace period ends it.
    const svc = await started({ name: "stubborn", run_command: "sleep 100000", stop_grace_period: 1 });
    assert.equal(svc.stop_grace_period, 1);
    assert.equal(svc.stop_signal, null);
    const [before] = await containersOf(s, svc);
    const { spec } = await engineContainer(s, before.resource_uri);
    assert.equal(spec.stopTimeoutS, 1, "the engine container is created with the grace period");
    assert.equal(spec.stopSignal, undefined, "no stop signal of its own: the image's");

    const redeploy = await timed(svc.resource_uri, "redeploy");
    assert.ok(redeploy.ms < 4000, `redeployed in ${redeploy.ms} ms, not the platform's 10 s`);
    assert.ok(redeploy.ms >= 1000, `the grace period (1 s) passed before the kill, not ${redeploy.ms} ms`);
    const waiting = redeploy.log.indexOf(
      "Waiting up to 1 s for stubborn-1 to stop (stop signal SIGTERM unless the image sets another)",
    );
    const killed = redeploy.log.indexOf(
      "stubborn-1 did not stop within 1 s of its stop signal: the engine killed it (SIGKILL)",
    );
    assert.ok(waiting >= 0 && killed > waiting, redeploy.log.join("\n"));
  });

  test("stop_signal is the signal the command gets: one that handles it stops at once, without a kill", async () => {
    const svc = await started({
      name: "polite",
      run_command: "sh -c 'trap \"exit 0\" USR1; sleep 100000 & wait'",
      stop_signal: "usr1",
    });
    assert.equal(svc.stop_signal, "SIGUSR1", "stored by its name");
    assert.equal(svc.stop_grace_period, null);
    const [c] = await containersOf(s, svc);
    assert.equal(c.stop_signal, "SIGUSR1", "the container shows the definition it was deployed with");
    const { engine, id, spec } = await engineContainer(s, c.resource_uri);
    assert.equal(spec.stopSignal, "SIGUSR1");

    const stop = await timed(svc.resource_uri, "stop");
    assert.ok(stop.ms < 4000, `stopped in ${stop.ms} ms`);
    assert.ok(
      stop.log.includes("Waiting up to 10 s for polite-1 to stop (stop signal SIGUSR1)"),
      stop.log.join("\n"),
    );
    assert.ok(!stop.log.some((l) => l.includes("killed")), stop.log.join("\n"));
    assert.equal((await engine.inspectContainer(id))?.exitCode, 0, "its USR1 handler ended it");
  });

  test("stop_grace_period 0 kills at once, and a PATCH changes what the next containers get", async () => {
    const svc = await started({ name: "quick", run_command: "sleep 100000", stop_grace_period: 0 });
    const stop = await timed(svc.resource_uri, "stop");
    assert.ok(
      stop.log.includes("quick-1 did not stop within 0 s of its stop signal: the engine killed it (SIGKILL)"),
    );

    const patched = await call(s.h, s.alice, "PATCH", svc.resource_uri, {
      stop_grace_period: 2,
      stop_signal: "SIGQUIT",
    });
    assert.equal(patched.status, 200, patched.raw);
    assert.deepEqual([patched.body.stop_grace_period, patched.body.stop_signal], [2, "SIGQUIT"]);
    assert.equal(patched.body.synchronized, false, "the containers were made with the old values");
    await operate(s, svc.resource_uri, "redeploy");
    const [c] = await containersOf(s, (await call(s.h, s.alice, "GET", svc.resource_uri)).body);
    const { spec } = await engineContainer(s, c.resource_uri);
    assert.deepEqual([spec.stopTimeoutS, spec.stopSignal], [2, "SIGQUIT"]);
    const unset = await call(s.h, s.alice, "PATCH", svc.resource_uri, {
      stop_grace_period: null,
      stop_signal: "",
    });
    assert.deepEqual([unset.body.stop_grace_period, unset.body.stop_signal], [null, null]);
  });

  test("out of bounds and unknown signals are refused, naming the field", async () => {
    for (const [body, field] of [
      [{ stop_grace_period: 3601 }, "stop_grace_period"],
      [{ stop_grace_period: -1 }, "stop_grace_period"],
      [{ stop_grace_period: 1.5 }, "stop_grace_period"],
      [{ stop_signal: "SIGFOO" }, "stop_signal"],
      [{ stop_signal: "SIGSTOP" }, "stop_signal"],
      [{ stop_signal: "99" }, "stop_signal"],
    ] as const) {
      const res = await call(s.h, s.alice, "POST", "/api/app/v1/service/", {
        image: "busybox:local",
        ...body,
      });
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.raw}`);
      assert.equal(res.body.code, "invalid_field");
      assert.ok(
        res.body.details.some((d: { field: string }) => d.field === field),
        `${JSON.stringify(body)}: ${res.raw}`,
      );
    }
  });

  test("a stack file's stop_grace_period takes compose durations, and export writes one back", async () => {
    const res = await call(s.h, s.alice, "POST", "/api/app/v1/stack/", {
      name: "graceful",
      services: [
        {
          name: "worker",
          image: "busybox:local",
          command: "sleep 100000",
          stop_grace_period: "1m30s",
          stop_signal: "INT",
        },
      ],
    });
    assert.equal(res.status, 201, res.raw);
    const worker = (await call(s.h, s.alice, "GET", res.body.services[0])).body;
    assert.deepEqual([worker.stop_grace_period, worker.stop_signal], [90, "SIGINT"]);
    const exported = (await call(s.h, s.alice, "GET", `${res.body.resource_uri}export/`)).body;
    assert.equal(exported.worker.stop_grace_period, "1m30s");
    assert.equal(exported.worker.stop_signal, "SIGINT");
    const refused = await call(s.h, s.alice, "POST", "/api/app/v1/stack/", {
      name: "sloppy",
      services: [{ name: "w", image: "busybox:local", stop_grace_period: "1.5s" }],
    });
    assert.equal(refused.status, 400, refused.raw);
    assert.match(refused.body.error, /^services\.w\.stop_grace_period: must be a whole number of seconds/);
  });
});
