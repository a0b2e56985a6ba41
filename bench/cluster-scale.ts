// `npm run bench -- scale [--quick]` (issue 34, item 5): Kubernetes' thresholds — 5,000 nodes and
// 150,000 containers (--quick: 500 and 15,000) — on simulated nodes (fake engines in this process,
// without delay). The containers are placed in steps (a tenth, a fifth, 40 %, 70 %, all), started by
// services of 100 containers from 10 clients; each step prints its placement rate, memory and the
// latency of three GETs (one service, a page of the container list, a page of the node list) while
// idle (the first, cold, answer and then 10 connections for a while, p99 and max) next to a bare
// Fastify serving the same bodies, and the GETs' p99 and max while the step placed. The tenth is
// the baseline of the whole: at ten times the size, a GET should cost the same.
// After each step, a quiet while (only Berth's periodic work) prints the loop's longest stalls and
// what ran in them (bench/stall-profile.ts). Each step also prints the CPU of an idle server for 10 s, and the heap's composition (V8's spaces
// and the collections reachable from the platform, bench/census.ts). The steps share a time budget
// (--budget minutes): on a shared machine the run reaches as far as it can and says so.
// Memory is measured after a full collection: heap and RSS per container, and after terminating
// everything (what history holds). The simulated engines' share of the heap is measured apart (the
// same containers in fake engines alone), so that Berth's own per-container cost is printed too.
import fs from "node:fs";
import os from "node:os";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import v8 from "node:v8";
import vm from "node:vm";
import type { ContainerSpec } from "../src/drivers/engine.ts";
import { FakeEngine } from "../src/drivers/fake/index.ts";
import { census, censusLines, heapSpaces, rssParts } from "./census.ts";
import { fmtMs, formatLoad, percentile, runLoad } from "./load.ts";
import { formatLoop, type LoopFigures, watchLoop } from "./loop-monitor.ts";
import { formatStalls, profileStalls } from "./stall-profile.ts";
import {
  ADMIN_AUTH,
  api,
  type Bench,
  must,
  ratio,
  SERVICE_BODY,
  seedNodes,
  sleep,
  startBare,
  startBerth,
} from "./support.ts";

export interface ScaleOptions {
  nodes: number;
  containers: number;
  durationMs: number;
  /**
   * Most time the placement steps may take in all: a step that would start past it is not
   * started, and a step's wait for its actions ends there (what ran is measured and terminated).
   */
  budgetMs: number;
}

/** The steps' sizes as shares of the whole: a tenth (the baseline), then doubling to all. */
const STEPS = [0.1, 0.2, 0.4, 0.7, 1];
/** How often a step's wait prints where it stands. */
const PROGRESS_MS = 60_000;
/** Idle CPU is measured over this long, with nothing asked of the server. */
const IDLE_CPU_MS = 10_000;

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;

/**
 * Heap and RSS after a full collection, and RSS's parts (Linux): anonymous memory (the heap, native
 * allocations such as SQLite's page cache) and file pages mapped (SQLite's memory-mapped database
 * file, code), which the kernel drops when it needs the memory.
 */
interface Memory {
  heap: number;
  rss: number;
  /** The heap's pages held from the system, and memory outside it (Buffers, native objects). */
  heapTotal: number;
  external: number;
  /** Of external: ArrayBuffers' and Buffers' bytes. */
  arrayBuffers: number;
  /** RSS's parts (bench/census.ts rssParts): malloc arenas, V8's pages, the SQLite file's map. */
  parts: string;
  anon?: number;
  file?: number;
}

