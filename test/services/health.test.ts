// Health checks (issue 29): a service's `health_check` (command, HTTP GET, TCP; interval, timeout,
// retries, start period) reaches its engine as the engine's own check, an image's HEALTHCHECK
// applies when the service names none, and each container's health (starting, healthy,
// unhealthy, none) is observed and shown, also on the events stream as container updates.
// Simulated nodes: fake engines that run the checks with Docker's rules.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { EngineHealthcheck } from "../../src/domain/health.ts";
import { listen, openStream } from "../streams/support.ts";
import { waitFor } from "../support/harness.ts";
import {
  call,
  containersOf,
  createService,
  deployCluster,
  engineContainer,
  type Sim,
  startSim,
  until,
} from "./sim.ts";

const IMAGE_CHECK: EngineHealthcheck = {
  test: ["CMD-SHELL", "exit 1"],
  intervalMs: 200,
  timeoutMs: 1000,
  retries: 2,
};

let s: Sim;

before(async () => {
  s = await startSim({
    registry: [
      { ref: "checked:1", cmd: ["server"], programs: ["server"], healthcheck: IMAGE_CHECK },
      { ref: "web:good", cmd: ["server"], programs: ["server"], serves: { ports: [8080] } },
      { ref: "web:broken", cmd: ["server"], programs: ["server"], serves: { ports: [8080], status: 503 } },
    ],
  });
  await deployCluster(s, { name: "pool", target_num_nodes: 1 });
});
after(() => s.close());

/** Starts the service (whatever the start's outcome) and answers its first container once its health is `health`. */
async function healthOf(svc: { resource_uri: string }, health: string) {
  await call(s.h, s.alice, "POST", `${svc.resource_uri}start/`);
  return waitFor(`${svc.resource_uri} container ${health}`, async () => {
    const current = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
    const [c] = await containersOf(s, current);
    return c?.health === health ? c : undefined;
  });
}

