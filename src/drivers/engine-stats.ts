// What an engine reports of a container's resource use (issue 32), and the Engine interface's
// call for it (declared here, merged into `Engine` of engine.ts, which is at its size limit).
/**
 * A container's resource counters as the engine reads them at one moment (Docker's stats API,
 * one-shot). CPU figures are cumulative: a share of CPU comes from two samples (domain/stats.ts).
 */
export interface ContainerStats {
  /** When the engine read the counters (epoch ms). */
  readAtMs: number;
  /** CPU time the container used since it started, in ns (`cpu_stats.cpu_usage.total_usage`). */
  cpuTotalNs: number;
  /** The host's CPU time since boot, every CPU and idle included, in ns (`system_cpu_usage`). */
  systemCpuNs: number;
  /** CPUs the host has online (`online_cpus`). */
  onlineCpus: number;
  /** Memory used without the page cache, as `docker stats` shows it (usage − inactive_file). */
  memoryBytes: number;
  /** The container's memory limit; the host's memory when it has none. */
  memoryLimitBytes: number;
  /** Bytes received and sent on every network of the container since it started. */
  netRxBytes: number;
  netTxBytes: number;
  /** Bytes read from and written to block devices since it started. */
  blockReadBytes: number;
  blockWriteBytes: number;
  /** Processes and threads in the container. */
  pids: number;
}

declare module "./engine.ts" {
  interface Engine {
    /** Resource counters now (one call, within the bounds named `stats`); undefined without such a container. */
    containerStats(id: string, options?: { signal?: AbortSignal }): Promise<ContainerStats | undefined>;
  }
}
