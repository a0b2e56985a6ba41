// `npm run bench -- placement --replicas N [--quick]` (issue 34, item 4): the placement bench with
// N Berth replicas (real server processes) on one PostgreSQL (BERTH_TEST_PG_URL, a database of
// its own per run, dropped at the end). Simulated nodes are written into the store; services of
// 100 containers are created and started through the replicas in turn, from 10 clients; each
// replica's workers take start actions and its plan applier places, and the simulated engines are
// kept equal through the store. Printed: placements per second from the first start call until
// every action ended, the actions' outcomes, the CPU time of each replica process (from /proc,
// far less disturbed by the machine's other work than the elapsed time), and the load average.
import fs from "node:fs";
import os from "node:os";
import { performance } from "node:perf_hooks";
import {
  api,
  cleanup,
  type FreshDatabase,
  freshPgDatabase,
  type Replica,
  startReplica,
} from "../test/replicas/support.ts";
import { fakeEngineNodeRow } from "../test/support/rows.ts";
import { AWS_TYPE, SERVICE_BODY, sleep } from "./support.ts";

export interface ReplicaPlacementOptions {
  replicas: number;
  nodes: number;
  services: number;
  perService: number;
  capMs: number;
}

const CLIENTS = 10;

/** User and system CPU seconds a process has used (Linux /proc). */
function cpuSeconds(pid: number | undefined): number {
  if (!pid) return 0;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime and stime are fields 14 and 15 of the whole line (11 and 12 after the name).
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/** A replica's store counts (statements, transactions), asked with SIGUSR2 (server-with-test-kinds.ts). */
async function storeCounts(r: Replica): Promise<{ statements: number; transactions: number }> {
  const seen = r.log().length;
  r.proc.kill("SIGUSR2");
  for (let i = 0; i < 200; i++) {
    const m = /berth-bench-counts statements=(\d+) transactions=(\d+)/.exec(r.log().slice(seen));
    if (m) {
      const tally = r
        .log()
        .slice(seen)
        .match(/berth-bench-statement .*/g);
      if (tally && process.env.BERTH_BENCH_STATEMENTS === "1")
        process.stdout.write(`  replica ${r.name} statements by count:\n    ${tally.join("\n    ")}\n`);
      return { statements: Number(m[1]), transactions: Number(m[2]) };
    }
    await sleep(25);
  }
  return { statements: Number.NaN, transactions: Number.NaN };
}

/** The last errors a replica logged (what a 500 was). */
const errorsOf = (r: Replica) =>
  `${r.name}'s log:\n${r
    .log()
    .split("\n")
    .filter((l) => /"level":(50|60)/.test(l))
    .slice(-3)
    .join("\n")}`;

const load = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");

/** 429 database_busy answers met (each sent again after its Retry-After, as a client does). */
let busy = 0;

/** A call, sent again after a second while it answers 429 (the database was busy). */
async function patient(r: Replica, method: string, url: string, body?: unknown) {
  for (;;) {
    const res = await api(r, method, url, body);
    if (res.status !== 429) return res;
    busy += 1;
    await sleep(1000);
  }
}

async function fromClients<T>(items: T[], call: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < items.length) {
        const i = next++;
        await call(items[i]!, i);
      }
    }),
  );
}

