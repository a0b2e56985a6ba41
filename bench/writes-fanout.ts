// Benchmark (not a test): writes while the events stream fans out (issue 34, items 1, 3 and 6). A
// platform on SQLite (or on PostgreSQL, in a schema of its own, with BERTH_BENCH_DATABASE_URL)
// takes PATCHes of 10 services from 10 keep-alive connections (bench/load.ts, a process of its
// own), first with no events subscriber, then with `subscribers` subscribers of the namespace
// (every event type, as the dashboard subscribes) opened by a worker thread. Reported: PATCH
// throughput and latency in both phases and their ratio (target ≥ 80 %); per PATCH, the event
// loop's busy time (eventLoopUtilization: wall time, so it grows with the machine's load), the
// process's CPU time (the subscribers' worker included in the second phase) and the statements
// and transactions run (a write's own and what it set off, warm-up included); the event loop's
// longest block; the events the subscribers missed (target 0: what was committed meanwhile ×
// subscribers, against what arrived) and the delay from an event's `datetime` to its arrival
// (target p99 < 100 ms).
import fs from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { Worker } from "node:worker_threads";
import { loadConfig } from "../src/config/index.ts";
import { assemblePlatform } from "../src/platform.ts";
import { openDatabase } from "../src/store/db.ts";
import { fmtMs, formatLoad, type LoadResult, runLoad } from "./load.ts";

export interface WritesFanoutOptions {
  subscribers: number;
  connections: number;
  durationMs: number;
}

const API_KEY = "bench-admin-key-0123456789abcdef";
const AUTH = `Basic ${Buffer.from(`admin:${API_KEY}`).toString("base64")}`;

// The subscribers, as CommonJS in a worker: they count every frame and its delay; told how many
// to expect once the writes are done, they report when all arrived (or when asked).
const CLIENTS = `
const { parentPort, workerData } = require("node:worker_threads");
const WebSocket = require(workerData.wsPath);
const { url, auth, subscribers } = workerData;
const histogram = new Uint32Array(60001);
const DATETIME = Buffer.from('"datetime":"');
let delivered = 0;
let expected = Infinity;
let open = 0;
let closes = 0;
for (let i = 0; i < subscribers; i++) {
  const ws = new WebSocket(url, { headers: { authorization: auth } });
  ws.on("open", () => { if (++open === subscribers) parentPort.postMessage({ kind: "ready" }); });
  ws.on("error", (err) => parentPort.postMessage({ kind: "error", message: String(err) }));
  ws.on("close", () => { closes++; });
  // Only the event's datetime is read (parsing whole frames would make the clients the bottleneck).
  ws.on("message", (data) => {
    const at = data.indexOf(DATETIME) + DATETIME.length;
    const sent = Date.parse(data.toString("latin1", at, at + 24));
    histogram[Math.min(60000, Math.max(0, Date.now() - sent))]++;
    if (++delivered >= expected) finish();
  });
}
let finished = false;
function finish() {
  if (finished) return;
  finished = true;
  parentPort.postMessage({ kind: "done", delivered, closes, histogram });
}
parentPort.on("message", (m) => {
  if (m === "report") return finish();
  expected = m.expected;
  if (delivered >= expected) finish();
});
`;

function percentile(histogram: Uint32Array, total: number, p: number): number {
  const rank = Math.ceil(total * p);
  let seen = 0;
  for (let ms = 0; ms < histogram.length; ms++) {
    seen += histogram[ms]!;
    if (seen >= rank) return ms;
  }
  return histogram.length - 1;
}

/**
 * The database of the run: a fresh SQLite file in the data directory, or a schema of its own on the
 * PostgreSQL server named by BERTH_BENCH_DATABASE_URL (dropped afterwards).
 */
async function benchDatabase(): Promise<{ env: Record<string, string>; drop(): Promise<void> }> {
  const pg = process.env.BERTH_BENCH_DATABASE_URL;
  if (!pg?.startsWith("postgres")) return { env: {}, drop: async () => {} };
  const schema = `bench_writes_${process.pid}`;
  const admin = openDatabase(pg);
  await admin.kysely.schema.createSchema(schema).ifNotExists().execute();
  await admin.close();
  const url = new URL(pg);
  url.searchParams.set("options", `-c search_path=${schema}`);
  return {
    env: { BERTH_DATABASE_URL: url.toString() },
    async drop() {
      const a = openDatabase(pg);
      await a.kysely.schema.dropSchema(schema).cascade().execute();
      await a.close();
    },
  };
}

