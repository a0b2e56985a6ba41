// The stats collector (issue 32): at every interval, one round over the nodes this replica owns
// (duties.ownsNode), a bounded number of nodes at a time and a bounded number of engine calls per
// node at a time; never a stream per container. Each running container is asked for one one-shot
// sample (drivers' containerStats); CPU and rates come from this sample and the one before, exactly
// as `docker stats` computes them (domain/stats.ts). Restart counts are the store's (the runtime
// writes them as the engine's events report restarts), read with the containers at every round at
// no engine cost, so a crash loop shows in the next round's points. Each round writes one point per container and per node, all at the round's time (a
// multiple of the interval), in a few multi-row inserts. The replica leading `alerts` also rolls
// the fine series up into minutes and prunes both series past their retention.

import type { Duties } from "../domain/duties.ts";
import { containerPoint, type Retention, type StatPoint, sumPoints } from "../domain/stats.ts";
import type { Clock } from "../domain/time.ts";
import type { ContainerStats } from "../drivers/engine-stats.ts";
import type { EngineSource } from "../nodes/provisioners.ts";
import { eachLimited, turnPacer } from "../pace.ts";
import type { SampledContainer, StatRow } from "../store/stats.ts";
import { MAX_SLICES, MIN_SLICES, statsOf } from "../store/stats.ts";
import type { Store } from "../store/store.ts";
import type { NodeRow } from "../store/types.ts";

export interface StatsSettings extends Retention {
  /** Nodes sampled at the same time. */
  nodeConcurrency: number;
  /** Engine calls in flight per node. */
  callsPerNode: number;
}

export interface CollectorDeps {
  store: Store;
  engines: EngineSource;
  clock: Clock;
  duties: Duties;
  settings: StatsSettings;
  onError(err: unknown): void;
  /** Told of the points of each round once written (live streams of this replica). */
  onRound?(at: number): void;
}

interface Previous {
  engineId: string;
  sample: ContainerStats;
}

const ROLLED_TO = "stats_rolled_to";
/** The longest a maintenance statement should hold the event loop (ms). */
const SLICE_MS = 8;
/**
 * Containers whose points one roll-up or prune statement may take: a minute's roll-up costs some
 * 30 µs of the loop per container (16 slices of 30,000 containers held it 57 ms a statement).
 */
const CONTAINERS_PER_SLICE = 250;
/** Nodes whose sampled containers are read in one statement (a few thousand rows). */
const NODES_PER_READ = 50;

export class StatsCollector {
  private readonly previous = new Map<string, Previous>();
  /** Uuid slices of the next roll-up and prunes (store/stats.ts uuidSlices), adapted to their cost. */
  private slices = MIN_SLICES;
  /** Containers sampled in the last round: the slices are never fewer than they need. */
  private sampled = 0;
  private timer: NodeJS.Timeout | undefined;
  private busy = false;

