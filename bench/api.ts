// API throughput and latency against a bare Fastify serving the same bodies, in the same run:
// GET one service and GET a page of 100 containers at 1, 10 and 100 keep-alive connections, in a
// namespace of 250 services (a realistic neighbourhood: a list must not pay for it). Then the
// latency of mutating calls: a PATCH (synchronous) and an asynchronous stop/start with the time
// until its action ends, each with the action it recorded.
import { formatLoad, type LoadResult, percentile, runLoad } from "./load.ts";
import {
  api,
  type Bench,
  must,
  ratio,
  SERVICE_BODY,
  seedContainers,
  seedNodes,
  startBare,
  startBerth,
} from "./support.ts";

const actionUuidOf = (headers: Record<string, unknown>) =>
  String(headers["x-platform-action-uri"] ?? "")
    .split("/")
    .filter(Boolean)
    .at(-1) ?? "";
const actionState = (a: { action: string; state: string } | undefined) =>
  a ? `${a.action} ${a.state}` : "none";

export interface ApiOptions {
  durationMs: number;
  connections: number[];
}

export async function seedApi(b: Bench) {
  const nodes = await seedNodes(b, "admin", 5);
  const db = await must(
    api<{ uuid: string }>(b, "POST", "/api/app/v1/service/", SERVICE_BODY("db")),
    "create db",
  );
  await seedContainers(b, { ...db, namespace: "admin", name: "db" }, nodes, 2);
  const web = await must(
    api<{ uuid: string; resource_uri: string }>(
      b,
      "POST",
      "/api/app/v1/service/",
      SERVICE_BODY("web", {
        linked_to_service: [{ to_service: `/api/app/v1/service/${db.uuid}/`, name: "db" }],
      }),
    ),
    "create web",
  );
  await seedContainers(b, { ...web, namespace: "admin", name: "web" }, nodes, 3);
  // 248 more services, 25 of them with 5 containers: 130 containers in all.
  for (let i = 0; i < 248; i++) {
    const s = await must(
      api<{ uuid: string }>(b, "POST", "/api/app/v1/service/", SERVICE_BODY(`svc-${i}`)),
      "create service",
    );
    if (i < 25) await seedContainers(b, { ...s, namespace: "admin", name: `svc-${i}` }, nodes, 5);
  }
  return { web, nodes };
}

