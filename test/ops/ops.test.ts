// Operator endpoints and backup/restore on a single SQLite process (issue 16): liveness,
// readiness, Prometheus metrics, and a backup restored into a new data directory.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import type { BackupSecret } from "../../src/config/backup-secret.ts";
import { loadConfig } from "../../src/config/index.ts";
import { backupControlPlane, readBackupHeader, restoreControlPlane } from "../../src/ops/backup.ts";
import { assemblePlatform } from "../../src/platform.ts";
import { runningService, simulatedCluster } from "../streams/support.ts";
import { basic, call, type Harness, startHarness } from "../support/harness.ts";

let h: Harness;
before(async () => {
  h = await startHarness();
});
after(async () => {
  await h.close();
});

test("GET /healthz answers without credentials and names the replica", async () => {
  const res = await call(h, undefined, "GET", "/healthz");
  assert.equal(res.status, 200);
  assert.equal(res.body.status, "alive");
  assert.equal(res.body.replica, h.replicaId);
});

test("GET /readyz is ready once the database answers and workers run", async () => {
  const res = await call(h, undefined, "GET", "/readyz");
  assert.equal(res.status, 200, res.raw);
  assert.deepEqual(res.body.checks, { migrations: "ok", database: "ok", workers: "ok" });
  assert.equal(res.headers["cache-control"], "no-store");
});

test("GET /metrics reports requests, actions, queue, streams and engine calls in Prometheus format", async () => {
  await simulatedCluster(h, h.admin, 2);
  await runningService(h, h.admin, { name: "metered", target_num_containers: 2 });
  await call(h, h.admin, "GET", "/api/app/v1/service/");
  const res = await h.app.inject({ method: "GET", url: "/metrics" });
  assert.equal(res.statusCode, 200);
  assert.match(String(res.headers["content-type"]), /^text\/plain/);
  const text = res.body;
  const seen = (name: string, labels: Record<string, string>, atLeast = 0) => {
    const v = sample(text, name, labels);
    assert.ok(v !== undefined && v >= atLeast, `${name} ${JSON.stringify(labels)} ≥ ${atLeast}: got ${v}`);
  };
  seen(
    "berth_http_request_duration_seconds_count",
    { method: "GET", route: "/api/app/v1/service/", status: "200" },
    1,
  );
  seen("berth_actions_total", { kind: "service.start", outcome: "Success" }, 1);
  assert.equal(sample(text, "berth_action_queue_depth", { state: "pending" }), 0);
  assert.equal(sample(text, "berth_action_queue_oldest_age_seconds", {}), 0);
  seen("berth_engine_call_duration_seconds_count", { operation: "createContainer", result: "ok" }, 2);
  // One series for the calls of every node (a node label would make one per node: unbounded).
  const creates = text
    .split("\n")
    .filter(
      (l) =>
        l.startsWith("berth_engine_call_duration_seconds_count{") &&
        l.includes('operation="createContainer"'),
    );
  assert.equal(creates.length, 1, creates.join("\n"));
  assert.equal(sample(text, "berth_open_streams", {}), 0);
  seen("berth_reconcile_lag_seconds", {}, 0);
  assert.match(text, /# TYPE berth_change_feed_lag_seconds histogram/);
  for (const line of text.split("\n").filter((l) => l.startsWith("berth_"))) {
    assert.match(line, /replica="[^"]+"/, "every sample names the replica");
  }
});

// PostgreSQL backups are restored in the replica tier (test/replicas/), into a database of their own.
const onSqlite = !process.env.BERTH_TEST_DATABASE_URL?.startsWith("postgres");
const secret: BackupSecret = {
  kind: "passphrase",
  bytes: Buffer.from("a passphrase for tests"),
  source: "test",
};

test("a backup restored into a new data directory brings back every object", {
  skip: onSqlite ? false : "the harness runs on PostgreSQL; this test restores SQLite backups",
}, async () => {
  const file = path.join(h.dataDir, "berth.backup");
  await call(h, h.admin, "POST", "/api/v1.1/orgs/", { name: "acme" }).catch(() => undefined);
  const services = (await call(h, h.admin, "GET", "/api/app/v1/service/")).body.objects;
  const nodes = (await call(h, h.admin, "GET", "/api/infra/v1/node/")).body.objects;
  assert.ok(services.length >= 1 && nodes.length === 2); // the metrics test's
  const header = await backupControlPlane({ config: h.config, file, secret });
  assert.equal(header.dialect, "sqlite");
  assert.equal(readBackupHeader(file).dialect, "sqlite");

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-restored-"));
  try {
    const config = loadConfig({
      BERTH_DATA_DIR: dir,
      BERTH_LOG_LEVEL: "silent",
      BERTH_AUTO_ATTACH_ENGINE: "false",
      BERTH_NODE_HEALTH_INTERVAL_MS: "3600000",
    });
    await restoreControlPlane({ config, file, secret });
    // A second restore never overwrites what the first one brought back.
    await assert.rejects(restoreControlPlane({ config, file, secret }), /already holds a database/);
    const restored = await assemblePlatform(config);
    try {
      await restored.app.ready();
      const get = (url: string) =>
        restored.app.inject({ method: "GET", url, headers: { authorization: h.admin.auth } });
      const again = (await get("/api/app/v1/service/")).json();
      assert.deepEqual(
        again.objects.map((s: { uuid: string; state: string }) => [s.uuid, s.state]),
        services.map((s: { uuid: string; state: string }) => [s.uuid, s.state]),
      );
      const nodesAgain = (await get("/api/infra/v1/node/")).json();
      assert.deepEqual(
        nodesAgain.objects.map((n: { uuid: string }) => n.uuid),
        nodes.map((n: { uuid: string }) => n.uuid),
      );
      // The admin's key still works: the users came back with their hashed keys.
      const me = await restored.app.inject({
        method: "GET",
        url: "/auth/",
        headers: { authorization: basic("admin", h.admin.key) },
      });
      assert.equal(me.statusCode, 200);
      // The key file came along, so secrets sealed before the backup still open.
      assert.equal(
        fs.readFileSync(path.join(dir, "secret.key"), "utf8"),
        fs.readFileSync(path.join(h.dataDir, "secret.key"), "utf8"),
      );
    } finally {
      await restored.close();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("restore refuses a file that is not a backup, with a message that says so", async () => {
  const file = path.join(h.dataDir, "not-a-backup");
  fs.writeFileSync(file, "hello\nworld\n");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-restored-"));
  try {
    const config = loadConfig({ BERTH_DATA_DIR: dir });
    await assert.rejects(restoreControlPlane({ config, file, secret }), /is not a Berth backup/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

/** The value of the first sample of `name` carrying every label in `labels`. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split("\n")) {
    const m = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[3]);
  }
  return undefined;
}
