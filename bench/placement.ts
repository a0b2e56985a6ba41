// Placement at scale: `services` services of `perService` containers each, started at once on
// `nodes` simulated nodes (fake engines, no delay). Reported: placements per second from the
// first start call until every container runs and every action has ended, with the actions'
// outcomes; the SQL statements and transactions it took; and the list latency and memory once
// everything runs. A time cap reports how far it got instead of waiting forever.
// Memory: the simulated engines live in this process. Each fake container keeps its spec, its
// state and a sleeping fake process; identical extra-hosts lists (one entry per node of the
// namespace, CONTRACT §13) are shared between fake containers, as a real engine keeps them on
// its own disk. What remains is mostly Berth's (records read in batches, caches, Fastify).
import fs from "node:fs";
import { Session } from "node:inspector/promises";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { fmtMs, formatLoad, percentile, runLoad } from "./load.ts";
import {
  ADMIN_AUTH,
  api,
  type Bench,
  must,
  rssMb,
  SERVICE_BODY,
  seedNodes,
  sleep,
  startBerth,
} from "./support.ts";

export interface PlacementOptions {
  nodes: number;
  services: number;
  perService: number;
  capMs: number;
}

export async function runPlacement(opts: PlacementOptions, out: (line: string) => void): Promise<void> {
  const b = await startBerth({ start: true, env: { BERTH_RECONCILE_INTERVAL_MS: "15000" } });
  try {
    await seedNodes(b, "admin", opts.nodes);
    // As in a running installation, the reconciler watches every node's engine events (its
    // watchers start with a pass; the periodic one is at 15 s, after the placement).
    await b.platform.reconciler.resync();
    const services: string[] = [];
    for (let i = 0; i < opts.services; i++) {
      const s = await must(
        api<{ uuid: string }>(
          b,
          "POST",
          "/api/app/v1/service/",
          SERVICE_BODY(`place-${i}`, { target_num_containers: opts.perService }),
        ),
        "create service",
      );
      services.push(s.uuid);
    }
    const total = opts.services * opts.perService;
    const rss0 = rssMb();
    const statements0 = b.platform.db.statements.count;
    const transactions0 = b.platform.db.statements.transactions;
    const profile = await startProfile(b, process.env.BERTH_BENCH_CPU_PROFILE, out);
    const cpu0 = process.cpuUsage();
    const elu0 = performance.eventLoopUtilization();
    // What an API client sees meanwhile: a GET of one service every 100 ms, over HTTP.
    const poll = pollWhile(`${b.base}/api/app/v1/service/${services[0]}/`);
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    const t0 = performance.now();
    const actions: string[] = [];
    for (const uuid of services) {
      const r = await api(b, "POST", `/api/app/v1/service/${uuid}/start/`);
      if (r.status !== 202) throw new Error(`start: ${r.status} ${JSON.stringify(r.body)}`);
      actions.push(String(r.headers["x-platform-action-uri"]).split("/").filter(Boolean).at(-1)!);
    }
    const answeredMs = performance.now() - t0;
    let running = 0;
    let ended: string[] = [];
    // The bench's own polling is counted in the figures below: one statement a poll for the
    // actions' states, and the count of running containers once they have ended.
    for (;;) {
      const rows = await b.platform.db.kysely
        .selectFrom("actions")
        .select("state")
        .where("uuid", "in", actions)
        .execute();
      ended = rows.filter((a) => ["Success", "Failed", "Canceled"].includes(a.state)).map((a) => a.state);
      if (ended.length === actions.length || performance.now() - t0 > opts.capMs) break;
      await sleep(200);
    }
    running = (
      await b.platform.store.services.listContainers({
        namespace: "admin",
        state: "Running",
        limit: 1,
        offset: 0,
      })
    ).total;
    const elapsedS = (performance.now() - t0) / 1000;
    const polled = await poll.stop();
    loopDelay.disable();
    // CPU time of this process (Berth and the simulated engines): a figure a loaded machine
    // disturbs far less than the elapsed time, which waits for the CPU when others hold it.
    const cpu = process.cpuUsage(cpu0);
    // The event loop's busy time: Berth's one thread (the simulated engines run on it too), which
    // bounds the placement when it is saturated; CPU time counts the helper threads too (GC, the
    // SQLite checkpointer).
    const elu = performance.eventLoopUtilization(elu0);
    const cpuS = (cpu.user + cpu.system) / 1e6;
    await profile?.();
    // The store's work of the whole run (the bench's own polling included).
    const statements = b.platform.db.statements.count - statements0;
    const transactions = b.platform.db.statements.transactions - transactions0;
    const counts = new Map<string, number>();
    for (const state of ended) counts.set(state, (counts.get(state) ?? 0) + 1);
    const outcome = [...counts].map(([state, n]) => `${n} ${state}`).join(", ");
    out(
      `placement: ${total} containers (${opts.services} services × ${opts.perService}) onto ${opts.nodes} simulated nodes, started at once`,
    );
    out(
      `  ${running} Running after ${elapsedS.toFixed(1)} s: ${Math.round(running / elapsedS)} placements/s; start calls answered in ${answeredMs.toFixed(0)} ms; actions: ${outcome || "none ended"}${ended.length < actions.length ? ` (cap of ${opts.capMs / 1000} s reached, ${actions.length - ended.length} still running)` : ""}`,
    );
    out(
      `  CPU ${cpuS.toFixed(1)} s (${((cpuS * 1e6) / total).toFixed(0)} µs per container): ${Math.round(total / cpuS)} placements per CPU second; event loop busy ${(elu.active / 1000).toFixed(2)} s (${((elu.active * 1000) / total).toFixed(0)} µs per container, ${(elu.utilization * 100).toFixed(0)}% of the time)`,
    );
    out(
      `  store: ${statements} SQL statements (${(statements / total).toFixed(2)} per container), ${transactions} transactions (${(transactions / total).toFixed(3)} per container)`,
    );
    out(
      `  GET one service every 100 ms meanwhile: ${polled.length} answered, p50 ${fmtMs(percentile(polled, 0.5))} ms, p99 ${fmtMs(percentile(polled, 0.99))} ms, max ${fmtMs(polled.at(-1) ?? 0)} ms; event loop delay p99 ${fmtMs(loopDelay.percentile(99) / 1e6)} ms, max ${fmtMs(loopDelay.max / 1e6)} ms`,
    );
    out(`  RSS ${rss0} MB before, ${rssMb()} MB after`);
    const list = await runLoad({
      url: `${b.base}/api/app/v1/container/?limit=100`,
      headers: { authorization: ADMIN_AUTH },
      connections: 10,
      durationMs: 3000,
    });
    out(`  list of 100 containers at 10 connections: ${formatLoad(list)}`);
  } finally {
    await b.close();
  }
}

