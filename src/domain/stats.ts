// Resource figures of containers, services and nodes (issue 32): how a point is computed from two
// engine samples, exactly as `docker stats` computes it, how points add up for a service or a node,
// and how a range and a step read a series. Pure: no I/O.

/** The counters of one engine sample that the figures come from (drivers' ContainerStats). */
export interface StatsSample {
  readAtMs: number;
  cpuTotalNs: number;
  systemCpuNs: number;
  onlineCpus: number;
  memoryBytes: number;
  memoryLimitBytes: number;
  netRxBytes: number;
  netTxBytes: number;
  blockReadBytes: number;
  blockWriteBytes: number;
  pids: number;
}

/** One point of a series: what a container, a service or a node used over one step. */
export interface StatPoint {
  /** Start of the step (epoch ms, a multiple of the step). */
  at: number;
  /** CPU in percent of one core (`docker stats`' CPU %: 250 = two and a half cores). */
  cpu: number;
  /** CPUs of the node(s) the figures come from: `cpu / cpus` is the share of the node. */
  cpus: number;
  /** Memory used without the page cache, bytes. */
  memory: number;
  /** The memory limit (a node: its memory), bytes. */
  memory_limit: number;
  /** Bytes per second received, sent, read and written over the step. */
  net_rx: number;
  net_tx: number;
  block_read: number;
  block_write: number;
  pids: number;
  /** Times the engine restarted the container(s) since created (a service, a node: their sum). */
  restarts: number;
  /** Containers the point sums (1 for a container). */
  containers: number;
}

/**
 * CPU in percent of one core between two samples, the docker CLI's `calculateCPUPercentUnix`:
 * (container CPU delta / host CPU delta) × online CPUs × 100; 0 when either delta is not positive.
 */
export function cpuPercent(
  previous: Pick<StatsSample, "cpuTotalNs" | "systemCpuNs">,
  current: Pick<StatsSample, "cpuTotalNs" | "systemCpuNs" | "onlineCpus">,
): number {
  const cpuDelta = current.cpuTotalNs - previous.cpuTotalNs;
  const systemDelta = current.systemCpuNs - previous.systemCpuNs;
  if (systemDelta <= 0 || cpuDelta <= 0) return 0;
  return (cpuDelta / systemDelta) * current.onlineCpus * 100;
}

/** Bytes per second of a counter between two samples; a counter that went back (a restart) counts from 0. */
function rate(previous: number, current: number, seconds: number): number {
  if (seconds <= 0) return 0;
  return (current >= previous ? current - previous : current) / seconds;
}

/**
 * The point of one container at `at` from its current sample and the one before (undefined for
 * the first sample of a container: CPU and rates are 0 until the next).
 */
export function containerPoint(
  at: number,
  current: StatsSample,
  previous: StatsSample | undefined,
  restarts: number,
): StatPoint {
  const seconds = previous ? (current.readAtMs - previous.readAtMs) / 1000 : 0;
  return {
    at,
    cpu: previous ? cpuPercent(previous, current) : 0,
    cpus: current.onlineCpus,
    memory: current.memoryBytes,
    memory_limit: current.memoryLimitBytes,
    net_rx: previous ? rate(previous.netRxBytes, current.netRxBytes, seconds) : 0,
    net_tx: previous ? rate(previous.netTxBytes, current.netTxBytes, seconds) : 0,
    block_read: previous ? rate(previous.blockReadBytes, current.blockReadBytes, seconds) : 0,
    block_write: previous ? rate(previous.blockWriteBytes, current.blockWriteBytes, seconds) : 0,
    pids: current.pids,
    restarts,
    containers: 1,
  };
}

const SUMMED = [
  "cpu",
  "memory",
  "memory_limit",
  "net_rx",
  "net_tx",
  "block_read",
  "block_write",
  "pids",
  "restarts",
  "containers",
] as const;

/** The sum of points taken at the same time (a node's containers); `cpus` and the limit are given. */
export function sumPoints(
  at: number,
  points: readonly StatPoint[],
  own?: { cpus: number; memory_limit: number },
): StatPoint {
  const out: StatPoint = {
    at,
    cpu: 0,
    cpus: 0,
    memory: 0,
    memory_limit: 0,
    net_rx: 0,
    net_tx: 0,
    block_read: 0,
    block_write: 0,
    pids: 0,
    restarts: 0,
    containers: 0,
  };
  for (const p of points) for (const k of SUMMED) out[k] += p[k];
  out.cpus = own ? own.cpus : Math.max(0, ...points.map((p) => p.cpus));
  if (own) out.memory_limit = own.memory_limit;
  return out;
}

/** Averages of points within each step (`at` floored to the step); the last value of counts. */
export function downsample(points: readonly StatPoint[], stepMs: number): StatPoint[] {
  const out: StatPoint[] = [];
  let group: StatPoint[] = [];
  const flush = () => {
    if (!group.length) return;
    const at = Math.floor(group[0]!.at / stepMs) * stepMs;
    const last = group[group.length - 1]!;
    const avg = (k: keyof StatPoint) => group.reduce((s, p) => s + p[k], 0) / group.length;
    out.push({
      at,
      cpu: avg("cpu"),
      cpus: last.cpus,
      memory: avg("memory"),
      memory_limit: last.memory_limit,
      net_rx: avg("net_rx"),
      net_tx: avg("net_tx"),
      block_read: avg("block_read"),
      block_write: avg("block_write"),
      pids: last.pids,
      restarts: last.restarts,
      containers: last.containers,
    });
    group = [];
  };
  for (const p of points) {
    if (group.length && Math.floor(group[0]!.at / stepMs) !== Math.floor(p.at / stepMs)) flush();
    group.push(p);
  }
  flush();
  return out;
}

/** `90s`, `15m`, `1h`, `2d` or a number of seconds → milliseconds; undefined when not one of those. */
export function parseDuration(text: string): number | undefined {
  const m = /^(\d{1,7})(s|m|h|d)?$/.exec(text.trim());
  if (!m) return undefined;
  const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(m[2] ?? "s") as "s" | "m" | "h" | "d"];
  const ms = Number(m[1]) * unit;
  return ms > 0 ? ms : undefined;
}

/** How long each resolution is kept, and its step. */
export interface Retention {
  /** The collection interval: the fine series' step. */
  fineStepMs: number;
  fineKeepMs: number;
  /** The coarse series (minutes rolled up from the fine one). */
  coarseStepMs: number;
  coarseKeepMs: number;
}

/** Which stored series a range and step read: the fine one when it covers both, else the coarse. */
export function seriesFor(r: Retention, rangeMs: number, stepMs: number): number {
  return rangeMs <= r.fineKeepMs && stepMs < r.coarseStepMs ? r.fineStepMs : r.coarseStepMs;
}
