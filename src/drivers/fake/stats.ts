// Stats of the fake engine's containers: deterministic counters that grow at a rate per container
// (a small default load, or what a test sets with `FakeEngine.setUsage`), reset when the container
// starts again (a new cgroup, as on Docker). The host's CPU counter is the clock times its CPUs,
// so `docker stats`' formula gives back exactly the rate that was set.
import type { ContainerStats } from "../engine-stats.ts";
import type { FakeContainer } from "./fake-model.ts";

const MiB = 1024 * 1024;

/** What a container's processes use: CPU in cores, memory in bytes, I/O in bytes per second. */
export interface FakeUsage {
  cpuCores: number;
  memoryBytes: number;
  netRxPerS: number;
  netTxPerS: number;
  blockReadPerS: number;
  blockWritePerS: number;
  pids: number;
}

export const DEFAULT_FAKE_USAGE: FakeUsage = {
  cpuCores: 0.02,
  memoryBytes: 8 * MiB,
  netRxPerS: 1024,
  netTxPerS: 512,
  blockReadPerS: 0,
  blockWritePerS: 256,
  pids: 1,
};

interface Counters {
  startedAt: number;
  /** Counters at `since`, and the usage since then. */
  since: number;
  cpuNs: number;
  rx: number;
  tx: number;
  read: number;
  write: number;
  usage: FakeUsage;
}

/** What the stats of a container depend on. */
interface FakeStatsSubject {
  id: string;
  running: boolean;
  startedAt: number | undefined;
  memoryLimitMb: number | undefined;
}

function subjectOf(c: FakeContainer): FakeStatsSubject {
  return { id: c.id, running: c.state === "running", startedAt: c.startedAt, memoryLimitMb: c.spec.memoryMb };
}

export class FakeStats {
  private readonly counters = new Map<string, Counters>();

  constructor(
    private readonly hostOf: () => { cpus: number; memoryMb: number },
    private readonly now: () => number,
  ) {}

  private get host(): { cpus: number; memoryMb: number } {
    return this.hostOf();
  }

  /** A container's counters now (after `reach`, which throws when the engine is unreachable). */
  async read(container: FakeContainer | undefined, reach: () => void): Promise<ContainerStats | undefined> {
    reach();
    return container && this.sample(container);
  }

  private advance(c: Counters, at: number): void {
    const s = Math.max(0, at - c.since) / 1000;
    c.cpuNs += c.usage.cpuCores * s * 1e9;
    c.rx += c.usage.netRxPerS * s;
    c.tx += c.usage.netTxPerS * s;
    c.read += c.usage.blockReadPerS * s;
    c.write += c.usage.blockWritePerS * s;
    c.since = at;
  }

  private countersOf(subject: FakeStatsSubject): Counters {
    const startedAt = subject.startedAt ?? 0;
    let c = this.counters.get(subject.id);
    if (!c || c.startedAt !== startedAt) {
      const usage = c?.usage ?? DEFAULT_FAKE_USAGE;
      c = { startedAt, since: startedAt, cpuNs: 0, rx: 0, tx: 0, read: 0, write: 0, usage };
      this.counters.set(subject.id, c);
    }
    return c;
  }

  /** From now on the container uses this much (what is not named keeps its value). */
  setUsage(container: FakeContainer, usage: Partial<FakeUsage>): void {
    const c = this.countersOf(subjectOf(container));
    this.advance(c, this.now());
    c.usage = { ...c.usage, ...usage };
  }

  sample(container: FakeContainer): ContainerStats {
    const subject = subjectOf(container);
    const now = this.now();
    const limit = (subject.memoryLimitMb || this.host.memoryMb) * MiB;
    if (!subject.running) {
      // Docker answers zeros for a container that does not run.
      return {
        readAtMs: now,
        cpuTotalNs: 0,
        systemCpuNs: now * 1e6 * this.host.cpus,
        onlineCpus: this.host.cpus,
        memoryBytes: 0,
        memoryLimitBytes: 0,
        netRxBytes: 0,
        netTxBytes: 0,
        blockReadBytes: 0,
        blockWriteBytes: 0,
        pids: 0,
      };
    }
    const c = this.countersOf(subject);
    this.advance(c, now);
    return {
      readAtMs: now,
      cpuTotalNs: Math.round(c.cpuNs),
      systemCpuNs: now * 1e6 * this.host.cpus,
      onlineCpus: this.host.cpus,
      memoryBytes: Math.min(c.usage.memoryBytes, limit),
      memoryLimitBytes: limit,
      netRxBytes: Math.round(c.rx),
      netTxBytes: Math.round(c.tx),
      blockReadBytes: Math.round(c.read),
      blockWriteBytes: Math.round(c.write),
      pids: c.usage.pids,
    };
  }

  forget(id: string): void {
    this.counters.delete(id);
  }
}
