// `npx tsx bench/replicas.ts`: Berth replicas on one PostgreSQL (BERTH_TEST_PG_URL, a database of
// its own per run). Prints API throughput with 1, 2 and 3 replicas (the load generator spreads
// requests over them round-robin; a mix of list reads and service creations) and the delay of
// events between replicas (a change made through A, seen by a subscriber on C) against the same
// replica (seen on A), p50 and p99. Figures, not assertions: a 2-core machine shared with other
// work shows the overhead of replication more than its gain.
import { parseArgs } from "node:util";
import {
  adminAuth,
  api,
  cleanup,
  freshPgDatabase,
  type Replica,
  startReplica,
} from "../test/replicas/support.ts";
import { openStream } from "../test/streams/support.ts";

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "5" },
    clients: { type: "string", default: "16" },
    events: { type: "string", default: "200" },
  },
});
const seconds = Number(values.seconds);
const clients = Number(values.clients);
const eventCount = Number(values.events);
if (!process.env.BERTH_TEST_PG_URL) throw new Error("set BERTH_TEST_PG_URL to a PostgreSQL server");

const db = await freshPgDatabase("berth_bench");
const replicas: Replica[] = [];
try {
  const env = { BERTH_DATABASE_URL: db.url, BERTH_LOG_LEVEL: "warn", BERTH_ACTION_POLL_MS: "200" };
  replicas.push(await startReplica("A", env));
  replicas.push(...(await Promise.all(["B", "C"].map((n) => startReplica(n, env)))));

  let serial = 0;
  const throughput: number[] = [];
  for (const n of [1, 2, 3]) {
    const targets = replicas.slice(0, n);
    let done = 0;
    let errors = 0;
    const end = Date.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: clients }, async (_, i) => {
        let k = i;
        while (Date.now() < end) {
          const r = targets[k++ % targets.length]!;
          const write = k % 5 === 0;
          const res = write
            ? await api(r, "POST", "/api/app/v1/service/", {
                name: `bench-${n}-${serial++}`,
                image: "busybox:local",
              })
            : await api(r, "GET", "/api/app/v1/service/?limit=25");
          if (res.status >= 400) errors++;
          done++;
        }
      }),
    );
    const rate = done / seconds;
    throughput.push(rate);
    process.stdout.write(
      `replicas=${n} clients=${clients} requests=${done} errors=${errors} throughput=${rate.toFixed(0)} req/s (x${(rate / throughput[0]!).toFixed(2)} of 1 replica)\n`,
    );
  }

  // Events: a subscriber on A (same replica) and one on C (another replica) for changes made through A.
  const [a, , c] = replicas as [Replica, Replica, Replica];
  const onA = await openStream(`ws://127.0.0.1:${a.port}/api/audit/v1/events/`, { auth: adminAuth });
  const onC = await openStream(`ws://127.0.0.1:${c.port}/api/audit/v1/events/`, { auth: adminAuth });
  const sentAt = new Map<string, number>();
  const delays = { same: [] as number[], across: [] as number[] };
  const watch = (client: typeof onA, into: number[]) =>
    client.ws.on("message", (data) => {
      const frame = JSON.parse(data.toString()) as { type: string; action: string; resource_uri: string };
      const t = sentAt.get(frame.resource_uri);
      if (frame.type === "service" && frame.action === "create" && t !== undefined) into.push(Date.now() - t);
    });
  watch(onA, delays.same);
  watch(onC, delays.across);
  for (let i = 0; i < eventCount; i++) {
    const started = Date.now();
    const res = await api(a, "POST", "/api/app/v1/service/", { name: `evt-${i}`, image: "busybox:local" });
    sentAt.set(res.body.resource_uri, started);
    await new Promise((r) => setTimeout(r, 20));
  }
  await new Promise((r) => setTimeout(r, 2000));
  onA.close();
  onC.close();
  const pct = (xs: number[], p: number) => {
    const s = [...xs].sort((x, y) => x - y);
    return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
  };
  for (const [label, xs] of [
    ["same replica (A→A)", delays.same],
    ["between replicas (A→C)", delays.across],
  ] as const) {
    process.stdout.write(
      `events ${label}: n=${xs.length}/${eventCount} p50=${pct(xs, 50)} ms p99=${pct(xs, 99)} ms (from the request's start)\n`,
    );
  }
} finally {
  for (const r of replicas) cleanup(r);
  await db.drop();
}
process.exit(0);
