// Health checks as definitions (issue 29): compose's `healthcheck:` shape in stack files (and
// Berth's http/tcp forms) becomes the REST `health_check`, export gives it back, and each kind of
// check becomes the engine check that runs inside the container.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type Dockerode from "dockerode";
import type { ServiceCreateBody } from "../../src/contract/service.ts";
import type { FieldProblem } from "../../src/domain/errors.ts";
import { engineHealthcheck, healthView } from "../../src/domain/health.ts";
import { parseCreate } from "../../src/domain/service-spec.ts";
import { convertService } from "../../src/domain/stackfile.ts";
import { exportService } from "../../src/domain/stackfile-export.ts";
import { containerView, createBody } from "../../src/drivers/docker/mapping.ts";

function convert(healthcheck: unknown): { body: Record<string, unknown>; problems: FieldProblem[] } {
  const problems: FieldProblem[] = [];
  const out = convertService({ name: "web", image: "busybox", healthcheck }, 0, problems);
  return { body: out.body, problems };
}

const specOf = (body: Record<string, unknown>) =>
  parseCreate(body as ServiceCreateBody, { resolveService: () => undefined }).spec;

describe("healthcheck in stack files", () => {
  test("compose's shape: CMD-SHELL, CMD and a plain string, durations as text", () => {
    const shell = convert({
      test: ["CMD-SHELL", "pg_isready -U app"],
      interval: "10s",
      timeout: "500ms",
      retries: 5,
      start_period: "1m",
    });
    assert.deepEqual(shell.problems, []);
    assert.deepEqual(specOf(shell.body).health_check, {
      type: "command",
      command: "pg_isready -U app",
      port: null,
      path: null,
      status: null,
      interval: 10,
      timeout: 0.5,
      retries: 5,
      start_period: 60,
    });
    const cmd = convert({ test: ["CMD", "curl", "-f", "http://localhost/a b"] });
    assert.equal(specOf(cmd.body).health_check?.command, "curl -f 'http://localhost/a b'");
    assert.equal(specOf(convert({ test: "exit 0" }).body).health_check?.command, "exit 0");
  });

  test("disable and NONE turn the image's check off; Berth's http and tcp forms", () => {
    assert.equal(specOf(convert({ disable: true }).body).health_check?.type, "none");
    assert.equal(specOf(convert({ test: ["NONE"] }).body).health_check?.type, "none");
    const http = specOf(convert({ http: { port: 8080, path: "/healthz", status: 204 }, interval: 2 }).body);
    assert.deepEqual(
      [
        http.health_check?.type,
        http.health_check?.port,
        http.health_check?.path,
        http.health_check?.status,
        http.health_check?.interval,
      ],
      ["http", 8080, "/healthz", 204, 2],
    );
    assert.equal(specOf(convert({ tcp: { port: 5432 } }).body).health_check?.port, 5432);
  });

  test("refusals name the key the user wrote", () => {
    const fields = (v: unknown) => convert(v).problems.map((p) => p.field);
    assert.deepEqual(fields({ test: ["CMD-SHELL"] }), ["services.web.healthcheck.test"]);
    assert.deepEqual(fields({ test: "true", interval: "soon" }), ["services.web.healthcheck.interval"]);
    assert.deepEqual(fields({ test: "true", retries: 0 }), ["services.web.healthcheck.retries"]);
    assert.deepEqual(fields({ test: "true", start_interval: "1s" }), [
      "services.web.healthcheck.start_interval",
    ]);
    assert.deepEqual(fields({ interval: "1s" }), ["services.web.healthcheck"]);
    assert.deepEqual(fields({ http: { port: 0 } }), ["services.web.healthcheck.http.port"]);
    assert.deepEqual(fields("true"), ["services.web.healthcheck"]);
  });

  test("export gives back a healthcheck that converts to the same definition", () => {
    for (const check of [
      { test: ["CMD-SHELL", "exit 0"], interval: "1500ms", retries: 2 },
      { http: { port: 80, path: "/up", status: 200 }, start_period: "30s" },
      { tcp: { port: 6379 } },
      { disable: true },
    ]) {
      const spec = specOf(convert(check).body);
      const exported = exportService({
        name: "web",
        nickname: "web",
        target_num_containers: 1,
        spec,
        refOf: () => undefined,
      });
      assert.deepEqual(
        specOf(convert(exported.healthcheck).body).health_check,
        spec.health_check,
        JSON.stringify(check),
      );
    }
    const none = specOf({ image: "busybox" });
    assert.equal(
      exportService({
        name: "web",
        nickname: "web",
        target_num_containers: 1,
        spec: none,
        refOf: () => undefined,
      }).healthcheck,
      undefined,
    );
  });
});