async function memory(): Promise<Memory> {
  for (let i = 0; i < 3; i++) gc();
  // V8 hands the pages a collection freed back to the system from a thread of its own, after the
  // collection: read right away, RSS still counted some of them (up to 50 MB more at idle).
  await sleep(SETTLE_MS);
  const m = process.memoryUsage();
  const out: Memory = {
    heap: m.heapUsed / 1024 / 1024,
    rss: m.rss / 1024 / 1024,
    heapTotal: m.heapTotal / 1024 / 1024,
    external: m.external / 1024 / 1024,
    arrayBuffers: m.arrayBuffers / 1024 / 1024,
    parts: rssParts(),
  };
  try {
    const status = fs.readFileSync("/proc/self/status", "utf8");
    const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1]);
    const anon = kb("RssAnon");
    const file = kb("RssFile");
    if (Number.isFinite(anon) && Number.isFinite(file)) {
      out.anon = anon / 1024;
      out.file = file / 1024;
    }
  } catch {
    // Not Linux: RSS alone.
  }
  return out;
}
/** How long after the collections memory is read. */
const SETTLE_MS = 1000;

const mb = (m: Memory) =>
  `heap ${m.heap.toFixed(0)} MB (of ${m.heapTotal.toFixed(0)} held; external ${m.external.toFixed(0)}, of it ArrayBuffers ${m.arrayBuffers.toFixed(0)}), RSS ${m.rss.toFixed(0)} MB${m.anon === undefined ? "" : ` (anonymous ${m.anon.toFixed(0)}, file ${m.file!.toFixed(0)}${m.parts ? `; ${m.parts}` : ""})`}`;
const perContainer = (mbs: number, n: number) => `${((mbs * 1024) / n).toFixed(1)} KB`;

const PER_SERVICE = 100;
const CLIENTS = 10;

/** Runs `calls` from `CLIENTS` clients at once, each awaiting its answer before the next. */
async function fromClients<T>(items: T[], call: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < items.length) await call(items[next++]!);
    }),
  );
}

/** Containers Running in the namespace. */
async function runningCount(b: Bench): Promise<number> {
  return (
    await b.platform.store.services.listContainers({
      namespace: "admin",
      state: "Running",
      limit: 1,
      offset: 0,
    })
  ).total;
}

/**
 * Waits for every action to end; answers their end states (or fewer when `until` is reached).
 * Prints where it stands every PROGRESS_MS.
 */
async function drained(
  b: Bench,
  actions: string[],
  until: number,
  progress?: (line: string) => void,
): Promise<string[]> {
  const started = performance.now();
  const cpu0 = process.cpuUsage();
  let told = started;
  for (;;) {
    const states: string[] = [];
    for (let i = 0; i < actions.length; i += 1000) {
      const rows = await b.platform.db.kysely
        .selectFrom("actions")
        .select("state")
        .where("uuid", "in", actions.slice(i, i + 1000))
        .execute();
      for (const r of rows) if (["Success", "Failed", "Canceled"].includes(r.state)) states.push(r.state);
    }
    if (states.length === actions.length || performance.now() > until) return states;
    if (progress && performance.now() - told >= PROGRESS_MS) {
      told = performance.now();
      const cpu = process.cpuUsage(cpu0);
      progress(
        `      … ${((told - started) / 1000).toFixed(0)} s: ${states.length} of ${actions.length} actions ended, ${await runningCount(b)} containers Running, CPU ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s, heap ${(process.memoryUsage().heapUsed / 1024 / 1024).toFixed(0)} MB, load ${loadText()}`,
      );
    }
    await sleep(250);
  }
}

const loadText = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");

const outcome = (states: string[], total: number) => {
  const counts = new Map<string, number>();
  for (const s of states) counts.set(s, (counts.get(s) ?? 0) + 1);
  const text = [...counts].map(([s, n]) => `${n} ${s}`).join(", ") || "none ended";
  return states.length < total ? `${text}, ${total - states.length} still running at the cap` : text;
};

/** GETs each path every 100 ms over HTTP until stopped; answers each one's latencies, sorted. */
function pollWhile(base: string, paths: string[]): { stop(): Promise<number[][]> } {
  let stopped = false;
  const runs = paths.map(async (path) => {
    const latencies: number[] = [];
    while (!stopped) {
      const t0 = performance.now();
      const res = await fetch(`${base}${path}`, { headers: { authorization: ADMIN_AUTH } }).catch(
        () => undefined,
      );
      await res?.arrayBuffer();
      if (res?.ok) latencies.push(performance.now() - t0);
      await sleep(100);
    }
    return latencies.sort((a, b) => a - b);
  });
  return {
    async stop() {
      stopped = true;
      return Promise.all(runs);
    },
  };
}

