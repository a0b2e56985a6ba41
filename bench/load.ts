// A small keep-alive HTTP load generator (autocannon's idea, without the dependency). It runs in a
// worker thread, so its own work does not share the event loop of the server it measures: each of
// `connections` loops sends one request, waits for the whole response, and sends the next.
import { Worker } from "node:worker_threads";

export interface LoadOptions {
  url: string;
  headers?: Record<string, string>;
  connections: number;
  durationMs: number;
  /** Requests sent before measuring (connections open, caches warm). */
  warmupMs?: number;
}

export interface LoadResult {
  requests: number;
  errors: number;
  /** Non-2xx answers. */
  bad: number;
  rps: number;
  bytesPerResponse: number;
  latencyMs: { p50: number; p99: number; max: number };
}

const CLIENT = `
const http = require("node:http");
const { parentPort, workerData } = require("node:worker_threads");
const { url, headers, connections, durationMs, warmupMs } = workerData;
const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
const latencies = [];
let errors = 0, bad = 0, bytes = 0, lastEnd = 0, measuring = false, stop = false;
function one(counted) {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const req = http.get(url, { agent, headers }, (res) => {
      let n = 0;
      res.on("data", (c) => { n += c.length; });
      res.on("end", () => {
        if (counted) {
          latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
          bytes += n;
          lastEnd = Date.now();
          if (res.statusCode < 200 || res.statusCode >= 300) bad++;
        }
        resolve();
      });
      res.on("error", () => { if (counted) errors++; resolve(); });
    });
    req.on("error", () => { if (counted) errors++; resolve(); });
  });
}
// A request counts when it was sent inside the window, even if its answer ends after it; a
// connection whose requests all outlast the window sends one more, counted, so a slow answer
// shows as its latency and a low rate, never as "0 req/s".
async function loop() {
  let measured = false;
  while (!stop || !measured) {
    const counted = measuring || stop;
    await one(counted);
    if (counted) measured = true;
  }
}
const loops = Array.from({ length: connections }, loop);
setTimeout(() => {
  measuring = true;
  const startedAt = Date.now();
  setTimeout(async () => {
    measuring = false;
    stop = true;
    await Promise.all(loops);
    // The window, or longer when answers to requests sent inside it ended after it.
    const elapsed = Math.max(durationMs, lastEnd - startedAt);
    agent.destroy();
    parentPort.postMessage({ latencies, errors, bad, bytes, elapsed });
  }, durationMs);
}, warmupMs);
`;

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(sorted.length * p) - 1))]!;
}

export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const worker = new Worker(CLIENT, {
    eval: true,
    workerData: { headers: {}, warmupMs: 500, ...opts },
  });
  try {
    const m = await new Promise<{
      latencies: number[];
      errors: number;
      bad: number;
      bytes: number;
      elapsed: number;
    }>((resolve, reject) => {
      worker.once("message", resolve);
      worker.once("error", reject);
    });
    const sorted = m.latencies.sort((a, b) => a - b);
    return {
      requests: sorted.length,
      errors: m.errors,
      bad: m.bad,
      rps: Math.round((sorted.length / m.elapsed) * 1000),
      bytesPerResponse: sorted.length ? Math.round(m.bytes / sorted.length) : 0,
      latencyMs: { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), max: sorted.at(-1) ?? 0 },
    };
  } finally {
    await worker.terminate();
  }
}

export const fmtMs = (ms: number) => (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));

export function formatLoad(r: LoadResult): string {
  return `${r.rps} req/s, p50 ${fmtMs(r.latencyMs.p50)} ms, p99 ${fmtMs(r.latencyMs.p99)} ms, max ${fmtMs(r.latencyMs.max)} ms${r.errors || r.bad ? ` (${r.errors} errors, ${r.bad} non-2xx)` : ""}`;
}