export async function runReplicaPlacement(
  opts: ReplicaPlacementOptions,
  out: (line: string) => void,
): Promise<void> {
  if (!process.env.BERTH_TEST_PG_URL?.startsWith("postgres")) {
    out("placement --replicas: skipped (set BERTH_TEST_PG_URL to a PostgreSQL server, as .ci/run does)");
    return;
  }
  let db: FreshDatabase | undefined;
  const replicas: Replica[] = [];
  try {
    db = await freshPgDatabase("berth_place");
    const env = {
      BERTH_DATABASE_URL: db.url,
      BERTH_LOG_LEVEL: "warn",
      BERTH_NODE_HEALTH_INTERVAL_MS: "3600000",
      BERTH_RECONCILE_INTERVAL_MS: "15000",
    };
    const names = ["A", "B", "C", "D", "E"].slice(0, opts.replicas);
    // BENCH_CPU_PROF=<dir>: replica A writes a CPU profile there when it stops (at the end).
    const prof = process.env.BENCH_CPU_PROF;
    // The first migrates the empty database; the others start together on it.
    replicas.push(
      await startReplica(names[0]!, env, prof ? { nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${prof}`] } : {}),
    );
    replicas.push(...(await Promise.all(names.slice(1).map((n) => startReplica(n, env)))));
    const store = db.store;
    const now = Date.now();
    for (let start = 0; start < opts.nodes; start += 500) {
      await store.transaction(async (tx) => {
        for (let i = start; i < Math.min(opts.nodes, start + 500); i++)
          await tx.nodes.insertNode(
            fakeEngineNodeRow("admin", now, {
              node_type: AWS_TYPE,
              public_ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
              slot: i,
              tags: JSON.stringify(["bench"]),
            }),
          );
      });
    }
    // Every node watched (its watcher's lease taken by one replica) before the placement starts.
    const watchedBy = Date.now() + 120_000;
    while ((await store.replicas.listLeases("node:")).length < opts.nodes && Date.now() < watchedBy)
      await sleep(250);
    // And every node's first probe recorded (a replica probes the nodes it takes over, at most a few
    // at a time): the count of nodes written since they were inserted stays still for 1.5 s.
    for (let still = 0, last = -1; still < 3 && Date.now() < watchedBy; ) {
      const probed = Number(
        (
          await store.db
            .selectFrom("nodes")
            .select((eb) => eb.fn.countAll().as("n"))
            .where("version", ">", 1)
            .executeTakeFirst()
        )?.n ?? 0,
      );
      still = probed === last ? still + 1 : 0;
      last = probed;
      await sleep(500);
    }
    const services: string[] = [];
    await fromClients(
      Array.from({ length: opts.services }, (_, i) => i),
      async (i) => {
        const r = replicas[i % replicas.length]!;
        const res = await patient(
          r,
          "POST",
          "/api/app/v1/service/",
          SERVICE_BODY(`place-${i}`, { target_num_containers: opts.perService }),
        );
        if (res.status === 409 && res.body?.code === "name_taken") {
          // A create answered 429 may have been made all the same (see the closing note of issue 34).
          const found = await api(r, "GET", `/api/app/v1/service/?name=place-${i}`);
          services[i] = found.body.objects[0].uuid as string;
          return;
        }
        if (res.status !== 201)
          throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}\n${errorsOf(r)}`);
        services[i] = res.body.uuid as string;
      },
    );
    const total = opts.services * opts.perService;
    const busyCreating = busy;
    const cpu0 = replicas.map((r) => cpuSeconds(r.proc.pid));
    const counts0 = await Promise.all(replicas.map(storeCounts));
    const load0 = load();
    const t0 = performance.now();
    // Monotonic µs, the clock of V8's CPU profiles: a profile's samples of the placement itself.
    const window0 = process.hrtime.bigint() / 1000n;
    const actions: string[] = [];
    await fromClients(services, async (uuid, i) => {
      const r = replicas[i % replicas.length]!;
      const res = await patient(r, "POST", `/api/app/v1/service/${uuid}/start/`);
      if (res.status !== 202)
        throw new Error(`start: ${res.status} ${JSON.stringify(res.body)}\n${errorsOf(r)}`);
      actions.push(String(res.headers.get("x-platform-action-uri")).split("/").filter(Boolean).at(-1)!);
    });
    const answeredMs = performance.now() - t0;
    let ended: string[] = [];
    for (;;) {
      const rows = await store.db
        .selectFrom("actions")
        .select(["uuid", "state"])
        .where("uuid", "in", actions)
        .execute();
      ended = rows.filter((a) => ["Success", "Failed", "Canceled"].includes(a.state)).map((a) => a.state);
      if (ended.length === actions.length || performance.now() - t0 > opts.capMs) break;
      await sleep(200);
    }
    const elapsedS = (performance.now() - t0) / 1000;
    const failed = (
      await store.db
        .selectFrom("actions")
        .select("uuid")
        .where("uuid", "in", actions)
        .where("state", "=", "Failed")
        .execute()
    ).map((a) => a.uuid);
    const window1 = process.hrtime.bigint() / 1000n;
    const cpu = replicas.map((r, i) => cpuSeconds(r.proc.pid) - cpu0[i]!);
    const counts1 = await Promise.all(replicas.map(storeCounts));
    const statements = counts1.map((c, i) => c.statements - counts0[i]!.statements);
    const transactions = counts1.map((c, i) => c.transactions - counts0[i]!.transactions);
    const running = (
      await store.services.listContainers({ namespace: "admin", state: "Running", limit: 1, offset: 0 })
    ).total;
    // Whether the replicas placed apart: the plans that met another replica's placements on their
    // nodes at commit and were planned again (each logs it once per service of its batch).
    const met = (
      await store.db
        .selectFrom("action_logs")
        .select("line")
        .where("action_uuid", "in", actions)
        .where("line", "like", "Another replica placed containers on node(s)%")
        .execute()
    ).length;
    const counts = new Map<string, number>();
    for (const state of ended) counts.set(state, (counts.get(state) ?? 0) + 1);
    const outcome = [...counts].map(([state, n]) => `${n} ${state}`).join(", ");
    const cpuTotal = cpu.reduce((a, b) => a + b, 0);
    out(
      `placement on PostgreSQL, ${opts.replicas} replica${opts.replicas > 1 ? "s" : ""} (processes): ${total} containers (${opts.services} services × ${opts.perService}) onto ${opts.nodes} simulated nodes, started through the replicas in turn from ${CLIENTS} clients`,
    );
    out(
      `  ${running} Running after ${elapsedS.toFixed(1)} s: ${Math.round(running / elapsedS)} placements/s; start calls answered in ${answeredMs.toFixed(0)} ms; actions: ${outcome || "none ended"}${ended.length < actions.length ? ` (cap of ${opts.capMs / 1000} s reached, ${actions.length - ended.length} still running)` : ""}`,
    );
    out(
      `  replicas' CPU ${cpuTotal.toFixed(1)} s (${cpu.map((c, i) => `${replicas[i]!.name} ${c.toFixed(1)} s`).join(", ")}): ${Math.round(running / Math.max(cpuTotal, 0.01))} placements per replica CPU second, ${((cpuTotal * 1000) / Math.max(running, 1)).toFixed(2)} ms CPU per placement; load ${load0} before, ${load()} after`,
    );
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    out(
      `  plans met other replicas' placements and were planned again: ${met} times (services' log lines); 429 database_busy answers: ${busyCreating} while creating, ${busy - busyCreating} while starting (pool of ${process.env.BERTH_DATABASE_POOL ?? "10, the default"})`,
    );
    out(
      `  store: ${sum(statements)} SQL statements (${(sum(statements) / Math.max(running, 1)).toFixed(2)} per placement; ${statements.map((n, i) => `${replicas[i]!.name} ${n}`).join(", ")}), ${sum(transactions)} transactions (${(sum(transactions) / Math.max(running, 1)).toFixed(3)} per placement)`,
    );
    if (failed.length) {
      const lines = await store.db
        .selectFrom("action_logs")
        .select("line")
        .where("action_uuid", "=", failed[0]!)
        .orderBy("id")
        .execute();
      out(
        `  first failed action's last lines:\n    ${lines
          .slice(-6)
          .map((l) => l.line)
          .join("\n    ")}`,
      );
    }
    if (prof) {
      // A profile is written only by a process that exits on its own.
      replicas[0]!.proc.kill("SIGTERM");
      await replicas[0]!.exited;
      out(
        `  CPU profile of replica A written to ${prof}; placement from ${window0} to ${window1} µs (monotonic)`,
      );
    }
  } finally {
    for (const r of replicas) cleanup(r);
    await db?.drop();
  }
}