const startAction = (r: { headers: Record<string, unknown> }) =>
  String(r.headers["x-platform-action-uri"]).split("/").filter(Boolean).at(-1)!;

export async function runScale(opts: ScaleOptions, out: (line: string) => void): Promise<void> {
  const sampled = sampleSpec();
  const b = await startBerth({ start: true });
  try {
    const idle = await memory();
    const t0 = performance.now();
    await seedNodes(b, "admin", opts.nodes);
    await b.platform.reconciler.resync();
    const withNodes = await memory();
    out(
      `scale: ${opts.nodes} simulated nodes, ${opts.containers} containers (services of ${PER_SERVICE}, started from ${CLIENTS} clients); engines in this process, without delay`,
    );
    out(
      `  idle ${mb(idle)}; with ${opts.nodes} nodes (seeded and watched in ${((performance.now() - t0) / 1000).toFixed(1)} s) ${mb(withNodes)}`,
    );
    const services: string[] = [];
    const count = Math.ceil(opts.containers / PER_SERVICE);
    await fromClients(
      Array.from({ length: count }, (_, i) => i),
      async (i) => {
        const s = await must(
          api<{ uuid: string }>(
            b,
            "POST",
            "/api/app/v1/service/",
            SERVICE_BODY(`scale-${i}`, {
              target_num_containers: Math.min(PER_SERVICE, opts.containers - i * PER_SERVICE),
            }),
          ),
          "create service",
        );
        services[i] = s.uuid;
      },
    );
    const paths = {
      "GET one service": `/api/app/v1/service/${services[0]}/`,
      "container list (limit 100)": "/api/app/v1/container/?limit=100",
      "node list (limit 100)": `/api/infra/v1/node/?limit=100`,
    };
    const budgetEnd = performance.now() + opts.budgetMs;
    let placed = 0;
    let ran = 0;
    for (const share of STEPS) {
      const upTo = Math.max(1, Math.round(count * share));
      if (upTo <= placed) continue;
      if (performance.now() > budgetEnd) {
        out(
          `  (the budget of ${(opts.budgetMs / 60_000).toFixed(0)} minutes is spent: no step past ${ran} containers)`,
        );
        break;
      }
      const step = services.slice(placed, upTo);
      const containers = Math.min(opts.containers, upTo * PER_SERVICE) - placed * PER_SERVICE;
      placed = upTo;
      const target = Math.min(opts.containers, placed * PER_SERVICE);
      out(`  step to ${target} containers (+${containers}, ${step.length} services started):`);
      const poll = pollWhile(b.base, Object.values(paths));
      const loop = watchLoop();
      const started = performance.now();
      const cpu0 = process.cpuUsage();
      const actions: string[] = [];
      await fromClients(step, async (uuid) => {
        const r = await api(b, "POST", `/api/app/v1/service/${uuid}/start/`);
        if (r.status !== 202) throw new Error(`start: ${r.status} ${JSON.stringify(r.body)}`);
        actions.push(startAction(r));
      });
      const states = await drained(b, actions, budgetEnd, out);
      const seconds = (performance.now() - started) / 1000;
      const cpu = process.cpuUsage(cpu0);
      // CPU time of this process (Berth and the simulated engines): far less disturbed than the
      // elapsed time when other work on the machine holds the cores.
      const cpuS = (cpu.user + cpu.system) / 1e6;
      const polled = await poll.stop();
      const stalls = loop.stop();
      const before = ran;
      ran = await runningCount(b);
      const m = await memory();
      const done = states.length === actions.length;
      out(
        `    ${done ? "all Running" : `${ran} Running at the budget's end`} after ${seconds.toFixed(1)} s: +${ran - before} placed, ${Math.round((ran - before) / seconds)} placements/s (${outcome(states, actions.length)}); CPU ${cpuS.toFixed(1)} s, ${Math.round((ran - before) / cpuS)} placements per CPU second; load ${loadText()}`,
      );
      out(
        `    memory: ${mb(m)}; over the nodes alone ${perContainer(m.heap - withNodes.heap, ran)} heap, ${perContainer(m.rss - withNodes.rss, ran)} RSS per container; heap spaces (MB): ${heapSpaces()}`,
      );
      out(`    heap composition: collections reachable from the platform (entries):`);
      for (const line of censusLines(census(b.platform, { minSize: ran / 2 }), ran, 10)) out(`      ${line}`);
      out(`    while placing (GETs every 100 ms; ${formatLoop(stalls)}):`);
      for (const [i, label] of Object.keys(paths).entries()) {
        const l = polled[i]!;
        out(
          `      ${label}: ${l.length} answered, p99 ${fmtMs(percentile(l, 0.99))} ms, max ${fmtMs(l.at(-1) ?? 0)} ms`,
        );
      }
      await idleGets(b, paths, opts.durationMs, out);
      await idleCpu(b, out);
      await quiet(opts.durationMs * 2, out);
      if (!done) break;
    }
    const before = await memory();
    const t1 = performance.now();
    const ends: string[] = [];
    await fromClients(services, async (uuid) => {
      const r = await api(b, "DELETE", `/api/app/v1/service/${uuid}/`);
      if (r.status !== 202) throw new Error(`terminate: ${r.status} ${JSON.stringify(r.body)}`);
      ends.push(startAction(r));
    });
    // Terminating gets a quarter of the budget, 5 minutes at least (what ended is measured).
    const states = await drained(b, ends, performance.now() + Math.max(300_000, opts.budgetMs / 4), out);
    const seconds = (performance.now() - t1) / 1000;
    await sleep(1000);
    const after = await memory();
    out(
      `  terminated all (${ran} containers) in ${seconds.toFixed(1)} s (${Math.round(ran / seconds)} containers/s; ${outcome(states, ends.length)})`,
    );
    out(
      `    memory: ${mb(after)} (${mb(before)} before); held over the nodes alone: ${perContainer(after.heap - withNodes.heap, ran)} heap, ${perContainer(after.rss - withNodes.rss, ran)} RSS per container ever run`,
    );
    out(`    heap composition once terminated (entries):`);
    for (const line of censusLines(census(b.platform, { minSize: ran / 10 }), ran, 8)) out(`      ${line}`);
    const spec = sampled();
    if (!spec) return;
    const fake = await fakeShare(spec, Math.min(opts.containers, 20_000), Math.min(opts.nodes, 1000));
    out(
      `  the simulated engines' own share (${fake.containers} such containers in fake engines alone): ${fake.kbPerContainer.toFixed(1)} KB heap per container`,
    );
  } finally {
    await b.close();
  }
}

