// A small keep-alive HTTP load generator. It runs in a worker thread (bench/load-worker.mjs), so its
// own work does not share the event loop of the server it measures: each of `connections` sockets
// sends one request, waits for the whole response, and sends the next.
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

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(sorted.length * p) - 1))]!;
}

export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const worker = new Worker(new URL("./load-worker.mjs", import.meta.url), {
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
