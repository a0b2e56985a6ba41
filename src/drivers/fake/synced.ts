// A fake engine whose containers can be kept in step with other copies of the same engine: the
// engine of a simulated node exists once per Berth replica, and nodes/simulated-engines.ts keeps the
// copies equal through the store. This file only knows how a container is written down and read
// back (`exportContainer`, `applyContainer`, `applyRemoval`) and tells which containers changed.
//
// Processes: a container's process runs in the replica that started it. Another replica's copy
// holds the container as running without a process; a stop or kill there takes the process over
// (`adopt`: started again without output, with its start time kept) and ends it, and the replica
// that ran it ends its own quietly when it reads the new state. When a replica ends, the processes
// it ran end with it and their containers stay running as recorded (the node goes on running them).

import type { HealthReport } from "../../domain/health.ts";
import type {
  ContainerState,
  KillContainerOptions,
  LogLine,
  StopContainerOptions,
  StopOutcome,
} from "../engine.ts";
import { FakeEngine } from "./fake-engine.ts";
import {
  type FakeContainer,
  type FakeEngineOptions,
  type ImageConfig,
  newFakeContainer,
} from "./fake-model.ts";

/** Log lines kept with a container's stored state (its copies in other replicas show these). */
export const SHARED_LOG_LINES = 1000;

/** A container as written down for other copies of its engine (JSON). */
export interface SimulatedContainerState {
  id: string;
  name: string;
  spec: FakeContainer["spec"];
  image: { id: string; config: ImageConfig; programs: string[] };
  env: Record<string, string>;
  hostname: string;
  hosts: string[];
  createdAt: number;
  state: ContainerState;
  exitCode: number | null;
  startedAt: number | null;
  finishedAt: number | null;
  ipAddress: string | null;
  ports: FakeContainer["ports"];
  restartCount: number;
  oomKilled: boolean;
  error: string;
  manuallyStopped: boolean;
  /** The last SHARED_LOG_LINES lines, and how many lines it printed in all. */
  logs: LogLine[];
  logTotal: number;
  /** Its health checks' last report, where its process runs (null: no check). */
  health: HealthReport | null;
}

export class SyncedFakeEngine extends FakeEngine {
  /** Told when a container changed here (not when a change read from another copy was applied). */
  onChange: ((id: string) => void) | undefined;
  /** Lines printed by each container in all (the logs keep only the last ones). */
  private readonly logTotals = new Map<string, number>();
  private applying = false;
  /** Starts refused after all by reclaim, until their start call answers. */
  private readonly refusals = new Map<string, unknown>();

  constructor(options: FakeEngineOptions = {}) {
    super({ ...options, maxLogLines: Math.min(options.maxLogLines ?? SHARED_LOG_LINES, SHARED_LOG_LINES) });
  }

  /** Whether anyone follows this engine's events or a container's logs (changes must reach them). */
  hasWatchers(): boolean {
    if (this.eventLog.watched) return true;
    for (const container of this.containers.values()) if (container.followers.size > 0) return true;
    return false;
  }

  containerIds(): string[] {
    return [...this.containers.keys()];
  }

  /** What the container holds on its node (its address and host ports), as the store claims them. */
  claimsOf(id: string): string[] {
    const c = this.containers.get(id);
    if (!c) this.refusals.delete(id);
    return c ? this.network.claimsOf(c) : [];
  }

  /**
   * Another copy's container holds values this one gave the container (both started on the node
   * at once): they are the other's from now on, and the container gets others, as if it had been
   * given them at its start. A host port it asked for by number is not for it then: its start
   * fails as Docker's does (the start call answers the error, `takeRefusal`).
   */
  reclaim(id: string, taken: readonly { claim: string; holder: string }[]): void {
    const c = this.containers.get(id);
    if (!c) return;
    this.network.release(c);
    for (const t of taken) this.network.reserve(t.claim, t.holder);
    if (c.state !== "running" && c.state !== "paused") return;
    try {
      c.ports = this.network.allocatePorts(c);
      c.ipAddress = this.network.allocateAddress();
    } catch (err) {
      this.network.release(c);
      this.quiet(c);
      if (c.restartTimer) clearTimeout(c.restartTimer);
      c.restartTimer = undefined;
      c.state = "exited";
      c.exitCode = 128;
      c.error = err instanceof Error ? err.message : String(err);
      c.finishedAt = this.now();
      for (const follower of c.followers) follower.end();
      c.followers.clear();
      this.refusals.set(id, err);
      this.eventLog.emit(c, "die", { exitCode: 128 });
    }
  }

  /** Why the container's last start was refused after all (reclaim), once. */
  takeRefusal(id: string): unknown {
    const err = this.refusals.get(id);
    this.refusals.delete(id);
    return err;
  }

  /** The container as stored, or undefined once it is removed. */
  exportContainer(id: string): SimulatedContainerState | undefined {
    const c = this.containers.get(id);
    if (!c) return undefined;
    return {
      id: c.id,
      name: c.name,
      spec: c.spec,
      image: { id: c.image.id, config: c.image.config, programs: [...c.image.programs] },
      env: c.env,
      hostname: c.hostname,
      hosts: c.hosts,
      createdAt: c.createdAt,
      state: c.state,
      exitCode: c.exitCode ?? null,
      startedAt: c.startedAt ?? null,
      finishedAt: c.finishedAt ?? null,
      ipAddress: c.ipAddress ?? null,
      ports: c.ports,
      restartCount: c.restartCount,
      oomKilled: c.oomKilled,
      error: c.error,
      manuallyStopped: c.manuallyStopped,
      logs: c.logs,
      logTotal: this.logTotals.get(c.id) ?? c.logs.length,
      health: c.health?.report() ?? null,
    };
  }

