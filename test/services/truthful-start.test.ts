// A start that tells the truth (issue 29): start, scale and redeploy wait until each new container
// runs and is healthy (with a check) or has stayed up a minimum time (without one). A container
// that exits with an error, crash-loops under autorestart or turns unhealthy ends the action
// Failed with its exit code, the reason and its last log lines; the service says it is broken
// (`health`: crashing or unhealthy) while keeping the spec's state names.
// Simulated nodes: fake engines (a process that exits "at once" still runs for a moment there).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  call,
  containersOf,
  createService,
  deployCluster,
  finished,
  operate,
  type Sim,
  startSim,
  until,
} from "./sim.ts";

let s: Sim;

before(async () => {
  s = await startSim({
    // Long enough that a command which dies after a moment is caught by the start.
    env: { BERTH_START_MIN_UP_MS: "1200" },
    registry: [
      { ref: "app:1", cmd: ["server"], programs: ["server"], serves: { ports: [8080] } },
      { ref: "app:sick", cmd: ["server"], programs: ["server"], serves: { ports: [8080], status: 500 } },
    ],
  });
  await deployCluster(s, { name: "pool", target_num_nodes: 1 });
});
after(() => s.close());

async function attempt(uri: string, op: string) {
  const res = await call(s.h, s.alice, "POST", `${uri}${op}/`);
  assert.equal(res.status, 202, res.raw);
  return finished(s, res);
}

const service = async (uri: string) => (await call(s.h, s.alice, "GET", uri)).body;

describe("a start that tells the truth", () => {
  test("a command that exits with an error soon after its start ends the start Failed with its exit code and last lines", async () => {
    const svc = await createService(s, {
      image: "busybox:local",
      name: "dies",
      run_command: "sh -c 'echo starting; sleep 0.4; echo giving up; exit 3'",
    });
    const started = Date.now();
    const a = await attempt(svc.resource_uri, "start");
    assert.equal(a.state, "Failed", a.log.join("\n"));
    const log = a.log.join("\n");
    assert.match(log, /dies-1 did not stay running: Exited with code 3 \(exit code 3\)/);
    assert.match(log, /Last \d+ log line\(s\) of dies-1:\n {2}starting\n {2}giving up/);
    assert.ok(Date.now() - started < 5000, "the failure is known as soon as the container exits");
    const after = await until(s, svc.resource_uri, "Stopped");
    assert.equal(after.health, "crashing", "the service reads as broken");
    const [c] = await containersOf(s, after);
    assert.equal(c.exit_code, 3);
  });

  test("an immediate exit is a failure on a simulated node too; exit 0 is a job that ran to completion", async () => {
    const now = await createService(s, {
      image: "busybox:local",
      name: "instant",
      run_command: "sh -c 'exit 7'",
    });
    const a = await attempt(now.resource_uri, "start");
    assert.equal(a.state, "Failed", a.log.join("\n"));
    assert.match(a.log.join("\n"), /instant-1 did not stay running: Exited with code 7/);

    const job = await createService(s, { image: "busybox:local", name: "job", run_command: "echo done" });
    const b = await attempt(job.resource_uri, "start");
    assert.equal(b.state, "Success", b.log.join("\n"));
    assert.ok(b.log.includes("job-1 ran to completion (exit code 0)"), b.log.join("\n"));
  });

  test("a crash loop under autorestart ALWAYS ends the start Failed; the service shows crashing", async () => {
    const svc = await createService(s, {
      image: "busybox:local",
      name: "loop",
      autorestart: "ALWAYS",
      run_command: "sh -c 'echo up; sleep 0.2; exit 4'",
    });
    const a = await attempt(svc.resource_uri, "start");
    assert.equal(a.state, "Failed", a.log.join("\n"));
    assert.match(a.log.join("\n"), /loop-1 is crash-looping: its engine restarted it \d+ time\(s\)/);
    const view = await service(svc.resource_uri);
    // Its state is the spec's (its container may be running between two crashes); health says it is broken.
    assert.equal(view.health, "crashing");
    await operate(s, svc.resource_uri, "terminate");
  });

  test("with a health check the start waits until the container is healthy; unhealthy past its retries fails it", async () => {
    const good = await createService(s, {
      image: "app:1",
      name: "good",
      health_check: { type: "http", port: 8080, interval: 0.3, retries: 2 },
    });
    const a = await attempt(good.resource_uri, "start");
    assert.equal(a.state, "Success", a.log.join("\n"));
    assert.ok(a.log.includes("Waiting for good-1 to be healthy"), a.log.join("\n"));
    assert.ok(a.log.includes("good-1 is healthy"), a.log.join("\n"));
    const [c] = await containersOf(s, await service(good.resource_uri));
    assert.equal(c.health, "healthy", "healthy when the start ends, not later");
    assert.equal((await service(good.resource_uri)).health, "healthy");

    const sick = await createService(s, {
      image: "app:sick",
      name: "sick",
      health_check: { type: "http", port: 8080, path: "/health", interval: 0.2, retries: 2 },
    });
    const b = await attempt(sick.resource_uri, "start");
    assert.equal(b.state, "Failed", b.log.join("\n"));
    assert.match(
      b.log.join("\n"),
      /sick-1 is unhealthy: its health check failed \d+ time\(s\) in a row: GET http:\/\/127\.0\.0\.1:8080\/health answered 500, expected 200/,
    );
    const view = await service(sick.resource_uri);
    assert.equal(view.health, "unhealthy");
    assert.equal(view.state, "Running", "the spec's states stay: its container runs");
  });

  test("a scale and a redeploy wait for their new containers too", async () => {
    const svc = await createService(s, {
      image: "busybox:local",
      name: "grows",
      run_command: "sleep 100000",
    });
    await operate(s, svc.resource_uri, "start");
    const patched = await call(s.h, s.alice, "PATCH", svc.resource_uri, {
      target_num_containers: 2,
      run_command: "sh -c 'sleep 0.3; exit 5'",
    });
    assert.equal(patched.status, 200, patched.raw);
    const scaled = await attempt(svc.resource_uri, "scale");
    assert.equal(scaled.state, "Failed", scaled.log.join("\n"));
    assert.match(scaled.log.join("\n"), /grows-2 did not stay running: Exited with code 5/);
    const redeploy = await attempt(svc.resource_uri, "redeploy");
    assert.equal(redeploy.state, "Failed", redeploy.log.join("\n"));
    assert.match(redeploy.log.join("\n"), /Exited with code 5/);
  });

  test("a service without any check that stays up starts as before, after the minimum time", async () => {
    const svc = await createService(s, {
      image: "busybox:local",
      name: "steady",
      run_command: "sleep 100000",
    });
    const began = Date.now();
    const a = await attempt(svc.resource_uri, "start");
    assert.equal(a.state, "Success", a.log.join("\n"));
    assert.ok(Date.now() - began >= 1200, "the start waited for the container to stay up");
    const view = await until(s, svc.resource_uri, "Running");
    assert.equal(view.health, "none");
  });
});
