// Large namespaces: list latency and memory at 1,000 nodes and 30,000 containers; one tenant's
// list of 1,000 services while another tenant makes small requests (who waits for whom, and the
// longest event-loop stall); and how many SQL statements an idle server runs per second.
import { monitorEventLoopDelay } from "node:perf_hooks";
import { formatLoad, runLoad } from "./load.ts";
import {
  ADMIN_AUTH,
  api,
  must,
  rssMb,
  SERVICE_BODY,
  seedContainers,
  seedNodes,
  sleep,
  startBerth,
} from "./support.ts";

export async function runLargeNamespace(
  opts: { nodes: number; containers: number; durationMs: number },
  out: (line: string) => void,
): Promise<void> {
  const b = await startBerth();
  try {
    const rss0 = rssMb();
    const nodes = await seedNodes(b, "admin", opts.nodes);
    const perService = 100;
    let last = { uuid: "" };
    for (let i = 0; i * perService < opts.containers; i++) {
      const s = await must(
        api<{ uuid: string }>(b, "POST", "/api/app/v1/service/", SERVICE_BODY(`big-${i}`)),
        "create",
      );
      await seedContainers(
        b,
        { ...s, namespace: "admin", name: `big-${i}` },
        nodes,
        Math.min(perService, opts.containers - i * perService),
      );
      last = s;
    }
    const oneContainer = (await b.platform.store.services.containersOfService(last.uuid))[0]!;
    if (global.gc) global.gc();
    out(
      `large namespace: ${opts.nodes} nodes, ${opts.containers} containers (RSS ${rss0} MB empty, ${rssMb()} MB seeded)`,
    );
    const pages: [label: string, path: string, opts?: { anew: boolean }][] = [
      ["list of 100 containers", "/api/app/v1/container/?limit=100"],
      ["list of 100 services", "/api/app/v1/service/?limit=100"],
      ["list of 100 nodes", "/api/infra/v1/node/?limit=100"],
      // Every answer built again (no cached answer): what a page costs after each change.
      ["list of 100 nodes, built anew", "/api/infra/v1/node/?limit=100", { anew: true }],
      ["GET one container", `/api/app/v1/container/${oneContainer.uuid}/`],
      ["GET one service", `/api/app/v1/service/${last.uuid}/`],
      ["GET one node", `/api/infra/v1/node/${nodes[0]!.uuid}/`],
    ];
    for (const [label, path, page] of pages) {
      b.platform.answers.enabled = !page?.anew;
      for (const connections of [1, 10]) {
        const r = await runLoad({
          url: `${b.base}${path}`,
          headers: { authorization: ADMIN_AUTH },
          connections,
          durationMs: opts.durationMs,
        });
        out(`  ${label}, ${connections} conn: ${formatLoad(r)}`);
      }
    }
    b.platform.answers.enabled = true;
    out(`  RSS after the lists: ${rssMb()} MB`);
  } finally {
    await b.close();
  }
}

