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
  connections: number;
  durationMs: number;
}

const API_KEY = "bench-admin-key-0123456789abcdef";
const AUTH = `Basic ${Buffer.from(`admin:${API_KEY}`).toString("base64")}`;

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
    const measured = async (): Promise<Measured> => {
      const watch = watchLoop();
      const elu = performance.eventLoopUtilization();
      const cpu = process.cpuUsage();
      const threadCpu = threadCpuMs();
      const { result: r, statements, transactions } = await platform.db.statements.during(load);
      const used = performance.eventLoopUtilization(elu);
      const spent = process.cpuUsage(cpu);
      const threadSpent = threadCpuMs() - threadCpu;
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

    const dialect = database.env.BERTH_DATABASE_URL ? "PostgreSQL" : "SQLite";
    out(
      `writes while the events stream fans out (${dialect}): PATCH at ${opts.connections} connections, ${opts.durationMs / 1000} s each; rounds: none, ${opts.subscribers} subscribers, none`,
    );
    const alone = await measured();
    out(`  no subscriber:      ${formatLoad(alone.r)}`);
    for (const line of figures(alone)) out(`    ${line}`);

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
    type Report = {
      kind: "done";
      delivered: number;
      closes: number;
      closeCodes: Record<string, number>;
      histogram: number[];
      cpuMs: number;
    };
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
    const from = await platform.store.latestRevision();
    const totals0 = { ...fanOutTotals };
    const fanned = await measured();
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
    out(`  ${opts.subscribers} subscribers: ${formatLoad(fanned.r)}`);
    for (const line of figures(fanned)) out(`    ${line}`);
    out(
      `    fan-out: ${fan.passes} passes (${fan.slices} slices, ${fan.writes} socket writes, ${fan.events} events queued per shape), ` +
        `${fmtMs(fan.cpuMs)} ms CPU = ${fmtMs((fan.cpuMs / Math.max(1, fan.writes)) * 1000)} µs per socket write, ${((fan.cpuMs / fanned.loop.cpuMs) * 100).toFixed(0)} % of the main thread's CPU`,
    );
    out(
      `    the subscribers' own process: ${fmtMs(report.cpuMs / Math.max(1, fanned.r.requests))} ms CPU per PATCH (not the server's)`,
    );
    // The same writes again without subscribers: the machine's load drifts during a run, so the
    // ratio is taken against the mean of the rounds before and after.
    await new Promise<void>((resolve) => {
      child.once("exit", () => resolve());
      child.kill();
    });
    subscribers = undefined;
    while (platform.app.websocketServer.clients.size > 0) await new Promise((r) => setTimeout(r, 20));
    const again = await measured();
    out(`  no subscriber again: ${formatLoad(again.r)}`);
    for (const line of figures(again)) out(`    ${line}`);
    const base0 = (alone.r.rps + again.r.rps) / 2;
    const ratio = fanned.r.rps / Math.max(1, base0);
    const cpuAlone = (alone.threadCpuMsPerRequest + again.threadCpuMsPerRequest) / 2;
    out(
      `  throughput with subscribers: ${(ratio * 100).toFixed(0)} % of without (target ≥ 80 %); ` +
        `main-thread CPU per PATCH ${fmtMs(fanned.threadCpuMsPerRequest)} vs ${fmtMs(cpuAlone)} ms: ` +
        `${((cpuAlone / fanned.threadCpuMsPerRequest) * 100).toFixed(0)} % if the server's core were its own`,
    );
    const codes = Object.entries(report.closeCodes)
      .map(([code, n]) => `${n}× ${code}`)
      .join(", ");
    out(
      `  events: ${events} committed × ${opts.subscribers} = ${expected} deliveries; ${report.delivered} arrived, ` +
        `${Math.max(0, expected - report.delivered)} lost, ${report.closes} subscribers closed${codes ? ` (${codes})` : ""}`,
    );
    const histogram = Uint32Array.from(report.histogram);
    out(
      `  delivery delay: p50 ${percentile(histogram, report.delivered, 0.5)} ms, ` +
        `p99 ${percentile(histogram, report.delivered, 0.99)} ms, max ${percentile(histogram, report.delivered, 1)} ms (target p99 < 100 ms)`,
    );
  } finally {
    subscribers?.kill();
    await platform.close();
    await database.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