/** The process's CPU while nothing is asked of it (periodic passes, watchers, stats rounds). */
async function idleCpu(b: Bench, out: (line: string) => void): Promise<void> {
  const cpu0 = process.cpuUsage();
  const statements0 = b.platform.db.statements.count;
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const t0 = performance.now();
  await sleep(IDLE_CPU_MS);
  const seconds = (performance.now() - t0) / 1000;
  loop.disable();
  const cpu = process.cpuUsage(cpu0);
  out(
    `    idle for ${seconds.toFixed(0)} s: CPU ${(((cpu.user + cpu.system) / 1e6 / seconds) * 100).toFixed(0)}% of a core, ${((b.platform.db.statements.count - statements0) / seconds).toFixed(0)} SQL statements/s, event loop delay max ${fmtMs(loop.max / 1e6)} ms`,
  );
}

/**
 * Nothing asked of Berth for a while: only its periodic work runs (controllers' passes, probes, stats
 * rounds, the simulated engines). Prints the loop's stalls and what the longest of them ran.
 */
async function quiet(ms: number, out: (line: string) => void): Promise<void> {
  // The profiler's own start and stop hold the loop: outside the watch.
  const profile = await profileStalls();
  const loop = watchLoop(3);
  await sleep(ms);
  const figures = loop.stop();
  const stalls = await profile.stop(figures.turns);
  out(`    quiet for ${(ms / 1000).toFixed(0)} s: ${formatLoop(figures)}`);
  for (const line of formatStalls(stalls, 3)) out(`      turn of ${line}`);
}

