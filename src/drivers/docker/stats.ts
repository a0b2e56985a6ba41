// `GET /containers/<id>/stats` read into Berth's ContainerStats. The memory figure follows the
// docker CLI (cli/command/container/stats_helpers.go `calculateMemUsageUnixNoCache`): usage less
// `total_inactive_file` on cgroup v1, less `inactive_file` on cgroup v2, when that is smaller than
// the usage. Block I/O sums `io_service_bytes_recursive` by the first letter of `op`, as the CLI does.
import type { ContainerStats } from "../engine-stats.ts";

/** A finite number at least 0 of an engine's answer, else 0. */
function num(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : 0;
}

function obj(value: unknown): Record<string, unknown> {
  return value && typeof value === "object" && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

/** Memory used without the page cache, exactly as `docker stats` computes it. */
export function memoryWithoutCache(memoryStats: unknown): number {
  const m = obj(memoryStats);
  const usage = num(m.usage);
  const stats = obj(m.stats);
  if ("total_inactive_file" in stats) {
    const v1 = num(stats.total_inactive_file);
    if (v1 < usage) return usage - v1;
  }
  const v2 = num(stats.inactive_file);
  if (v2 < usage) return usage - v2;
  return usage;
}

/** The engine's stats answer as Berth's plain type; anything missing or malformed counts as 0. */
export function containerStats(answer: unknown): ContainerStats {
  const a = obj(answer);
  const cpu = obj(a.cpu_stats);
  const usage = obj(cpu.cpu_usage);
  const percpu = Array.isArray(usage.percpu_usage) ? usage.percpu_usage.length : 0;
  const memory = obj(a.memory_stats);
  let rx = 0;
  let tx = 0;
  for (const n of Object.values(obj(a.networks))) {
    rx += num(obj(n).rx_bytes);
    tx += num(obj(n).tx_bytes);
  }
  let read = 0;
  let write = 0;
  const io = obj(a.blkio_stats).io_service_bytes_recursive;
  for (const entry of Array.isArray(io) ? io : []) {
    const op = String(obj(entry).op ?? "");
    if (op[0] === "r" || op[0] === "R") read += num(obj(entry).value);
    else if (op[0] === "w" || op[0] === "W") write += num(obj(entry).value);
  }
  const readAt = typeof a.read === "string" ? Date.parse(a.read) : Number.NaN;
  return {
    readAtMs: Number.isFinite(readAt) && readAt > 0 ? readAt : Date.now(),
    cpuTotalNs: num(usage.total_usage),
    systemCpuNs: num(cpu.system_cpu_usage),
    onlineCpus: num(cpu.online_cpus) || percpu,
    memoryBytes: memoryWithoutCache(memory),
    memoryLimitBytes: num(memory.limit),
    netRxBytes: rx,
    netTxBytes: tx,
    blockReadBytes: read,
    blockWriteBytes: write,
    pids: num(obj(a.pids_stats).current),
  };
}
