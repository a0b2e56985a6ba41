// A small keep-alive HTTP load generator. It runs in a process of its own (bench/load-worker.mjs),
// so its own work shares neither the event loop nor the memory (RSS) of the server it measures:
// each of `connections` sockets sends one request, waits for the whole response, and sends the next.
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";

export interface LoadOptions {
  url: string;
  headers?: Record<string, string>;
  connections: number;
  durationMs: number;
  /** Requests sent before measuring (connections open, caches warm). */
  warmupMs?: number;
  /** Instead of GET `url`: connection i sends requests[i], requests[i + connections], … (host from `url`). */
  requests?: { method: string; path: string; body?: string }[];
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
  const child = fork(fileURLToPath(new URL("./load-worker.mjs", import.meta.url)), {
    env: { ...process.env, BERTH_LOAD_OPTIONS: JSON.stringify({ headers: {}, warmupMs: 500, ...opts }) },
    execArgv: [],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  try {
    const m = await new Promise<{
      latencies: number[];
      errors: number;
      bad: number;
      bytes: number;
      elapsed: number;
    }>((resolve, reject) => {
      child.once("message", (m) => resolve(m as never));
      child.once("error", reject);
      child.once("exit", (code) => reject(new Error(`the load generator exited (${code}) before reporting`)));
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
    child.kill();
  }
}

export const fmtMs = (ms: number) => (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));

export function formatLoad(r: LoadResult): string {
  return `${r.rps} req/s, p50 ${fmtMs(r.latencyMs.p50)} ms, p99 ${fmtMs(r.latencyMs.p99)} ms, max ${fmtMs(r.latencyMs.max)} ms${r.errors || r.bad ? ` (${r.errors} errors, ${r.bad} non-2xx)` : ""}`;
}
