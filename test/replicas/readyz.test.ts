// One replica on PostgreSQL reached through a proxy the test can cut: /readyz turns not ready while
// the database is gone and ready again when it returns, /healthz stays alive meanwhile, and SIGTERM
// stops the process gracefully (streams closed with 1001, exit 0 within the configured time).
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { openStream } from "../streams/support.ts";
import { waitFor } from "../support/harness.ts";
import {
  adminAuth,
  api,
  CuttableProxy,
  cleanup,
  type FreshDatabase,
  freshPgDatabase,
  pgUnavailable,
  type Replica,
  startReplica,
} from "./support.ts";

const unavailable = pgUnavailable();

describe("readiness follows the database", { skip: unavailable ?? false }, () => {
  let db: FreshDatabase | undefined;
  let replica: Replica | undefined;
  let proxy: CuttableProxy | undefined;
  after(async () => {
    cleanup(replica);
    await proxy?.cut();
    await db?.drop();
  });

  test("/readyz is 503 while PostgreSQL is unreachable and 200 again when it returns; SIGTERM closes streams with 1001", async () => {
    db = await freshPgDatabase("berth_readyz");
    const target = new URL(db.url);
    proxy = new CuttableProxy(target.hostname, Number(target.port || 5432));
    await proxy.open();
    replica = await startReplica("solo", {
      BERTH_DATABASE_URL: proxy.urlFor(db.url),
      BERTH_REPLICA_LEASE_MS: "1500",
      BERTH_SHUTDOWN_TIMEOUT_MS: "8000",
    });
    const r = replica;

    const health = await api(r, "GET", "/healthz");
    assert.deepEqual(health.body, { status: "alive", replica: "solo" });
    const ready = await api(r, "GET", "/readyz");
    assert.equal(ready.status, 200);
    assert.deepEqual(ready.body.checks, { migrations: "ok", database: "ok", workers: "ok" });
    const metrics = await (await fetch(`${r.base}/metrics`)).text();
    assert.match(metrics, /berth_live_replicas\{replica="solo"\} 1/);

    await proxy.cut();
    const down = await waitFor(
      "not ready",
      async () => {
        const res = await api(r, "GET", "/readyz");
        return res.status === 503 ? res : undefined;
      },
      20_000,
      200,
    );
    assert.equal(down.body.status, "not ready");
    assert.notEqual(down.body.checks.database, "ok");
    assert.equal((await api(r, "GET", "/healthz")).status, 200, "the process itself is alive");

    await proxy.open();
    const back = await waitFor(
      "ready again",
      async () => {
        const res = await api(r, "GET", "/readyz");
        return res.status === 200 ? res : undefined;
      },
      30_000,
      200,
    );
    assert.deepEqual(back.body.checks, { migrations: "ok", database: "ok", workers: "ok" });

    // The API works again, and so do streams: then SIGTERM ends them with 1001 and the process exits 0.
    assert.equal((await api(r, "GET", "/api/app/v1/service/")).status, 200);
    const events = await openStream(`ws://127.0.0.1:${r.port}/api/audit/v1/events/`, { auth: adminAuth });
    const started = Date.now();
    r.proc.kill("SIGTERM");
    const closed = await events.closed;
    assert.equal(closed.code, 1001);
    assert.equal(await r.exited, 0);
    assert.ok(Date.now() - started < 8000, "gone within BERTH_SHUTDOWN_TIMEOUT_MS");
    // It gave its place up: no replica row and no lease remain.
    assert.deepEqual(await db.store.replicas.liveReplicas(0), []);
    assert.deepEqual(await db.store.replicas.listLeases(), []);
  });
});