/**
 * With BERTH_BENCH_CPU_PROFILE=<file>: a CPU profile of the placement alone (from the first start
 * call until every action ended), for Chrome DevTools or `node --cpu-prof`'s readers.
 */
async function startProfile(
  b: Bench,
  file: string | undefined,
  out: (line: string) => void,
): Promise<(() => Promise<void>) | undefined> {
  if (!file) return undefined;
  // The statements by time spent in them (SQL text up to its first 100 characters).
  const bySql = new Map<string, { n: number; ms: number }>();
  const counter = b.platform.db.statements;
  const record = counter.record.bind(counter);
  counter.record = (event) => {
    record(event);
    const key = event.query.sql.slice(0, 100);
    const t = bySql.get(key) ?? { n: 0, ms: 0 };
    t.n += 1;
    t.ms += event.queryDurationMillis;
    bySql.set(key, t);
  };
  const session = new Session();
  session.connect();
  // BERTH_BENCH_ALLOCATIONS=1: a sampled profile of what is allocated (collected objects too) instead.
  const allocations = process.env.BERTH_BENCH_ALLOCATIONS === "1";
  if (allocations) {
    await session.post("HeapProfiler.enable");
    await session.post("HeapProfiler.startSampling", {
      samplingInterval: 32768,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  } else {
    await session.post("Profiler.enable");
    await session.post("Profiler.start");
  }
  return async () => {
    const profile = allocations
      ? (await session.post("HeapProfiler.stopSampling")).profile
      : (await session.post("Profiler.stop")).profile;
    fs.writeFileSync(file, JSON.stringify(profile));
    session.disconnect();
    counter.record = record;
    out(`  CPU profile of the placement written to ${file}; statements by time:`);
    for (const [sql, t] of [...bySql].sort((x, y) => y[1].ms - x[1].ms).slice(0, 15))
      out(`    ${t.ms.toFixed(0).padStart(6)} ms ${String(t.n).padStart(6)}×  ${sql}`);
  };
}

/** GETs `url` every 100 ms until stopped; answers the latencies of those that succeeded, sorted. */
function pollWhile(url: string): { stop(): Promise<number[]> } {
  const latencies: number[] = [];
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      const t0 = performance.now();
      const res = await fetch(url, { headers: { authorization: ADMIN_AUTH } }).catch(() => undefined);
      await res?.arrayBuffer();
      if (res?.ok) latencies.push(performance.now() - t0);
      await sleep(100);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await done;
      return latencies.sort((a, b) => a - b);
    },
  };
}
