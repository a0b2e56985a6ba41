// Asking a node's engine who it is, within a timeout, and recording the answer: engine facts and
// Deployed when it answers, Unreachable when it has been silent past the grace. The health
// watcher, agent tunnels, health-check calls and the action kinds probe through it.
import type { Clock } from "../domain/time.ts";
import { ENGINE_TIMEOUTS_MS } from "../drivers/bounds.ts";
import type { EngineInfo } from "../drivers/engine.ts";
import { Turns } from "../pace.ts";
import type { NewNode, NodeRow } from "../store/nodes.ts";
import type { Store } from "../store/store.ts";
import type { EngineAddress, EngineSource } from "./provisioners.ts";

export interface NodeProbeOptions {
  store: Store;
  engines: EngineSource;
  clock: Clock;
  /** A node whose engine has not answered for this long becomes Unreachable. */
  unreachableGraceMs: number;
  probeTimeoutMs?: number;
  /** Told why a node's engine did not answer, when the node becomes Unreachable for it. */
  onUnreachable?(uuid: string, reason: string): void;
}

/** The node fields an engine's answer sets (and clears its silence). */
export function engineFields(info: EngineInfo, now: number): Partial<NewNode> {
  return {
    engine_id: info.id,
    engine_version: info.engineVersion,
    engine_graphdriver: info.storageDriver,
    engine_execdriver: info.execDriver,
    cpu: info.cpus,
    memory: info.memoryMb,
    ...(info.diskGb !== undefined ? { disk: info.diskGb } : {}),
    last_seen: now,
    unreachable_since: null,
  };
}

/**
 * How stale a recorded `last_seen` may grow while a node keeps answering and nothing else about it
 * changes. The health watcher probes every node every few seconds; recording each answer wrote
 * every node's row, added a change-feed entry (an `update` event of each node every 5 s) and moved
 * its namespace's revision, so at 1,000 nodes ~200 writes a second kept every cached answer of the
 * namespace from being reused. The silence that makes a node Unreachable is counted from the last
 * answer this process heard (`lastHeard`), not from the recorded `last_seen`.
 */
export const LAST_SEEN_RESOLUTION_MS = 60_000;

/**
 * Store work of the probes a sweep runs at once (issue 34, item 4): a replica that takes over 300
 * nodes probes them all together, and their reads and writes took every connection of the pool
 * for seconds (the API's requests then answered 429 database_busy). Engine calls still run
 * together; only this many probes read or write the store at a time. A probe someone asked for
 * (`immediate`) never waits for them.
 */
export const SWEEP_STORE_WORK = 4;

export class NodeProbe {
  /** When each node's engine last answered this process. */
  private readonly lastHeard = new Map<string, number>();
  /** Why each node's engine last failed to answer (dropped once it answers). */
  private readonly failures = new Map<string, string>();

  /**
   * Silence counts only while this process could hear it: after Berth itself was down (a restart,
   * a restore), a node's `last_seen` is old through no fault of its own.
   */
  private readonly listeningSince: number;
  private readonly sweepTurns = new Turns(SWEEP_STORE_WORK);

  constructor(private readonly o: NodeProbeOptions) {
    this.listeningSince = o.clock.now();
  }

  /**
   * Asks the node's engine who it is, within the probe timeout. The call itself is ended at the
   * timeout (not merely no longer awaited): an engine that answers slowly or without end must not
   * keep one call per sweep reading its answer.
   */
  async engineInfo(node: EngineAddress): Promise<EngineInfo> {
    const engine = this.o.engines.forNode(node);
    const timeoutMs = this.o.probeTimeoutMs ?? ENGINE_TIMEOUTS_MS.probe;
    const call = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        engine.info({ signal: call.signal }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
    } finally {
      clearTimeout(timer);
      call.abort();
    }
  }

  /** Why the node's engine did not answer the last probe; undefined when it answered. */
  lastFailure(uuid: string): string | undefined {
    return this.failures.get(uuid);
  }