export async function runApi(opts: ApiOptions, out: (line: string) => void): Promise<void> {
  const b = await startBerth();
  try {
    const { web } = await seedApi(b);
    const one = `/api/app/v1/service/${web.uuid}/`;
    const list = "/api/app/v1/container/?limit=100";
    const bodies: Record<string, unknown> = {
      [one]: (await must(api(b, "GET", one), "get one")) as unknown,
      [list]: (await must(api(b, "GET", list), "list")) as unknown,
    };
    const bare = await startBare(
      Object.fromEntries(Object.entries(bodies).map(([k, v]) => [k.split("?")[0]!, v])),
    );
    out(
      `API throughput, Berth vs bare Fastify serving the same bodies (${opts.durationMs} ms per run, 250 services, 130 containers)`,
    );
    // The goals of issue 18, printed against this run's figures (not assertions).
    const measured = new Map<string, { berth: LoadResult; bare: LoadResult }>();
    try {
      for (const [label, path] of [
        [`GET one service (${(JSON.stringify(bodies[one]).length / 1024).toFixed(1)} KB)`, one],
        [`GET 100 containers (${(JSON.stringify(bodies[list]).length / 1024).toFixed(0)} KB)`, list],
      ] as const) {
        for (const connections of opts.connections) {
          const berth = await runLoad({
            url: `${b.base}${path}`,
            headers: {
              authorization: `Basic ${Buffer.from("admin:bench-admin-key-0123456789abcdef").toString("base64")}`,
            },
            connections,
            durationMs: opts.durationMs,
          });
          const floor = await runLoad({
            url: `${bare.base}${path.split("?")[0]}`,
            connections,
            durationMs: opts.durationMs,
          });
          measured.set(`${path}@${connections}`, { berth, bare: floor });
          out(`  ${label}, ${connections} conn: Berth ${formatLoad(berth)}`);
          out(`    bare ${formatLoad(floor)}  → throughput ${ratio(berth.rps, floor.rps)} of bare`);
        }
      }
      const goal = (what: string, met: boolean | undefined, figure: string) =>
        out(`  goal ${met === undefined ? "not measured" : met ? "met" : "NOT met"}: ${what} (${figure})`);
      const oneAt10 = measured.get(`${one}@10`);
      const oneAt100 = measured.get(`${one}@100`);
      const lists = [...measured.entries()].filter(([k]) => k.startsWith(`${list}@`)).map(([, m]) => m);
      const worstList = Math.min(...lists.map((m) => m.berth.rps / Math.max(1, m.bare.rps)));
      goal(
        "GET one service >= 0.5x bare at 10 connections",
        oneAt10 && oneAt10.berth.rps >= 0.5 * oneAt10.bare.rps,
        oneAt10 ? ratio(oneAt10.berth.rps, oneAt10.bare.rps) : "-",
      );
      goal(
        "GET one service p99 < 10 ms at 100 connections",
        oneAt100 && oneAt100.berth.latencyMs.p99 < 10,
        oneAt100 ? `${oneAt100.berth.latencyMs.p99.toFixed(1)} ms` : "-",
      );
      goal(
        "GET 100 containers >= 0.3x bare at every connection count",
        lists.length ? worstList >= 0.3 : undefined,
        lists.length ? `worst ${worstList.toFixed(2)}×` : "-",
      );
    } finally {
      await bare.app.close();
    }

    // Mutating calls, one at a time.
    const patch: number[] = [];
    let patchAction = "";
    for (let i = 0; i < 50; i++) {
      const t0 = performance.now();
      const r = await api(b, "PATCH", one, { target_num_containers: 3 + (i % 2) });
      patch.push(performance.now() - t0);
      patchAction = `${r.status}, action ${actionState(await b.platform.store.actions.findAction(actionUuidOf(r.headers)))}`;
    }
    patch.sort((a, c) => a - c);
    out(
      `  PATCH service: p50 ${percentile(patch, 0.5).toFixed(2)} ms, p99 ${percentile(patch, 0.99).toFixed(2)} ms (answer ${patchAction.trim()})`,
    );
    const small = await must(
      api<{ uuid: string }>(b, "POST", "/api/app/v1/service/", SERVICE_BODY("small")),
      "small",
    );
    await b.platform.start();
    const answered: number[] = [];
    const finished: Record<string, number[]> = { start: [], stop: [] };
    const states: string[] = [];
    for (const op of ["start", "stop", "start", "stop", "start", "stop"]) {
      const t0 = performance.now();
      const r = await api(b, "POST", `/api/app/v1/service/${small.uuid}/${op}/`);
      answered.push(performance.now() - t0);
      const uuid = actionUuidOf(r.headers);
      for (;;) {
        const a = await b.platform.store.actions.findAction(uuid);
        if (!a) {
          states.push(`${op}: no action (${r.status})`);
          break;
        }
        if (["Success", "Failed", "Canceled"].includes(a.state)) {
          finished[op]!.push(performance.now() - t0);
          states.push(`${op} ${a.state}`);
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    }
    answered.sort((a, c) => a - c);
    const ended = (op: string) => {
      const ms = finished[op]!.sort((a, c) => a - c);
      return `${op} p50 ${percentile(ms, 0.5).toFixed(1)} ms, max ${(ms.at(-1) ?? 0).toFixed(1)} ms`;
    };
    out(
      `  async stop/start of a 1-container service: answered p50 ${percentile(answered, 0.5).toFixed(1)} ms; action ended: ${ended("start")}, ${ended("stop")} (${states.join(", ")})`,
    );
    // `sleep` as PID 1 ignores SIGTERM (as on Docker), so a stop waits out the 10 s grace.
    out("    (a stop includes the engine's 10 s grace: the service's `sleep` is PID 1 and ignores SIGTERM)");
  } finally {
    await b.close();
  }
}