  /**
   * Makes this copy's container what another copy wrote: created, changed (its followers and event
   * subscribers told as Docker would tell them), its process here ended quietly when the state
   * read says it stopped or started again elsewhere.
   */
  applyContainer(s: SimulatedContainerState): void {
    this.applying = true;
    try {
      this.apply(s);
    } finally {
      this.applying = false;
    }
  }

  /** The container was removed in another copy. */
  applyRemoval(id: string): void {
    const c = this.containers.get(id);
    if (!c) return;
    this.applying = true;
    try {
      this.quiet(c);
      if (c.restartTimer) clearTimeout(c.restartTimer);
      c.restartTimer = undefined;
      this.network.release(c);
      for (const follower of c.followers) follower.end();
      c.followers.clear();
      this.containers.delete(id);
      this.stats.forget(id);
      this.logTotals.delete(id);
      this.eventLog.emit(c, "destroy");
    } finally {
      this.applying = false;
    }
  }

  override async stopContainer(id: string, options?: StopContainerOptions): Promise<StopOutcome> {
    const c = this.containers.get(id);
    if (c) this.processes.adopt(c);
    return super.stopContainer(id, options);
  }

  override async killContainer(id: string, options?: KillContainerOptions): Promise<void> {
    const c = this.containers.get(id);
    if (c) this.processes.adopt(c);
    return super.killContainer(id, options);
  }

  override async replaceHostEntries(id: string, entries: { remove: string[]; add: string[] }): Promise<void> {
    await super.replaceHostEntries(id, entries);
    this.changed(this.get(id));
  }

  protected override changed(container: FakeContainer, line?: LogLine): void {
    if (line)
      this.logTotals.set(container.id, (this.logTotals.get(container.id) ?? container.logs.length - 1) + 1);
    if (!this.applying) this.onChange?.(container.id);
  }

  /** Ends this copy's process of the container without recording its exit (another copy did). */
  private quiet(c: FakeContainer): void {
    const process = c.process;
    if (!process) return;
    c.health?.stop();
    c.process = undefined;
    c.stdin?.end();
    c.stdin = undefined;
    for (const exec of c.execs) exec.kill(137);
    c.execs.clear();
    process.kill(137);
  }

  private apply(s: SimulatedContainerState): void {
    let c = this.containers.get(s.id);
    const before = c ? { state: c.state, startedAt: c.startedAt } : undefined;
    const image = this.images.keep({
      id: s.image.id,
      config: s.image.config,
      programs: new Set(s.image.programs),
    });
    const running = s.state === "running" || s.state === "paused";
    if (c) {
      if (c.process && (!running || s.startedAt !== (c.startedAt ?? null))) this.quiet(c);
      if (c.restartTimer && s.state !== "restarting") {
        clearTimeout(c.restartTimer);
        c.restartTimer = undefined;
      }
      this.network.release(c);
    } else {
      c = newFakeContainer({
        id: s.id,
        name: s.name,
        spec: s.spec,
        image,
        env: s.env,
        hostname: s.hostname,
        hosts: s.hosts,
        createdAt: s.createdAt,
        state: s.state,
      });
      this.containers.set(c.id, c);
    }
    Object.assign(c, {
      name: s.name,
      spec: s.spec,
      image,
      env: s.env,
      hostname: s.hostname,
      hosts: s.hosts,
      state: s.state,
      exitCode: s.exitCode ?? undefined,
      startedAt: s.startedAt ?? undefined,
      finishedAt: s.finishedAt ?? undefined,
      ipAddress: s.ipAddress ?? undefined,
      ports: s.ports,
      restartCount: s.restartCount,
      oomKilled: s.oomKilled,
      error: s.error,
      manuallyStopped: s.manuallyStopped,
    });
    if (running) this.network.claim(c);
    this.applyLogs(c, s);
    this.applyHealth(c, s);
    if (!before) this.eventLog.emit(c, "create");
    const wasRunning = before?.state === "running" || before?.state === "paused";
    if (running && (!wasRunning || before?.startedAt !== c.startedAt)) this.eventLog.emit(c, "start");
    if (wasRunning && !running && before?.startedAt === c.startedAt) {
      if (c.oomKilled) this.eventLog.emit(c, "oom");
      this.eventLog.emit(c, "die", c.exitCode === undefined ? {} : { exitCode: c.exitCode });
    }
    if (!running) {
      for (const follower of c.followers) follower.end();
      c.followers.clear();
    }
  }

  /** The health its checks report where its process runs (they run there, not here). */
  private applyHealth(c: FakeContainer, s: SimulatedContainerState): void {
    if (c.process) return;
    const before = c.health?.report().status;
    const report = s.health;
    // A report without checks of its own: what report() and stop() of a monitor answer.
    c.health = report
      ? ({ report: () => report, stop: () => {} } as unknown as FakeContainer["health"])
      : undefined;
    if (report && report.status !== before) this.eventLog.emit(c, "health_status");
  }

  /** New lines reach this copy's followers; a container whose process runs here keeps its own lines. */
  private applyLogs(c: FakeContainer, s: SimulatedContainerState): void {
    if (c.process) return;
    const known = this.logTotals.get(c.id) ?? 0;
    const fresh = Math.min(Math.max(0, s.logTotal - known), s.logs.length);
    c.logs = [...s.logs];
    this.logTotals.set(c.id, s.logTotal);
    if (fresh === 0) return;
    for (const line of s.logs.slice(-fresh)) for (const follower of c.followers) follower.push(line);
  }
}

/** Whether an engine can be kept in step with its other copies. */
export function isSynced(engine: unknown): engine is SyncedFakeEngine {
  return engine instanceof SyncedFakeEngine;
}