describe("health checks", () => {
  test("an HTTP check on a busybox httpd becomes healthy, and the container shows health healthy", async () => {
    const svc = await createService(s, {
      image: "busybox:local",
      name: "site",
      run_command: "httpd -f -p 8080",
      health_check: { type: "http", port: 8080, path: "/", interval: 0.2, timeout: 1, retries: 2 },
    });
    assert.deepEqual(svc.health_check, {
      type: "http",
      command: null,
      port: 8080,
      path: "/",
      status: 200,
      interval: 0.2,
      timeout: 1,
      retries: 2,
      start_period: 0,
    });
    const c = await healthOf(svc, "healthy");
    assert.equal(c.health_check.type, "http", "the container shows the check it was deployed with");
    const { spec, view } = await engineContainer(s, c.resource_uri);
    const check = spec.healthcheck;
    assert.ok(check, "the engine container is created with the check");
    assert.equal(
      check.test[0],
      "CMD-SHELL",
      "an HTTP check is a script the engine runs inside the container",
    );
    assert.match(check.test[1] ?? "", /127\.0\.0\.1:8080\//);
    assert.deepEqual([check.intervalMs, check.timeoutMs, check.retries], [200, 1000, 2]);
    assert.equal(view.health?.status, "healthy");
  });

  test("an HTTP check against a port nothing listens on, or a wrong status, ends unhealthy with the reason", async () => {
    const svc = await createService(s, {
      image: "web:broken",
      name: "broken",
      health_check: { type: "http", port: 8080, path: "/healthz", interval: 0.2, retries: 2 },
    });
    const c = await healthOf(svc, "unhealthy");
    const { view } = await engineContainer(s, c.resource_uri);
    assert.match(view.health?.lastOutput ?? "", /answered 503, expected 200/);
    const tcp = await createService(s, {
      image: "busybox:local",
      name: "closed",
      run_command: "sleep 100000",
      health_check: { type: "tcp", port: 5432, interval: 0.2, retries: 1 },
    });
    await healthOf(tcp, "unhealthy");
  });

  test("a command check runs inside the container: exit 0 is healthy, anything else counts as a failure", async () => {
    const good = await createService(s, {
      image: "busybox:local",
      name: "cmd-good",
      run_command: "sleep 100000",
      health_check: { type: "command", command: "echo ok", interval: 0.2 },
    });
    await healthOf(good, "healthy");
    const bad = await createService(s, {
      image: "busybox:local",
      name: "cmd-bad",
      run_command: "sleep 100000",
      health_check: { type: "command", command: "echo not ready; exit 3", interval: 0.2, retries: 2 },
    });
    const c = await healthOf(bad, "unhealthy");
    const { view } = await engineContainer(s, c.resource_uri);
    assert.equal(view.health?.lastExitCode, 3);
    assert.match(view.health?.lastOutput ?? "", /not ready/);
  });

  test("the image's HEALTHCHECK applies when the service names none; type none turns it off", async () => {
    const own = await createService(s, { image: "checked:1", name: "imagecheck" });
    assert.equal(own.health_check, null, "the service names no check of its own");
    const c = await healthOf(own, "unhealthy");
    const { spec } = await engineContainer(s, c.resource_uri);
    assert.equal(spec.healthcheck, undefined, "Berth sends no check: the engine uses the image's");

    const off = await createService(s, {
      image: "checked:1",
      name: "nocheck",
      health_check: { type: "none" },
    });
    await call(s.h, s.alice, "POST", `${off.resource_uri}start/`);
    const running = await waitFor("nocheck running", async () => {
      const [x] = await containersOf(s, (await call(s.h, s.alice, "GET", off.resource_uri)).body);
      return x?.state === "Running" ? x : undefined;
    });
    const e = await engineContainer(s, running.resource_uri);
    assert.deepEqual(e.spec.healthcheck, { test: ["NONE"] });
    await new Promise((r) => setTimeout(r, 600));
    const [again] = await containersOf(s, (await call(s.h, s.alice, "GET", off.resource_uri)).body);
    assert.equal(again.health, "none", "no check runs");
  });

  test("a container without any check shows health none; a health change is a container update on the events stream", async () => {
    const plain = await createService(s, {
      image: "busybox:local",
      name: "plain",
      run_command: "sleep 100000",
    });
    const c = await healthOf(plain, "none");
    assert.equal(c.state === "Running" || c.state === "Starting", true);

    const base = await listen(s.h);
    const svc = await createService(s, {
      image: "web:good",
      name: "watched",
      health_check: { type: "http", port: 8080, interval: 0.3, start_period: 5 },
    });
    const stream = await openStream(`${base}/api/audit/v1/events/?type=container`, { auth: s.alice.auth });
    try {
      const healthy = await healthOf(svc, "healthy");
      const frames = await stream.until("an update of the healthy container", (fs) =>
        fs.some((f) => f.resource_uri === healthy.resource_uri && f.action === "update"),
      );
      assert.ok(frames.length > 0);
      const row = await s.h.store.services.findContainer(healthy.uuid);
      assert.equal(row?.health, "healthy", "stored in containers.health");
    } finally {
      stream.ws.close();
    }
  });

  test("bodies that cannot name a check are refused with the field to fix", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ type: "http" }, "health_check.port"],
      [{ type: "command" }, "health_check.command"],
      [{ type: "http", port: 80, path: "no slash" }, "health_check.path"],
      [{ type: "tcp", port: 80, status: 200 }, "health_check.status"],
      [{ type: "ping", port: 80 }, "health_check.type"],
      [{ type: "http", port: 80, interval: 0 }, "health_check.interval"],
      [{ type: "http", port: 80, surprise: 1 }, "health_check"],
    ];
    for (const [check, field] of cases) {
      const res = await call(s.h, s.alice, "POST", "/api/app/v1/service/", {
        image: "busybox:local",
        name: "refused",
        health_check: check,
      });
      assert.equal(res.status, 400, `${JSON.stringify(check)}: ${res.raw}`);
      assert.ok(
        (res.body.details ?? []).some((d: { field: string }) => d.field.startsWith(field)),
        `${JSON.stringify(check)} names ${field}: ${res.raw}`,
      );
    }
  });

  test("an update sets or clears the check; the containers are then out of date", async () => {
    const svc = await createService(s, {
      image: "busybox:local",
      name: "later",
      run_command: "sleep 100000",
    });
    await healthOf(svc, "none");
    await until(s, svc.resource_uri, "Running");
    const set = await call(s.h, s.alice, "PATCH", svc.resource_uri, {
      health_check: { type: "command", command: "true" },
    });
    assert.equal(set.status, 200, set.raw);
    assert.equal(set.body.health_check.type, "command");
    assert.equal(set.body.health_check.interval, 5, "defaults filled in");
    assert.equal(set.body.synchronized, false);
    const same = await call(s.h, s.alice, "PATCH", svc.resource_uri, {
      health_check: { type: "command", command: "true" },
    });
    assert.equal(same.body.health_check.command, "true");
    const cleared = await call(s.h, s.alice, "PATCH", svc.resource_uri, { health_check: null });
    assert.equal(cleared.body.health_check, null);
  });
});