  /**
   * Probes a node and records what it found: Deployed with fresh engine facts when the engine
   * answers, Unreachable otherwise (at once when `immediate`, else after the grace period).
   */
  async probe(uuid: string, opts: { immediate: boolean }): Promise<NodeRow | undefined> {
    const turn = <T>(work: () => Promise<T>): Promise<T> =>
      opts.immediate ? work() : this.sweepTurns.run(work);
    const node = await turn(() => this.o.store.nodes.knownNode(uuid));
    if (!node?.engine_url) return node;
    const now = this.o.clock.now();
    // An agent's node is Deploying until Berth first reaches its engine through the tunnel. It
    // joins without an action, so the probe's first verdict ends its deploying phase (the one
    // phase a health check writes).
    const joining = (n: NodeRow) => n.state === "Deploying" && n.engine_url.startsWith("tunnel://");
    try {
      const info = await this.engineInfo(node);
      this.lastHeard.set(uuid, now);
      this.failures.delete(uuid);
      if (this.forgoes(node, info, now, opts)) return node;
      // Not awaited here: a store error is not the engine's silence.
      return turn(() =>
        this.o.store.mutate("node", uuid, (n) => {
          if (n.state !== "Deployed" && n.state !== "Unreachable" && !joining(n)) return undefined;
          // Two sweeps (or replicas) that probed at once both saw the old row: the second finds the
          // first's write and adds neither a write nor an update event of its own.
          if (this.forgoes(n, info, now, opts)) return undefined;
          return {
            ...engineFields(info, now),
            observed: "reachable" as const,
            ...(joining(n) ? { phase: null } : {}),
            ...(n.deployed_at === null ? { deployed_at: now } : {}),
          };
        }),
      );
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      this.failures.set(uuid, reason);
      let turned = false;
      const row = await turn(() =>
        this.o.store.mutate("node", uuid, (n) => {
          if (n.state === "Unreachable") return undefined;
          if (n.state !== "Deployed" && !joining(n)) return undefined;
          const since = n.unreachable_since ?? now;
          const heard = Math.max(this.lastHeard.get(uuid) ?? 0, n.last_seen ?? 0);
          const silentSince = Math.max(heard || since, this.listeningSince);
          const lapsed = opts.immediate || now - silentSince >= this.o.unreachableGraceMs;
          if (!lapsed) return n.unreachable_since === null ? { unreachable_since: since } : undefined;
          // A joining agent's node whose engine went silent is no longer being brought up. Its
          // last_seen becomes the last answer heard (recorded only now and then while it answered).
          turned = true;
          return {
            observed: "unreachable" as const,
            unreachable_since: since,
            ...(heard > (n.last_seen ?? 0) ? { last_seen: heard } : {}),
            ...(joining(n) ? { phase: null } : {}),
          };
        }),
      );
      if (turned) this.o.onUnreachable?.(uuid, reason);
      return row;
    }
  }

  /**
   * Whether an answer changes nothing worth a write: a Deployed node, reachable as recorded, whose
   * engine facts are as recorded and whose last_seen is within LAST_SEEN_RESOLUTION_MS. A probe
   * someone asked for (`immediate`: a health-check, a deploy, an agent's tunnel) always records.
   */
  private forgoes(n: NodeRow, info: EngineInfo, now: number, opts: { immediate: boolean }): boolean {
    if (opts.immediate || n.state !== "Deployed" || n.observed !== "reachable") return false;
    if (n.unreachable_since !== null || n.deployed_at === null || n.last_seen === null) return false;
    if (now - n.last_seen >= LAST_SEEN_RESOLUTION_MS) return false;
    // What the answer would write (last_seen and the silence aside) is what the row holds.
    const recorded = n as unknown as Record<string, unknown>;
    return Object.entries(engineFields(info, now)).every(
      ([k, v]) => k === "last_seen" || k === "unreachable_since" || recorded[k] === v,
    );
  }
}