  constructor(private readonly deps: CollectorDeps) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.tick(), this.deps.settings.fineStepMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One round, unless the last one still runs (a slow round is skipped, never stacked). */
  async tick(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      await this.collect();
      if (this.deps.duties.leads("alerts")) await this.maintain();
    } catch (err) {
      this.deps.onError(err);
    } finally {
      this.busy = false;
    }
  }

  /** Samples every owned node once and writes the round's points; answers what it sampled. */
  async collect(): Promise<{ at: number; nodes: number; containers: number }> {
    const { store, clock, duties, settings } = this.deps;
    const at = Math.floor(clock.now() / settings.fineStepMs) * settings.fineStepMs;
    const nodes = (await store.nodes.liveNodes()).filter(
      (n) => n.state === "Deployed" && n.engine_url && duties.ownsNode(n.uuid),
    );
    // Simulated engines answer without waiting: a round over 150,000 of their containers would be
    // one chain of microtasks holding the event loop for seconds, so the loop is given back often.
    const pace = turnPacer();
    const containers: SampledContainer[] = [];
    for (let i = 0; i < nodes.length; i += NODES_PER_READ) {
      const part = nodes.slice(i, i + NODES_PER_READ).map((n) => n.uuid);
      containers.push(...(await statsOf(store).sampledContainers(part)));
      await pace();
    }
    const byNode = new Map<string, typeof containers>();
    for (const c of containers) {
      const list = byNode.get(c.node_uuid) ?? [];
      list.push(c);
      byNode.set(c.node_uuid, list);
    }
    const rows: StatRow[] = [];
    const seen = new Set<string>();
    await eachLimited(nodes, settings.nodeConcurrency, async (node) => {
      const points = await this.sampleNode(node, byNode.get(node.uuid) ?? [], at, seen, pace);
      rows.push(...points);
    });
    // Containers that no longer run start over when they run again.
    for (const uuid of this.previous.keys()) if (!seen.has(uuid)) this.previous.delete(uuid);
    await statsOf(store).insertPoints(rows);
    this.sampled = rows.length - nodes.length;
    this.deps.onRound?.(at);
    return { at, nodes: nodes.length, containers: rows.length - nodes.length };
  }

  private async sampleNode(
    node: NodeRow,
    containers: SampledContainer[],
    at: number,
    seen: Set<string>,
    pace: () => Promise<void> | undefined,
  ): Promise<StatRow[]> {
    const { engines, settings } = this.deps;
    const engine = engines.forNode(node);
    const rows: StatRow[] = [];
    const points: StatPoint[] = [];
    let failed: unknown;
    await eachLimited(containers, settings.callsPerNode, async (c) => {
      // Every lane waiting for the turn resumes at once: each asks again before it samples.
      for (let wait = pace(); wait; wait = pace()) await wait;
      if (failed || !c.engine_id) return;
      try {
        const sample = await engine.containerStats(c.engine_id);
        if (!sample) return;
        seen.add(c.uuid);
        const prev = this.previous.get(c.uuid);
        const usable = prev && prev.engineId === c.engine_id && prev.sample.readAtMs < sample.readAtMs;
        const p = containerPoint(at, sample, usable ? prev.sample : undefined, c.restart_count);
        this.previous.set(c.uuid, { engineId: c.engine_id, sample });
        points.push(p);
        rows.push({
          kind: "container",
          uuid: c.uuid,
          namespace: c.namespace,
          service_uuid: c.service_uuid,
          node_uuid: node.uuid,
          step: settings.fineStepMs,
          ...p,
        });
      } catch (err) {
        // An unreachable node is the health checks' to report; its round is given up.
        failed = err;
      }
    });
    if (failed && !points.length) return [];
    const own = {
      cpus: node.cpu || Math.max(0, ...points.map((p) => p.cpus)),
      memory_limit: node.memory * 1024 * 1024,
    };
    const sum = sumPoints(at, points, own);
    rows.push({
      kind: "node",
      uuid: node.uuid,
      namespace: node.namespace,
      service_uuid: null,
      node_uuid: node.uuid,
      step: settings.fineStepMs,
      ...sum,
    });
    return rows;
  }

  /** Rolls whole minutes up and prunes what is past retention (the `alerts` leader only). */
  async maintain(): Promise<void> {
    const { store, clock, settings } = this.deps;
    const now = clock.now();
    const coarse = settings.coarseStepMs;
    // The last whole coarse step that no round will still write into.
    const to = Math.floor((now - settings.fineStepMs) / coarse) * coarse;
    const stored = await store.replicas.findFact(ROLLED_TO);
    const from = Math.max(stored === undefined ? 0 : Number(stored), now - settings.fineKeepMs);
    const stats = statsOf(store);
    // As many slices as the last round's containers need from the first statement on: adapting
    // alone doubles them only after a statement has held the loop too long, once per doubling.
    this.slices = Math.max(this.slices, slicesFor(this.sampled));
    let longest = 0;
    if (to > from) {
      const start = Math.floor(from / coarse) * coarse;
      longest = await stats.rollUp(settings.fineStepMs, coarse, start, to, this.slices);
      await store.replicas.putFact(ROLLED_TO, String(to));
    }
    longest = Math.max(
      longest,
      await stats.prune(settings.fineStepMs, now - settings.fineKeepMs, this.slices),
      await stats.prune(coarse, now - settings.coarseKeepMs, this.slices),
    );
    // Slices as fine as keep each statement within a few ms of the loop (a minute's roll-up over
    // 30,000 containers in 16 slices held it 57 ms a statement), and no finer.
    if (longest > SLICE_MS) this.slices = Math.min(MAX_SLICES, this.slices * 2);
    else if (longest < SLICE_MS / 4) this.slices = Math.max(MIN_SLICES, this.slices / 2);
  }
}

/** The fewest uuid slices (a power of two within MIN_SLICES and MAX_SLICES) for this many containers. */
export function slicesFor(containers: number): number {
  const wanted = 2 ** Math.ceil(Math.log2(Math.max(1, containers / CONTAINERS_PER_SLICE)));
  return Math.min(MAX_SLICES, Math.max(MIN_SLICES, wanted));
}
