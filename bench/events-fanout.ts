// Benchmark (not a test): the events stream fanned out to many WebSocket subscribers. A real
// platform (SQLite in a temporary directory) listens on loopback; a worker thread opens the
// subscribers, so their parsing does not share the server's event loop; the main thread commits
// changes at a steady rate. Reported: deliveries per second (events × subscribers) and the delay
// from an event's `datetime` (taken when the change is written, before it commits) to its arrival.
import fs from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { Worker } from "node:worker_threads";
import { loadConfig } from "../src/config/index.ts";
import { assemblePlatform } from "../src/platform.ts";

export interface FanoutOptions {
  subscribers: number;
  /** Events committed in total. */
  events: number;
  /** Events committed per second. */
  ratePerS: number;
  /** Changes per transaction (a commit wakes the feed once). */
  batch: number;
}

export interface FanoutResult extends FanoutOptions {
  delivered: number;
  expected: number;
  elapsedMs: number;
  deliveriesPerS: number;
  delayMs: { p50: number; p99: number; max: number };
}

const API_KEY = "bench-admin-key-0123456789abcdef";

// The subscribers' side, as CommonJS evaluated in a worker (it needs no TypeScript).
const CLIENTS = `
const { parentPort, workerData } = require("node:worker_threads");
const WebSocket = require(workerData.wsPath);
const { url, auth, subscribers, expected } = workerData;
const histogram = new Uint32Array(60001); // delay in whole milliseconds, the last bucket is ">= 60 s"
let delivered = 0;
let open = 0;
let firstAt = 0;
let lastAt = 0;
for (let i = 0; i < subscribers; i++) {
  const ws = new WebSocket(url, { headers: { authorization: auth } });
  ws.on("open", () => { if (++open === subscribers) parentPort.postMessage({ kind: "ready" }); });
  ws.on("error", (err) => parentPort.postMessage({ kind: "error", message: String(err) }));
  ws.on("message", (data) => {
    const now = Date.now();
    const event = JSON.parse(data.toString());
    histogram[Math.min(60000, Math.max(0, now - Date.parse(event.datetime)))]++;
    if (!firstAt) firstAt = now;
    lastAt = now;
    if (++delivered === expected) finish();
  });
}
function finish() {
  parentPort.postMessage({ kind: "done", delivered, firstAt, lastAt, histogram });
}
parentPort.on("message", (m) => { if (m === "report") finish(); });
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

export async function runEventsFanout(opts: FanoutOptions): Promise<FanoutResult> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-bench-"));
  const platform = await assemblePlatform(
    loadConfig({
      BERTH_DATA_DIR: dataDir,
      BERTH_LOG_LEVEL: "warn",
      BERTH_AUTO_ATTACH_ENGINE: "false",
      BERTH_NODE_HEALTH_INTERVAL_MS: "3600000",
    }),
  );
  const worker: { current?: Worker } = {};
  try {
    await platform.identity.bootstrapAdmin({
      username: "admin",
      password: "bench-password",
      apiKey: API_KEY,
    });
    await platform.app.listen({ host: "127.0.0.1", port: 0 });
    const address = platform.app.server.address();
    if (!address || typeof address === "string") throw new Error("no TCP address");

    const expected = opts.events * opts.subscribers;
    const w = new Worker(CLIENTS, {
      eval: true,
      workerData: {
        wsPath: createRequire(import.meta.url).resolve("ws"),
        url: `ws://127.0.0.1:${address.port}/api/audit/v1/events/?type=service`,
        auth: `Basic ${Buffer.from(`admin:${API_KEY}`).toString("base64")}`,
        subscribers: opts.subscribers,
        expected,
      },
    });
    worker.current = w;
    type Report = { kind: "done"; delivered: number; lastAt: number; histogram: Uint32Array };
    const messages = new Promise<Report>((resolve, reject) => {
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

    const startedAt = Date.now();
    const intervalMs = (1000 * opts.batch) / opts.ratePerS;
    for (let written = 0; written < opts.events; written += opts.batch) {
      const dueAt = startedAt + (written / opts.batch) * intervalMs;
      const wait = dueAt - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const n = Math.min(opts.batch, opts.events - written);
      await platform.store.transaction(async (tx) => {
        for (let i = 0; i < n; i++) {
          await tx.appendChange({
            namespace: "admin",
            type: "service",
            action: "update",
            resource_uri: `/api/app/v1/admin/service/bench-${written + i}/`,
            state: "Running",
            parents: "[]",
            datetime: Date.now(),
          });
        }
      });
    }
    // Whatever has not arrived a while after the last commit counts as lost.
    const timeout = setTimeout(() => w.postMessage("report"), 30_000);
    const report = await messages;
    clearTimeout(timeout);
    const elapsedMs = Math.max(1, report.lastAt - startedAt);
    return {
      ...opts,
      delivered: report.delivered,
      expected,
      elapsedMs,
      deliveriesPerS: Math.round((report.delivered / elapsedMs) * 1000),
      delayMs: {
        p50: percentile(report.histogram, report.delivered, 0.5),
        p99: percentile(report.histogram, report.delivered, 0.99),
        max: percentile(report.histogram, report.delivered, 1),
      },
    };
  } finally {
    await worker.current?.terminate();
    await platform.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

export function formatFanout(r: FanoutResult): string {
  return [
    `events fan-out: ${r.subscribers} subscribers, ${r.events} events at ${r.ratePerS}/s (${r.batch} per commit)`,
    `  delivered ${r.delivered} of ${r.expected} in ${r.elapsedMs} ms: ${r.deliveriesPerS} deliveries/s`,
    `  delay from write to arrival: p50 ${r.delayMs.p50} ms, p99 ${r.delayMs.p99} ms, max ${r.delayMs.max} ms`,
  ].join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await runEventsFanout({ subscribers: 1000, events: 1000, ratePerS: 100, batch: 1 });
  process.stdout.write(`${formatFanout(result)}\n`);
}