describe("the engine's check", () => {
  const base = {
    command: null,
    port: null,
    path: null,
    status: null,
    interval: 1,
    timeout: 2,
    retries: 3,
    start_period: 4,
  };

  test("command checks run as CMD-SHELL; http and tcp as scripts inside the container; none as NONE", () => {
    assert.deepEqual(engineHealthcheck({ ...base, type: "command", command: "exit 0" }), {
      test: ["CMD-SHELL", "exit 0"],
      intervalMs: 1000,
      timeoutMs: 2000,
      retries: 3,
      startPeriodMs: 4000,
    });
    const http = engineHealthcheck({ ...base, type: "http", port: 80, path: "/up", status: 204 });
    assert.equal(http?.test[0], "CMD-SHELL");
    assert.match(http?.test[1] ?? "", /http:\/\/127\.0\.0\.1:80\/up/);
    assert.match(http?.test[1] ?? "", /want=204/);
    assert.deepEqual(http?.probe, { type: "http", port: 80, path: "/up", status: 204 });
    assert.match(engineHealthcheck({ ...base, type: "tcp", port: 5432 })?.test[1] ?? "", /127\.0\.0\.1 5432/);
    assert.deepEqual(engineHealthcheck({ ...base, type: "none" }), { test: ["NONE"] });
    assert.equal(engineHealthcheck(null), undefined, "none of the service's own: the image's applies");
  });

  test("Docker gets the check in nanoseconds, and reports its State.Health", () => {
    const body = createBody({
      image: "x",
      healthcheck: {
        test: ["CMD-SHELL", "true"],
        intervalMs: 500,
        timeoutMs: 1000,
        retries: 2,
        startPeriodMs: 0,
      },
    });
    assert.deepEqual(body.Healthcheck, {
      Test: ["CMD-SHELL", "true"],
      Interval: 500_000_000,
      Timeout: 1_000_000_000,
      Retries: 2,
      StartPeriod: 0,
    });
    assert.equal(createBody({ image: "x" }).Healthcheck, undefined);
    const info = {
      Id: "abc",
      Name: "/web-1",
      Created: "2026-11-27T00:00:00Z",
      Image: "sha256:1",
      Config: { Image: "x", Labels: {}, Env: [] },
      HostConfig: {},
      RestartCount: 0,
      NetworkSettings: { Networks: {}, Ports: {} },
      State: {
        Status: "running",
        ExitCode: 0,
        OOMKilled: false,
        StartedAt: "2026-11-27T00:00:01Z",
        FinishedAt: "0001-01-01T00:00:00Z",
        Health: { Status: "unhealthy", FailingStreak: 4, Log: [{ ExitCode: 1, Output: "refused\n" }] },
      },
    } as unknown as Dockerode.ContainerInspectInfo;
    assert.deepEqual(containerView(info).health, {
      status: "unhealthy",
      failingStreak: 4,
      lastOutput: "refused",
      lastExitCode: 1,
    });
    const plain = {
      ...info,
      State: { ...info.State, Health: undefined },
    } as unknown as Dockerode.ContainerInspectInfo;
    assert.equal(containerView(plain).health, undefined);
    assert.equal(healthView(null), "none");
    assert.equal(healthView("healthy"), "healthy");
  });
});