export async function runWritesFanout(opts: WritesFanoutOptions, out: (line: string) => void): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-bench-"));
  const database = await benchDatabase();
  const platform = await assemblePlatform(
    loadConfig({
      BERTH_DATA_DIR: dataDir,
      BERTH_LOG_LEVEL: "warn",
      BERTH_AUTO_ATTACH_ENGINE: "false",
      BERTH_NODE_HEALTH_INTERVAL_MS: "3600000",
      ...database.env,
    }),
  );
  let worker: Worker | undefined;
  try {
    await platform.identity.bootstrapAdmin({
      username: "admin",
      password: "bench-password",
      apiKey: API_KEY,
    });
    await platform.start();
    await platform.app.listen({ host: "127.0.0.1", port: 0 });
    const address = platform.app.server.address();
    if (!address || typeof address === "string") throw new Error("no TCP address");
    const base = `http://127.0.0.1:${address.port}`;
    const services: string[] = [];
    for (let i = 0; i < opts.connections; i++) {
      const res = await fetch(`${base}/api/app/v1/service/`, {
        method: "POST",
        headers: { authorization: AUTH, "content-type": "application/json" },
        body: JSON.stringify({ name: `patched-${i}`, image: "busybox:local", target_num_containers: 1 }),
      });
      if (res.status !== 201) throw new Error(`service create: ${res.status} ${await res.text()}`);
      services.push(((await res.json()) as { resource_uri: string }).resource_uri);
    }
    // Connection i alternates between two values on service i: every PATCH changes something.
    const requests = [1, 2].flatMap((n) =>
      services.map((uri) => ({
        method: "PATCH",
        path: uri,
        body: JSON.stringify({ target_num_containers: n }),
      })),
    );
    const load = () =>
      runLoad({
        url: base,
        headers: { authorization: AUTH },
        connections: opts.connections,
        durationMs: opts.durationMs,
        requests,
      });
    // The event loop's longest block, and its busy time per request (eventLoopUtilization: the
    // time the loop ran callbacks, whatever they were: a write's own work and what it set off).
    const loop = monitorEventLoopDelay({ resolution: 10 });
    interface Measured {
      r: LoadResult;
      maxBlockMs: number;
      loopMsPerRequest: number;
      statementsPerRequest: number;
      transactionsPerRequest: number;
      cpuMsPerRequest: number;
    }
    const measured = async (): Promise<Measured> => {
      loop.reset();
      loop.enable();
      const elu = performance.eventLoopUtilization();
      const cpu = process.cpuUsage();
      const { result: r, statements, transactions } = await platform.db.statements.during(load);
      const used = performance.eventLoopUtilization(elu);
      const spent = process.cpuUsage(cpu);
      loop.disable();
      // The warm-up's requests count in the statements too (a few hundred ms of them).
      const n = Math.max(1, r.requests);
      return {
        r,
        maxBlockMs: loop.max / 1e6,
        loopMsPerRequest: used.active / n,
        statementsPerRequest: statements / n,
        transactionsPerRequest: transactions / n,
        cpuMsPerRequest: (spent.user + spent.system) / 1000 / n,
      };
    };
    const loopFigures = (m: Measured) =>
      `event loop ${fmtMs(m.loopMsPerRequest)} ms per PATCH (target < 1 ms; CPU ${fmtMs(m.cpuMsPerRequest)} ms), max block ${fmtMs(m.maxBlockMs)} ms (target < 50 ms); ${m.statementsPerRequest.toFixed(1)} statements, ${m.transactionsPerRequest.toFixed(1)} transactions per PATCH`;

    const alone = await measured();
    const dialect = database.env.BERTH_DATABASE_URL ? "PostgreSQL" : "SQLite";
    out(
      `writes while the events stream fans out (${dialect}): PATCH at ${opts.connections} connections, ${opts.durationMs / 1000} s each`,
    );
    out(`  no subscriber:      ${formatLoad(alone.r)}`);
    out(`    ${loopFigures(alone)}`);

    const w = new Worker(CLIENTS, {
      eval: true,
      workerData: {
        wsPath: createRequire(import.meta.url).resolve("ws"),
        url: `ws://127.0.0.1:${address.port}/api/audit/v1/events/`,
        auth: AUTH,
        subscribers: opts.subscribers,
      },
    });
    worker = w;
    type Report = { kind: "done"; delivered: number; closes: number; histogram: Uint32Array };
    const done = new Promise<Report>((resolve, reject) => {
      w.on("message", (m: { kind: string; message?: string }) => {
        if (m.kind === "error") reject(new Error(m.message));
        if (m.kind === "done") resolve(m as Report);
      });
      w.on("error", reject);
    });
    await new Promise<void>((resolve, reject) => {
      w.on("message", (m: { kind: string }) => m.kind === "ready" && resolve());
      w.on("error", reject);
    });
    const from = await platform.store.latestRevision();
    const fanned = await measured();
    const to = await platform.store.latestRevision();
    let events = 0;
    for (let at = from; at < to; ) {
      const page = await platform.store.changesSince(at, 1000);
      if (page.length === 0) break;
      events += page.filter((c) => c.namespace === "admin").length;
      at = Number(page.at(-1)!.revision);
    }
    const expected = events * opts.subscribers;
    w.postMessage({ expected });
    const timer = setTimeout(() => w.postMessage("report"), 30_000);
    const report = await done;
    clearTimeout(timer);
    const ratio = fanned.r.rps / Math.max(1, alone.r.rps);
    out(`  ${opts.subscribers} subscribers: ${formatLoad(fanned.r)}`);
    out(`    ${loopFigures(fanned)}`);
    out(`  throughput with subscribers: ${(ratio * 100).toFixed(0)} % of without (target ≥ 80 %)`);
    out(
      `  events: ${events} committed × ${opts.subscribers} = ${expected} deliveries; ${report.delivered} arrived, ` +
        `${Math.max(0, expected - report.delivered)} lost, ${report.closes} subscribers closed`,
    );
    out(
      `  delivery delay: p50 ${percentile(report.histogram, report.delivered, 0.5)} ms, ` +
        `p99 ${percentile(report.histogram, report.delivered, 0.99)} ms, max ${percentile(report.histogram, report.delivered, 1)} ms (target p99 < 100 ms)`,
    );
  } finally {
    await worker?.terminate();
    await platform.close();
    await database.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