/** The first (cold) answer of each GET, then each at 10 connections next to a bare Fastify. */
async function idleGets(
  b: Bench,
  paths: Record<string, string>,
  durationMs: number,
  out: (line: string) => void,
): Promise<void> {
  const bodies: Record<string, unknown> = {};
  const cold: number[] = [];
  for (const path of Object.values(paths)) {
    const t = performance.now();
    // A connection the server dropped during a long stall (seen at 60,000 containers on a loaded
    // machine) is tried once more on a new one, and counted in the first answer's time.
    let body: unknown;
    for (let attempt = 0; body === undefined; attempt++) {
      try {
        const res = await fetch(`${b.base}${path}`, { headers: { authorization: ADMIN_AUTH } });
        body = await res.json();
      } catch (err) {
        if (attempt > 0) {
          out(`    idle GETs skipped: ${path} failed twice (${String(err)})`);
          return;
        }
      }
    }
    bodies[path.split("?")[0]!] = body;
    cold.push(performance.now() - t);
  }
  const bare = await startBare(bodies);
  const loop = watchLoop();
  const lines: string[] = [];
  let stalls: LoopFigures;
  try {
    for (const [i, [label, path]] of Object.entries(paths).entries()) {
      const load = { connections: 10, durationMs, headers: { authorization: ADMIN_AUTH } };
      const berth = await runLoad({ ...load, url: `${b.base}${path}` });
      const floor = await runLoad({ ...load, url: `${bare.base}${path}` });
      lines.push(
        `      ${label}: first ${fmtMs(cold[i]!)} ms; ${formatLoad(berth)} — bare Fastify ${formatLoad(floor)} (${ratio(berth.rps, floor.rps)})`,
      );
    }
  } finally {
    stalls = loop.stop();
    await bare.app.close();
  }
  out(`    idle, 10 connections (the bare server shares the process; ${formatLoop(stalls)}):`);
  for (const line of lines) out(line);
}

/**
 * Heap per container of `containers` started in `nodes` fake engines alone, each made from the
 * spec Berth sent for its first container (its name and labels made unique).
 */
async function fakeShare(
  spec: ContainerSpec,
  containers: number,
  nodes: number,
): Promise<{ containers: number; kbPerContainer: number }> {
  const engines = Array.from(
    { length: nodes },
    (_, i) => new FakeEngine({ subnet: `10.${128 + Math.floor(i / 256)}.${i % 256}.0/24` }),
  );
  const before = await memory();
  const ids: [FakeEngine, string][] = [];
  for (let i = 0; i < containers; i += 1000) {
    await Promise.all(
      Array.from({ length: Math.min(1000, containers - i) }, async (_, j) => {
        const engine = engines[(i + j) % nodes]!;
        const id = await engine.createContainer({
          ...spec,
          name: `share-${i + j}`,
          labels: Object.fromEntries(Object.entries(spec.labels ?? {}).map(([k, v]) => [k, `${v}-${i + j}`])),
        });
        await engine.startContainer(id);
        ids.push([engine, id]);
      }),
    );
  }
  const after = await memory();
  for (const [engine, id] of ids) await engine.removeContainer(id, { force: true });
  return { containers, kbPerContainer: ((after.heap - before.heap) * 1024) / containers };
}

/** Notes the first spec Berth sends a fake engine (for fakeShare); answers a way to read it. */
function sampleSpec(): () => ContainerSpec | undefined {
  let sample: ContainerSpec | undefined;
  const original = FakeEngine.prototype.createContainer;
  FakeEngine.prototype.createContainer = function (this: FakeEngine, spec: ContainerSpec) {
    sample = structuredClone(spec);
    FakeEngine.prototype.createContainer = original;
    return original.call(this, spec);
  };
  return () => sample;
}