export async function runTenants(
  opts: { services: number; durationMs: number },
  out: (line: string) => void,
): Promise<void> {
  const b = await startBerth();
  try {
    const mk = async (name: string) => {
      await must(
        api(b, "POST", "/api/v1.1/users/", {
          username: name,
          email: `${name}@example.test`,
          password: `${name}-password`,
        }),
        "user",
      );
      const k = await must(
        api<{ key: string }>(
          b,
          "POST",
          `/api/v1.1/users/${name}/apikeys/`,
          { label: "bench" },
          `Basic ${Buffer.from(`${name}:${name}-password`).toString("base64")}`,
        ),
        "key",
      );
      return `Basic ${Buffer.from(`${name}:${k.key}`).toString("base64")}`;
    };
    const big = await mk("bigtenant");
    const small = await mk("smalltenant");
    // The big tenant holds more than the default quotas allow (issue 26): an administrator lifts them.
    await must(
      api(b, "PATCH", "/api/v1.1/namespaces/bigtenant/", { limits: { services: null, containers: null } }),
      "limits",
    );
    const nodes = await seedNodes(b, "bigtenant", 10);
    for (let i = 0; i < opts.services; i++) {
      const s = await must(
        api<{ uuid: string }>(b, "POST", "/api/app/v1/service/", SERVICE_BODY(`s-${i}`), big),
        "create",
      );
      // Two large (but valid) services among them, as in the report that found the stall.
      if (i < 2) await seedContainers(b, { ...s, namespace: "bigtenant", name: `s-${i}` }, nodes, 100);
    }
    const mine = await must(
      api<{ uuid: string }>(b, "POST", "/api/app/v1/service/", SERVICE_BODY("mine"), small),
      "create",
    );
    const smallUrl = `${b.base}/api/app/v1/service/${mine.uuid}/`;
    const alone = await runLoad({
      url: smallUrl,
      headers: { authorization: small },
      connections: 1,
      durationMs: opts.durationMs,
    });
    const h = monitorEventLoopDelay({ resolution: 10 });
    h.enable();
    const [bigList, smallCalls] = await Promise.all([
      runLoad({
        url: `${b.base}/api/app/v1/service/?limit=1000`,
        headers: { authorization: big },
        connections: 1,
        durationMs: opts.durationMs,
      }),
      runLoad({
        url: smallUrl,
        headers: { authorization: small },
        connections: 1,
        durationMs: opts.durationMs,
      }),
    ]);
    h.disable();
    out(
      `tenants: one lists ${opts.services} services (limit=1000, 2 of them with 100 containers) while another GETs its one service`,
    );
    out(`  small GET alone: ${formatLoad(alone)}`);
    out(`  big list (${(bigList.bytesPerResponse / 1024).toFixed(0)} KB): ${formatLoad(bigList)}`);
    out(`  small GET meanwhile: ${formatLoad(smallCalls)}`);
    out(
      `  longest event-loop stall meanwhile: ${(h.max / 1e6).toFixed(1)} ms (p99 ${(h.percentile(99) / 1e6).toFixed(1)} ms)`,
    );
  } finally {
    await b.close();
  }
}

export async function runIdle(opts: { seconds: number }, out: (line: string) => void): Promise<void> {
  // The health watcher at its default interval: it probes every node every 5 s.
  const b = await startBerth({ start: true, env: { BERTH_NODE_HEALTH_INTERVAL_MS: "5000" } });
  try {
    await seedNodes(b, "admin", 10);
    for (let i = 0; i < 10; i++) {
      const s = await must(
        api<{ uuid: string }>(
          b,
          "POST",
          "/api/app/v1/service/",
          SERVICE_BODY(`idle-${i}`, { target_num_containers: 20 }),
        ),
        "create",
      );
      await must(api(b, "POST", `/api/app/v1/service/${s.uuid}/start/`), "start");
    }
    await b.platform.actions.idle(60_000);
    // An open events stream: its reader is part of the idle server.
    const { WebSocket } = await import("ws");
    const ws = new WebSocket(`${b.base.replace("http", "ws")}/api/audit/v1/events/`, {
      headers: { authorization: ADMIN_AUTH },
    });
    await new Promise((resolve, reject) => {
      ws.once("open", resolve);
      ws.once("error", reject);
    });
    // Past the first health sweep of the new nodes (it records them reachable).
    await sleep(6000);
    const before = b.platform.db.statements.count;
    await sleep(opts.seconds * 1000);
    const n = b.platform.db.statements.count - before;
    ws.close();
    out(
      `idle: ${(n / opts.seconds).toFixed(1)} SQL statements/s over ${opts.seconds} s (10 running services of 20 containers, 10 nodes, one events stream open; workers, reconciler and health watcher (every 5 s) started)`,
    );
  } finally {
    await b.close();
  }
}
