// `npm run bench -- replicas [--quick]`: Berth replicas (real server processes) on one PostgreSQL
// (BERTH_TEST_PG_URL, a database of its own per run, dropped at the end). Prints:
// - API throughput with 1, 2 and 3 replicas: the same keep-alive clients spread their requests
//   round-robin over the replicas in use (a mix of service list pages, single services and service
//   creations), each figure with its ratio to 1 replica;
// - the delay of events between replicas: changes made through A and B, seen by a subscriber on C,
//   against a subscriber on A for A's own changes (the same replica, no PostgreSQL notification in
//   between), p50 and p99, from the moment the change's request was sent.
// Figures, not assertions: on a 2-core machine shared with PostgreSQL and the load generator, more
// replicas show their overhead more than their gain.
import http from "node:http";
import {
  adminAuth,
  api,
  cleanup,
  type FreshDatabase,
  freshPgDatabase,
  type Replica,
  startReplica,
} from "../test/replicas/support.ts";
import { openStream, type StreamClient } from "../test/streams/support.ts";
import { percentile } from "./load.ts";

export interface ReplicasOptions {
  /** Seconds of load per replica count. */
  seconds: number;
  /** Keep-alive client connections, spread over the replicas in use. */
  clients: number;
  /** Changes made for the events delay. */
  events: number;
}

interface Phase {
  requests: number;
  errors: number;
  rps: number;
  p50: number;
  p99: number;
}

/** One request on a keep-alive agent; resolves with the status (0 on a transport error). */
function request(
  agent: http.Agent,
  r: Replica,
  method: string,
  path: string,
  body?: unknown,
): Promise<number> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve) => {
    const req = http.request(
      {
        agent,
        host: "127.0.0.1",
        port: r.port,
        method,
        path,
        headers: {
          authorization: adminAuth,
          ...(payload
            ? { "content-type": "application/json", "content-length": Buffer.byteLength(payload) }
            : {}),
        },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
        res.on("error", () => resolve(0));
      },
    );
    req.on("error", () => resolve(0));
    req.end(payload);
  });
}

async function loadPhase(
  targets: Replica[],
  opts: ReplicasOptions,
  seeded: string[],
  tag: string,
): Promise<Phase> {
  const agents = new Map(targets.map((r) => [r.name, new http.Agent({ keepAlive: true })]));
  const latencies: number[] = [];
  let errors = 0;
  let serial = 0;
  let measuring = false;
  let stop = false;
  const loop = async (client: number) => {
    let k = client;
    while (!stop) {
      const r = targets[k % targets.length]!;
      const kind = k % 10;
      k += 1;
      const t0 = performance.now();
      const status =
        kind === 0
          ? await request(agents.get(r.name)!, r, "POST", "/api/app/v1/service/", {
              name: `b${tag}-${serial++}`,
              image: "busybox:local",
            })
          : kind <= 2
            ? await request(
                agents.get(r.name)!,
                r,
                "GET",
                `/api/app/v1/service/${seeded[k % seeded.length]}/`,
              )
            : await request(agents.get(r.name)!, r, "GET", "/api/app/v1/service/?limit=25");
      if (!measuring) continue;
      latencies.push(performance.now() - t0);
      if (status < 200 || status >= 300) errors++;
    }
  };
  const loops = Array.from({ length: opts.clients }, (_, i) => loop(i));
  await new Promise((r) => setTimeout(r, 500)); // connections open, caches warm
  measuring = true;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, opts.seconds * 1000));
  measuring = false;
  const elapsed = (performance.now() - t0) / 1000;
  stop = true;
  await Promise.all(loops);
  for (const a of agents.values()) a.destroy();
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    errors,
    rps: latencies.length / elapsed,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
  };
}

/** Frames of service creations, by resource URI, with the time each arrived. */
function arrivals(client: StreamClient): Map<string, number> {
  const seen = new Map<string, number>();
  client.ws.on("message", (data) => {
    const f = JSON.parse(data.toString()) as { type: string; action: string; resource_uri: string };
    if (f.type === "service" && f.action === "create" && !seen.has(f.resource_uri))
      seen.set(f.resource_uri, performance.now());
  });
  return seen;
}

