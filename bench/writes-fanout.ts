// Benchmark (not a test): writes while the events stream fans out (issue 34, items 1, 3 and 6). A
// platform on SQLite (or on PostgreSQL, in a schema of its own, with BERTH_BENCH_DATABASE_URL)
// takes PATCHes of 10 services from 10 keep-alive connections (bench/load.ts, a process of its
// own) in three rounds: no events subscriber, `subscribers` subscribers of the namespace (every
// event type, as the dashboard subscribes; bench/subscribers-worker.mjs, a process of its own),
// none again. Reported: PATCH throughput and latency (p50, p99, max) in each round and the ratio
// against the mean of the rounds without (target ≥ 80 %); per PATCH, the event loop's busy time
// (eventLoopUtilization: wall time, so it grows with the machine's load), the main thread's and
// the process's CPU time (the subscribers' own is printed apart) and the statements and
// transactions run (a write's own and what it set off, warm-up included); the event loop's longest
// delay and longest turn in wall and CPU time (bench/loop-monitor.ts); the events the subscribers
// missed (target 0: what was committed meanwhile × subscribers, against what arrived) and the
// delay from an event's `datetime` to its arrival (target p99 < 100 ms).

import { type ChildProcess, fork } from "node:child_process";
import fs from "node:fs";
import { Session } from "node:inspector/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { fanOutTotals } from "../src/api/streams/fanout.ts";
import { loadConfig } from "../src/config/index.ts";
import { assemblePlatform } from "../src/platform.ts";
import { openDatabase } from "../src/store/db.ts";
import { fmtMs, formatLoad, type LoadResult, runLoad } from "./load.ts";
import { formatLoop, type LoopFigures, threadCpuMs, watchLoop } from "./loop-monitor.ts";

export interface WritesFanoutOptions {
  subscribers: number;
  /** Rounds with subscribers (each between two without). */
  rounds: number;
  connections: number;
  durationMs: number;
}

const API_KEY = "bench-admin-key-0123456789abcdef";
const AUTH = `Basic ${Buffer.from(`admin:${API_KEY}`).toString("base64")}`;

/**
 * With BERTH_BENCH_CPU_PROFILE=<prefix>: a CPU profile of each round (<prefix>-<round>.cpuprofile)
 * and the statements that round ran, by time spent in them.
 */
async function profileRound(
  platform: Awaited<ReturnType<typeof assemblePlatform>>,
  prefix: string | undefined,
  round: string,
  out: (line: string) => void,
): Promise<(() => Promise<void>) | undefined> {
  if (!prefix) return undefined;
  const bySql = new Map<string, { n: number; ms: number }>();
  const counter = platform.db.statements;
  const record = counter.record.bind(counter);
  counter.record = (event) => {
    record(event);
    const key = event.query.sql.slice(0, 90);
    const t = bySql.get(key) ?? { n: 0, ms: 0 };
    t.n += 1;
    t.ms += event.queryDurationMillis;
    bySql.set(key, t);
  };
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.start");
  return async () => {
    const { profile } = await session.post("Profiler.stop");
    fs.writeFileSync(`${prefix}-${round}.cpuprofile`, JSON.stringify(profile));
    session.disconnect();
    counter.record = record;
    out(`    CPU profile written to ${prefix}-${round}.cpuprofile; statements by count:`);
    for (const [sql, t] of [...bySql].sort((x, y) => y[1].n - x[1].n).slice(0, 12))
      out(`      ${String(t.n).padStart(6)}× ${t.ms.toFixed(0).padStart(5)} ms  ${sql}`);
  };
}

function percentile(histogram: Uint32Array, total: number, p: number): number {
  const rank = Math.ceil(total * p);
  let seen = 0;
  for (let ms = 0; ms < histogram.length; ms++) {
    seen += histogram[ms]!;
    if (seen >= rank) return ms;
  }
  return histogram.length - 1;
}

/**
 * The database of the run: a fresh SQLite file in the data directory, or a schema of its own on the
 * PostgreSQL server named by BERTH_BENCH_DATABASE_URL (dropped afterwards).
 */
