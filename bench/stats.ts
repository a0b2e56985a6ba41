// `npm run bench -- stats`: the control plane's cost of collecting stats (issue 32) for many
// simulated nodes and containers: one collector round per simulated interval over every node
// (bounded calls per node), each container's sample parsed from a Docker-shaped stats answer as
// the driver parses it, the points written to the store; then the minute roll-up and pruning.
// Engines are simulated at the Engine boundary (no sockets): the figure is Berth's own CPU and
// memory per round, as a share of one core at the default 10 s interval.

import { SOLO_DUTIES } from "../src/domain/duties.ts";
import { containerStats } from "../src/drivers/docker/stats.ts";
import type { Engine } from "../src/drivers/engine.ts";
import { StatsCollector } from "../src/stats/collector.ts";
import { api, must, rssMb, SERVICE_BODY, seedContainers, seedNodes, startBerth } from "./support.ts";

/** A Docker-shaped stats answer whose counters grow with the clock (a quarter of a core, 64 MiB). */
function answer(now: number, id: string): string {
  const seed = id.charCodeAt(0) % 7;
  return JSON.stringify({
    read: new Date(now).toISOString(),
    pids_stats: { current: 3 + seed },
    cpu_stats: {
      cpu_usage: { total_usage: now * 250_000 * (1 + seed / 10), percpu_usage: [1, 2] },
      system_cpu_usage: now * 2_000_000,
      online_cpus: 2,
    },
    memory_stats: {
      usage: 70 * 1024 * 1024,
      limit: 512 * 1024 * 1024,
      stats: { inactive_file: 6 * 1024 * 1024 },
    },
    networks: { eth0: { rx_bytes: now % 1e9, tx_bytes: (now / 2) % 1e9 } },
    blkio_stats: {
      io_service_bytes_recursive: [
        { op: "read", value: 4096 },
        { op: "write", value: now % 1e6 },
      ],
    },
  });
}

export async function runStats(
  opts: { nodes: number; containers: number; rounds: number; intervalMs: number },
  out: (line: string) => void,
): Promise<void> {
  const b = await startBerth();
  try {
    const nodes = await seedNodes(b, "admin", opts.nodes);
    const perService = 100;
    for (let i = 0; i * perService < opts.containers; i++) {
      const s = await must(
        api<{ uuid: string }>(b, "POST", "/api/app/v1/service/", SERVICE_BODY(`m-${i}`)),
        "create",
      );
      await seedContainers(
        b,
        { ...s, namespace: "admin", name: `m-${i}` },
        nodes,
        Math.min(perService, opts.containers - i * perService),
      );
    }
    let now = Date.now();
    const clock = { now: () => now };
    const engine = {
      containerStats: async (id: string) => containerStats(JSON.parse(answer(clock.now(), id))),
    } as unknown as Engine;
    const collector = new StatsCollector({
      store: b.platform.store,
      engines: { forNode: () => engine },
      clock,
      duties: SOLO_DUTIES,
      settings: {
        fineStepMs: opts.intervalMs,
        fineKeepMs: 3_600_000,
        coarseStepMs: 60_000,
        coarseKeepMs: 86_400_000,
        nodeConcurrency: 16,
        callsPerNode: 4,
      },
      onError: (err) => {
        throw err;
      },
    });
    if (global.gc) global.gc();
    const rss0 = rssMb();
    const heap0 = process.memoryUsage().heapUsed;
    let cpuMs = 0;
    let wallMs = 0;
    let written = 0;
    for (let r = 0; r < opts.rounds; r++) {
      now += opts.intervalMs;
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      const round = await collector.collect();
      await collector.maintain();
      wallMs += performance.now() - t0;
      const c = process.cpuUsage(c0);
      cpuMs += (c.user + c.system) / 1000;
      written = round.containers + round.nodes;
    }
    const perRound = cpuMs / opts.rounds;
    out(
      `stats collection: ${opts.nodes} simulated nodes, ${opts.containers} containers, ${opts.rounds} rounds at ${opts.intervalMs / 1000} s`,
    );
    out(
      `  per round: ${perRound.toFixed(0)} ms CPU (${(wallMs / opts.rounds).toFixed(0)} ms wall), ${written} points written` +
        ` = ${((perRound / opts.intervalMs) * 100).toFixed(1)} % of one core`,
    );
    out(
      `  memory: RSS ${rss0} → ${rssMb()} MB, heap +${((process.memoryUsage().heapUsed - heap0) / 1024 / 1024).toFixed(0)} MB (previous samples of every container)`,
    );
  } finally {
    await b.close();
  }
}