async function eventsDelay(replicas: Replica[], count: number) {
  const [a, b, c] = replicas as [Replica, Replica, Replica];
  const onA = await openStream(`ws://127.0.0.1:${a.port}/api/audit/v1/events/`, { auth: adminAuth });
  const onC = await openStream(`ws://127.0.0.1:${c.port}/api/audit/v1/events/`, { auth: adminAuth });
  const seenOnA = arrivals(onA);
  const seenOnC = arrivals(onC);
  const sent: { uri: string; at: number; through: string }[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const through = i % 2 === 0 ? a : b;
      const at = performance.now();
      const res = await api(through, "POST", "/api/app/v1/service/", {
        name: `evt-${i}`,
        image: "busybox:local",
      });
      if (res.status === 201) sent.push({ uri: res.body.resource_uri as string, at, through: through.name });
      await new Promise((r) => setTimeout(r, 25));
    }
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && seenOnC.size < sent.length) await new Promise((r) => setTimeout(r, 50));
  } finally {
    onA.close();
    onC.close();
  }
  const delays = (seen: Map<string, number>, from: (s: (typeof sent)[number]) => boolean) => {
    const xs = sent.filter(from).flatMap((s) => (seen.has(s.uri) ? [seen.get(s.uri)! - s.at] : []));
    return xs.sort((x, y) => x - y);
  };
  return {
    sent: sent.length,
    same: delays(seenOnA, (s) => s.through === a.name),
    across: delays(seenOnC, () => true),
    sameSent: sent.filter((s) => s.through === a.name).length,
  };
}

export async function runReplicas(opts: ReplicasOptions, out: (line: string) => void): Promise<void> {
  if (!process.env.BERTH_TEST_PG_URL?.startsWith("postgres")) {
    out("replicas: skipped (set BERTH_TEST_PG_URL to a PostgreSQL server, as .ci/run does)");
    return;
  }
  let db: FreshDatabase | undefined;
  const replicas: Replica[] = [];
  try {
    db = await freshPgDatabase("berth_bench");
    const env = { BERTH_DATABASE_URL: db.url, BERTH_LOG_LEVEL: "warn" };
    // A migrates the empty database; B and C start together on it.
    replicas.push(await startReplica("A", env));
    replicas.push(...(await Promise.all(["B", "C"].map((n) => startReplica(n, env)))));
    const seeded: string[] = [];
    for (let i = 0; i < 50; i++) {
      const res = await api(replicas[0]!, "POST", "/api/app/v1/service/", {
        name: `seed-${i}`,
        image: "busybox:local",
      });
      if (res.status !== 201) throw new Error(`seeding failed: ${res.status} ${JSON.stringify(res.body)}`);
      seeded.push(res.body.uuid as string);
    }
    out(
      `replicas: ${opts.clients} keep-alive clients, ${opts.seconds} s per figure; requests: 70% GET a page of 25 services, 20% GET one service, 10% POST a service (of 50+ in the namespace)`,
    );
    let base: number | undefined;
    for (const n of [1, 2, 3]) {
      const p = await loadPhase(replicas.slice(0, n), opts, seeded, String(n));
      base ??= p.rps;
      out(
        `  ${n} replica${n > 1 ? "s" : " "}: ${p.rps.toFixed(0).padStart(5)} req/s (x${(p.rps / base).toFixed(2)} of 1 replica)  p50 ${p.p50.toFixed(1)} ms  p99 ${p.p99.toFixed(1)} ms  requests ${p.requests}  errors ${p.errors}`,
      );
    }
    const ev = await eventsDelay(replicas, opts.events);
    const line = (label: string, xs: number[], of: number) =>
      `  ${label}: p50 ${percentile(xs, 0.5).toFixed(1)} ms  p99 ${percentile(xs, 0.99).toFixed(1)} ms  (${xs.length}/${of} seen)`;
    out(
      `replicas: events delay, from the change's request to the frame (${ev.sent} service creations, 25 ms apart)`,
    );
    out(line("between replicas (through A and B, seen on C)", ev.across, ev.sent));
    out(line("same replica     (through A, seen on A)      ", ev.same, ev.sameSent));
  } finally {
    for (const r of replicas) cleanup(r);
    await db?.drop();
  }
}