async function benchDatabase(): Promise<{ env: Record<string, string>; drop(): Promise<void> }> {
  const pg = process.env.BERTH_BENCH_DATABASE_URL;
  if (!pg?.startsWith("postgres")) return { env: {}, drop: async () => {} };
  const schema = `bench_writes_${process.pid}`;
  const admin = openDatabase(pg);
  await admin.kysely.schema.createSchema(schema).ifNotExists().execute();
  await admin.close();
  const url = new URL(pg);
  url.searchParams.set("options", `-c search_path=${schema}`);
  return {
    env: { BERTH_DATABASE_URL: url.toString() },
    async drop() {
      const a = openDatabase(pg);
      await a.kysely.schema.dropSchema(schema).cascade().execute();
      await a.close();
    },
  };
}

export async function runWritesFanout(opts: WritesFanoutOptions, out: (line: string) => void): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-bench-"));
  const database = await benchDatabase();
  const platform = await assemblePlatform(
    loadConfig({
      BERTH_DATA_DIR: dataDir,
      BERTH_LOG_LEVEL: "warn",
      BERTH_AUTO_ATTACH_ENGINE: "false",
      BERTH_NODE_HEALTH_INTERVAL_MS: "3600000",
      ...database.env,
    }),
  );
  let subscribers: ChildProcess | undefined;
  try {
    await platform.identity.bootstrapAdmin({
      username: "admin",
      password: "bench-password",
      apiKey: API_KEY,
    });
    await platform.start();
    await platform.app.listen({ host: "127.0.0.1", port: 0 });
    const address = platform.app.server.address();
    if (!address || typeof address === "string") throw new Error("no TCP address");
    const base = `http://127.0.0.1:${address.port}`;
    const services: string[] = [];
    for (let i = 0; i < opts.connections; i++) {
      const res = await fetch(`${base}/api/app/v1/service/`, {
        method: "POST",
        headers: { authorization: AUTH, "content-type": "application/json" },
        body: JSON.stringify({ name: `patched-${i}`, image: "busybox:local", target_num_containers: 1 }),
      });
      if (res.status !== 201) throw new Error(`service create: ${res.status} ${await res.text()}`);
      services.push(((await res.json()) as { resource_uri: string }).resource_uri);
    }
    // Connection i alternates between two values on service i: every PATCH changes something.
    const requests = [1, 2].flatMap((n) =>
      services.map((uri) => ({
        method: "PATCH",
        path: uri,
        body: JSON.stringify({ target_num_containers: n }),
      })),
    );
    const load = () =>
      runLoad({
        url: base,
        headers: { authorization: AUTH },
        connections: opts.connections,
        durationMs: opts.durationMs,
        requests,
      });
    // Per request: the event loop's busy time (eventLoopUtilization: the time the loop ran
    // callbacks, whatever they were: a write's own work and what it set off), the main thread's
    // CPU (what machine load does not inflate) and the process's; the loop's longest stall.
    interface Measured {
      r: LoadResult;
      loop: LoopFigures;
      loopMsPerRequest: number;
      statementsPerRequest: number;
      transactionsPerRequest: number;
      threadCpuMsPerRequest: number;
      cpuMsPerRequest: number;
    }
    const measured = async (round: string): Promise<Measured> => {
      const profiled = await profileRound(platform, process.env.BERTH_BENCH_CPU_PROFILE, round, out);
      const watch = watchLoop();
      const elu = performance.eventLoopUtilization();
      const cpu = process.cpuUsage();
      const threadCpu = threadCpuMs();
      const { result: r, statements, transactions } = await platform.db.statements.during(load);
      const used = performance.eventLoopUtilization(elu);
      const spent = process.cpuUsage(cpu);
      const threadSpent = threadCpuMs() - threadCpu;
      await profiled?.();
      // The warm-up's requests count in the statements and CPU too (a few hundred ms of them).
      const n = Math.max(1, r.requests);
      return {
        r,
        loop: watch.stop(),
        loopMsPerRequest: used.active / n,
        statementsPerRequest: statements / n,
        transactionsPerRequest: transactions / n,
        threadCpuMsPerRequest: threadSpent / n,
        cpuMsPerRequest: (spent.user + spent.system) / 1000 / n,
      };
    };
    const figures = (m: Measured) => [
      `per PATCH: event loop ${fmtMs(m.loopMsPerRequest)} ms (target < 1 ms), CPU ${fmtMs(m.threadCpuMsPerRequest)} ms main thread / ${fmtMs(m.cpuMsPerRequest)} ms process; ${m.statementsPerRequest.toFixed(1)} statements, ${m.transactionsPerRequest.toFixed(1)} transactions`,
      formatLoop(m.loop),
    ];

    type Report = {
      kind: "done";
      delivered: number;
      closes: number;
      closeCodes: Record<string, number>;
      histogram: number[];
      sampled: number;
      cpuMs: number;
    };
    /** A round with the subscribers open: they connect before it and leave after it. */
    const fannedRound = async (round: string) => {
      const child = fork(fileURLToPath(new URL("./subscribers-worker.mjs", import.meta.url)), {
        env: {
          ...process.env,
          BERTH_SUBSCRIBERS_OPTIONS: JSON.stringify({
            port: address.port,
            path: "/api/audit/v1/events/",
            auth: AUTH,
            subscribers: opts.subscribers,
          }),
        },
        execArgv: [],
        stdio: ["ignore", "inherit", "inherit", "ipc"],
      });
      subscribers = child;
      const done = new Promise<Report>((resolve, reject) => {
        child.on("message", (m: { kind: string; message?: string }) => {
          if (m.kind === "error") reject(new Error(m.message));
          if (m.kind === "done") resolve(m as Report);
        });
        child.once("error", reject);
      });
      await new Promise<void>((resolve, reject) => {
        child.on("message", (m: { kind: string }) => m.kind === "ready" && resolve());
        child.once("error", reject);
        child.once("exit", (code) => reject(new Error(`the subscribers exited (${code}) before opening`)));
      });
      child.send("mark");
      const from = await platform.store.latestRevision();
      const totals0 = { ...fanOutTotals };
      const m = await measured(round);
      const fan = Object.fromEntries(
        Object.entries(fanOutTotals).map(([k, v]) => [k, v - totals0[k as keyof typeof totals0]]),
      ) as typeof fanOutTotals;
      const to = await platform.store.latestRevision();
      let events = 0;
      for (let at = from; at < to; ) {
        const page = await platform.store.changesSince(at, 1000);
        if (page.length === 0) break;
        events += page.filter((c) => c.namespace === "admin").length;
        at = Number(page.at(-1)!.revision);
      }
      const expected = events * opts.subscribers;
      child.send({ expected });
      const timer = setTimeout(() => child.send("report"), 30_000);
      const report = await done;
      clearTimeout(timer);
      await new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill();
      });
      subscribers = undefined;
      while (platform.app.websocketServer.clients.size > 0) await new Promise((r) => setTimeout(r, 20));
      return { m, fan, events, expected, report };
    };

    const dialect = database.env.BERTH_DATABASE_URL ? "PostgreSQL" : "SQLite";
    out(
      `writes while the events stream fans out (${dialect}): PATCH at ${opts.connections} connections, ${opts.durationMs / 1000} s a round; ` +
        `rounds without subscribers and with ${opts.subscribers}, alternating (the machine's load drifts: medians compared)`,
    );
    const alone: Measured[] = [];
    const fanned: Awaited<ReturnType<typeof fannedRound>>[] = [];
    const aloneRound = async (i: number) => {
      const m = await measured(`alone-${i}`);
      alone.push(m);
      out(`  no subscriber:     ${formatLoad(m.r)}`);
      for (const line of figures(m)) out(`    ${line}`);
    };
    await aloneRound(0);
    if (opts.subscribers === 0) {
      for (let i = 1; i <= opts.rounds; i++) await aloneRound(i);
      return;
    }
    for (let i = 0; i < opts.rounds; i++) {
      const f = await fannedRound(`fanned-${i}`);
      fanned.push(f);
      out(`  ${opts.subscribers} subscribers: ${formatLoad(f.m.r)}`);
      for (const line of figures(f.m)) out(`    ${line}`);
      out(
        `    fan-out: ${f.fan.passes} passes (${f.fan.slices} slices, ${f.fan.writes} socket writes, ${f.fan.events} events queued per shape), ` +
          `wait ${fmtMs(f.fan.waitMs / Math.max(1, f.fan.passes))} ms + ${fmtMs(f.fan.passWallMs / Math.max(1, f.fan.passes))} ms wall per pass, ` +
          `${fmtMs(f.fan.cpuMs)} ms CPU = ${fmtMs((f.fan.cpuMs / Math.max(1, f.fan.writes)) * 1000)} µs per socket write, ${((f.fan.cpuMs / f.m.loop.cpuMs) * 100).toFixed(0)} % of the main thread's CPU; ` +
          `the subscribers' own process ${fmtMs(f.report.cpuMs / Math.max(1, f.m.r.requests))} ms CPU per PATCH`,
      );
      await aloneRound(i + 1);
    }
    const median = (xs: number[]) => {
      const sorted = [...xs].sort((a, b) => a - b);
      const mid = sorted.length >> 1;
      return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
    };
    const rpsAlone = median(alone.map((m) => m.r.rps));
    const rpsFanned = median(fanned.map((f) => f.m.r.rps));
    const cpuAlone = median(alone.map((m) => m.threadCpuMsPerRequest));
    const cpuFanned = median(fanned.map((f) => f.m.threadCpuMsPerRequest));
    out(
      `  throughput with subscribers (medians): ${rpsFanned} vs ${rpsAlone} req/s = ${((rpsFanned / Math.max(1, rpsAlone)) * 100).toFixed(0)} % of without (target ≥ 80 %); ` +
        `main-thread CPU per PATCH ${fmtMs(cpuFanned)} vs ${fmtMs(cpuAlone)} ms: ${((cpuAlone / cpuFanned) * 100).toFixed(0)} % if the server had a core of its own`,
    );
    out(
      `  max request latency: ${fmtMs(Math.max(...alone.map((m) => m.r.latencyMs.max)))} ms without, ${fmtMs(Math.max(...fanned.map((f) => f.m.r.latencyMs.max)))} ms with; ` +
        `longest turn ${fmtMs(Math.max(...alone.map((m) => m.loop.longestTurnCpuMs)))} / ${fmtMs(Math.max(...fanned.map((f) => f.m.loop.longestTurnCpuMs)))} ms CPU`,
    );
    const expected = fanned.reduce((n, f) => n + f.expected, 0);
    const delivered = fanned.reduce((n, f) => n + f.report.delivered, 0);
    const closes = fanned.reduce((n, f) => n + f.report.closes, 0);
    const codes = new Map<string, number>();
    for (const f of fanned)
      for (const [code, n] of Object.entries(f.report.closeCodes))
        codes.set(code, (codes.get(code) ?? 0) + n);
    out(
      `  events: ${fanned.map((f) => f.events).join(" + ")} committed × ${opts.subscribers} = ${expected} deliveries; ${delivered} arrived, ` +
        `${Math.max(0, expected - delivered)} lost, ${closes} subscribers closed${codes.size ? ` (${[...codes].map(([c, n]) => `${n}× ${c}`).join(", ")})` : ""}`,
    );
    const sampled = fanned.reduce((n, f) => n + f.report.sampled, 0);
    const histogram = new Uint32Array(60001);
    for (const f of fanned) {
      f.report.histogram.forEach((n, ms) => {
        histogram[ms]! += n;
      });
    }
    out(
      `  delivery delay (every 10th subscriber's ${sampled} deliveries): p50 ${percentile(histogram, sampled, 0.5)} ms, ` +
        `p99 ${percentile(histogram, sampled, 0.99)} ms, max ${percentile(histogram, sampled, 1)} ms (target p99 < 100 ms)`,
    );
  } finally {
    subscribers?.kill();
    await platform.close();
    await database.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
