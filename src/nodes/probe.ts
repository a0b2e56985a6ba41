// Asking a node's engine who it is, within a timeout, and recording the answer: engine facts and
// Deployed when it answers, Unreachable when it has been silent past the grace. The health
// watcher, agent tunnels, health-check calls and the action kinds probe through it.
import type { Clock } from "../domain/time.ts";
import type { EngineInfo } from "../drivers/engine.ts";
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

export class NodeProbe {
  /**
   * Silence counts only while this process could hear it: after Berth itself was down (a restart,
   * a restore), a node's `last_seen` is old through no fault of its own.
   */
  private readonly listeningSince: number;

  constructor(private readonly o: NodeProbeOptions) {
    this.listeningSince = o.clock.now();
  }

  /** Asks the node's engine who it is, within the probe timeout. */
  async engineInfo(node: EngineAddress): Promise<EngineInfo> {
    const engine = this.o.engines.forNode(node);
    const timeoutMs = this.o.probeTimeoutMs ?? 4000;
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        engine.info(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Probes a node and records what it found: Deployed with fresh engine facts when the engine
   * answers, Unreachable otherwise (at once when `immediate`, else after the grace period).
   */
  async probe(uuid: string, opts: { immediate: boolean }): Promise<NodeRow | undefined> {
    const node = await this.o.store.nodes.findNode(uuid);
    if (!node?.engine_url) return node;
    const now = this.o.clock.now();
    // An agent's node is Deploying until Berth first reaches its engine through the tunnel. It
    // joins without an action, so the probe's first verdict ends its deploying phase (the one
    // phase a health check writes).
    const joining = (n: NodeRow) => n.state === "Deploying" && n.engine_url.startsWith("tunnel://");
    try {
      const info = await this.engineInfo(node);
      return this.o.store.mutate("node", uuid, (n) => {
        if (n.state !== "Deployed" && n.state !== "Unreachable" && !joining(n)) return undefined;
        return {
          ...engineFields(info, now),
          observed: "reachable" as const,
          ...(joining(n) ? { phase: null } : {}),
          ...(n.deployed_at === null ? { deployed_at: now } : {}),
        };
      });
    } catch {
      return this.o.store.mutate("node", uuid, (n) => {
        if (n.state === "Unreachable") return undefined;
        if (n.state !== "Deployed" && !joining(n)) return undefined;
        const since = n.unreachable_since ?? now;
        const silentSince = Math.max(n.last_seen ?? since, this.listeningSince);
        const lapsed = opts.immediate || now - silentSince >= this.o.unreachableGraceMs;
        if (!lapsed) return { unreachable_since: since };
        // A joining agent's node whose engine went silent is no longer being brought up.
        return {
          observed: "unreachable" as const,
          unreachable_since: since,
          ...(joining(n) ? { phase: null } : {}),
        };
      });
    }
  }
}
