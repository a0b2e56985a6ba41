// Health checks in the shared engine suite (issue 29): the same assertions against a private
// dockerd and against the fake engine. Command checks run inside the container; Berth's HTTP and
// TCP checks (domain/health.ts) are scripts a busybox image runs with its own tools (a real engine)
// or probes of its simulated servers (the fake); no check means no health.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { engineHealthcheck, type HealthCheck } from "../../src/domain/health.ts";
import type { ContainerSpec, ContainerView, Engine } from "../../src/drivers/engine.ts";
import { waitFor } from "./engine-suite.ts";

const FAST = { interval: 0.2, timeout: 2, retries: 2, start_period: 0 };

function check(c: Partial<HealthCheck> & Pick<HealthCheck, "type">): HealthCheck {
  return { command: null, port: null, path: null, status: null, ...FAST, ...c };
}

/** `harness` is called once the engine runs (in a test), with a busybox image it has. */
export function healthSuite(name: string, harness: () => { engine: Engine; image: string }): void {
  describe(`${name}: health checks`, () => {
    /** Runs a container of `spec` until its health is `status` (or, with undefined, for a second). */
    async function healthOf(spec: Omit<ContainerSpec, "image">, status: string | undefined) {
      const { engine, image } = harness();
      const id = await engine.createContainer({ image, labels: { "berth.test": "health" }, ...spec });
      try {
        await engine.startContainer(id);
        if (status === undefined) {
          await new Promise((r) => setTimeout(r, 1000));
          return (await engine.inspectContainer(id)) as ContainerView;
        }
        return await waitFor(
          `health ${status}`,
          async () => {
            const view = await engine.inspectContainer(id);
            return view?.health?.status === status ? view : undefined;
          },
          { timeoutMs: 15_000 },
        );
      } finally {
        await engine.removeContainer(id, { force: true });
      }
    }

    const httpd = ["httpd", "-f", "-p", "8080", "-h", "/var/www"];

    test("a command check that exits 0 makes the container healthy", async () => {
      const view = await healthOf(
        {
          cmd: ["sleep", "3600"],
          healthcheck: engineHealthcheck(check({ type: "command", command: "echo fine" })),
        },
        "healthy",
      );
      assert.equal(view.health?.failingStreak, 0);
    });

    test("a failing command check makes it unhealthy after its retries, with its output and exit code", async () => {
      const view = await healthOf(
        {
          cmd: ["sleep", "3600"],
          healthcheck: engineHealthcheck(check({ type: "command", command: "echo broken; exit 3" })),
        },
        "unhealthy",
      );
      assert.ok((view.health?.failingStreak ?? 0) >= 2);
      assert.equal(view.health?.lastExitCode, 3);
      assert.match(view.health?.lastOutput ?? "", /broken/);
    });

    test("an HTTP check is healthy when GET answers the expected status, unhealthy otherwise", async () => {
      await healthOf(
        {
          cmd: httpd,
          healthcheck: engineHealthcheck(check({ type: "http", port: 8080, path: "/", status: 200 })),
        },
        "healthy",
      );
      const wrong = await healthOf(
        {
          cmd: httpd,
          healthcheck: engineHealthcheck(check({ type: "http", port: 8080, path: "/missing", status: 200 })),
        },
        "unhealthy",
      );
      assert.match(wrong.health?.lastOutput ?? "", /answered 404, expected 200/);
    });

    test("a TCP check is healthy when the port accepts connections, unhealthy when nothing listens", async () => {
      await healthOf(
        { cmd: httpd, healthcheck: engineHealthcheck(check({ type: "tcp", port: 8080 })) },
        "healthy",
      );
      await healthOf(
        { cmd: httpd, healthcheck: engineHealthcheck(check({ type: "tcp", port: 8081 })) },
        "unhealthy",
      );
    });

    test("without a check (or with NONE) a container has no health", async () => {
      const none = await healthOf({ cmd: ["sleep", "3600"] }, undefined);
      assert.equal(none.health, undefined);
      const off = await healthOf({ cmd: ["sleep", "3600"], healthcheck: { test: ["NONE"] } }, undefined);
      assert.equal(off.health, undefined);
    });
  });
}
