// Stats (issue 32): the collector of this replica's nodes, the reader of series (REST and live
// streams), the stats routes and the per-namespace figures of /metrics.
import { statsRoutes } from "../api/routes/stats.ts";
import type { Core, Routes } from "../composition.ts";
import type { Duties } from "../domain/duties.ts";
import type { Retention } from "../domain/stats.ts";
import type { EngineSource } from "../nodes/provisioners.ts";
import { statsOf } from "../store/stats.ts";
import { StatsCollector } from "./collector.ts";
import { StatsReader } from "./reader.ts";

export function statsModule(core: Core, parts: { engines: EngineSource; duties: Duties }) {
  const { config, store, clock } = core;
  const retention: Retention = {
    // Collection may be off (0); series still read at the interval they would have.
    fineStepMs: config.stats.intervalMs || 10_000,
    fineKeepMs: config.stats.fineKeepMs,
    coarseStepMs: config.stats.coarseStepMs,
    coarseKeepMs: config.stats.coarseKeepMs,
  };
  const reader = new StatsReader({ store, clock, retention, onError: core.onError("stats streams") });
  /** Told after each round's points are written (the alert pass, which reads them). */
  const afterRound: Array<() => void> = [];
  const collector = new StatsCollector({
    store,
    engines: parts.engines,
    clock,
    duties: parts.duties,
    settings: { ...retention, ...config.stats },
    onError: core.onError("stats collector"),
    onRound: () => {
      reader.roundWritten();
      for (const listener of afterRound) listener();
    },
  });
  core.metrics.attachUsage(() =>
    statsOf(store).usageByNamespace(retention.fineStepMs, clock.now() - 3 * retention.fineStepMs),
  );
  const routes: Routes = [(a) => statsRoutes(a, { store, stats: reader })];
  return {
    collector,
    reader,
    retention,
    routes,
    /** Calls `listener` after each collection round of this replica. */
    afterRound(listener: () => void): void {
      afterRound.push(listener);
    },
    start(): void {
      if (config.stats.intervalMs > 0) collector.start();
    },
    stop(): void {
      collector.stop();
      reader.close();
    },
  };
}
