// `npm run bench -- memory [--quick]` (issue 34, item 2): what Berth's memory holds per running
// container and what stays after they are terminated. A platform on SQLite with simulated nodes
// (engines in this process) runs a service of N containers, then terminates it; the heap is
// measured after a full collection at each step (idle, running, terminated), and the heap's
// composition (objects by constructor, from a heap snapshot) is compared between idle and
// terminated: what grew there is held by history, not by what runs.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import v8 from "node:v8";
import vm from "node:vm";
import { census, censusLines, heapSpaces } from "./census.ts";
import { api, type Bench, must, SERVICE_BODY, seedNodes, sleep, startBerth } from "./support.ts";

export interface MemoryOptions {
  nodes: number;
  containers: number;
}

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;

function heapMb(): { heap: number; rss: number } {
  for (let i = 0; i < 3; i++) gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed / 1024 / 1024, rss: m.rss / 1024 / 1024 };
}

/** Self size and count of the heap's objects by constructor (or kind), from a snapshot. */
function composition(): Map<string, { count: number; bytes: number }> {
  for (let i = 0; i < 3; i++) gc();
  const file = v8.writeHeapSnapshot(
    path.join(os.tmpdir(), `berth-bench-${process.pid}-${Date.now()}.heapsnapshot`),
  );
  try {
    const snap = JSON.parse(fs.readFileSync(file, "utf8")) as {
      snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
      nodes: number[];
      strings: string[];
    };
    const fields = snap.snapshot.meta.node_fields;
    const stride = fields.length;
    const typeAt = fields.indexOf("type");
    const nameAt = fields.indexOf("name");
    const sizeAt = fields.indexOf("self_size");
    const types = snap.snapshot.meta.node_types[0];
    const out = new Map<string, { count: number; bytes: number }>();
    for (let i = 0; i < snap.nodes.length; i += stride) {
      const type = types[snap.nodes[i + typeAt]!]!;
      const name =
        type === "object" || type === "closure" ? snap.strings[snap.nodes[i + nameAt]!]! : `(${type})`;
      const key = type === "closure" ? `${name}()` : name;
      const e = out.get(key) ?? { count: 0, bytes: 0 };
      e.count += 1;
      e.bytes += snap.nodes[i + sizeAt]!;
      out.set(key, e);
    }
    return out;
  } finally {
    fs.rmSync(file, { force: true });
  }
}

async function waitState(b: Bench, uri: string, state: string, capMs: number): Promise<void> {
  const until = Date.now() + capMs;
  while (Date.now() < until) {
    const r = await api<{ state: string }>(b, "GET", uri);
    if (r.body.state === state) return;
    await sleep(250);
  }
  throw new Error(`${uri} did not reach ${state} in ${capMs} ms`);
}

export async function runMemory(opts: MemoryOptions, out: (line: string) => void): Promise<void> {
  const b = await startBerth({ start: true, env: { BERTH_RECONCILE_INTERVAL_MS: "600000" } });
  try {
    await seedNodes(b, "admin", opts.nodes);
    await b.platform.reconciler.resync();
    // Warm: one small service started and terminated, so what is made once is made before measuring.
    const warm = await must(
      api<{ resource_uri: string }>(b, "POST", "/api/app/v1/service/", SERVICE_BODY("warm")),
      "create",
    );
    await must(api(b, "POST", `${warm.resource_uri}start/`), "start");
    await waitState(b, warm.resource_uri, "Running", 60_000);
    await must(api(b, "DELETE", warm.resource_uri), "terminate");
    await waitState(b, warm.resource_uri, "Terminated", 60_000);
    await sleep(500);
    // The idle composition is taken first, so the heap measured idle holds it too.
    const idleComposition = composition();
    const idle = heapMb();

    // Services of 100 containers (the most one service holds), started at once.
    const services: string[] = [];
    for (let i = 0; i * 100 < opts.containers; i++) {
      const n = Math.min(100, opts.containers - i * 100);
      const svc = await must(
        api<{ resource_uri: string }>(
          b,
          "POST",
          "/api/app/v1/service/",
          SERVICE_BODY(`many-${i}`, { target_num_containers: n }),
        ),
        "create",
      );
      services.push(svc.resource_uri);
    }
    await Promise.all(services.map((uri) => must(api(b, "POST", `${uri}start/`), "start")));
    for (const uri of services) await waitState(b, uri, "Running", 600_000);
    await sleep(500);
    const running = heapMb();
    const spacesRunning = heapSpaces();
    const runningCensus = census(b.platform, { minSize: opts.containers / 2 });
    await Promise.all(services.map((uri) => must(api(b, "DELETE", uri), "terminate")));
    for (const uri of services) await waitState(b, uri, "Terminated", 600_000);
    await sleep(1000);
    const terminated = heapMb();
    const spacesTerminated = heapSpaces();
    const terminatedCensus = census(b.platform, { minSize: opts.containers / 4 });
    const after = composition();

    const perContainer = (mb: number) => ((mb * 1024) / opts.containers).toFixed(1);
    out(
      `memory: ${opts.containers} containers on ${opts.nodes} simulated nodes (engines in this process), heap after a full GC`,
    );
    out(`  idle:       heap ${idle.heap.toFixed(1)} MB, RSS ${idle.rss.toFixed(0)} MB`);
    out(
      `  running:    heap ${running.heap.toFixed(1)} MB (+${perContainer(running.heap - idle.heap)} KB per container), RSS ${running.rss.toFixed(0)} MB`,
    );
    out(
      `  terminated: heap ${terminated.heap.toFixed(1)} MB (+${perContainer(terminated.heap - idle.heap)} KB per container still held), RSS ${terminated.rss.toFixed(0)} MB`,
    );
    const grown = [...after]
      .map(([name, e]) => {
        const before = idleComposition.get(name) ?? { count: 0, bytes: 0 };
        return { name, count: e.count - before.count, bytes: e.bytes - before.bytes };
      })
      .filter((g) => g.bytes > 0)
      .sort((x, y) => y.bytes - x.bytes)
      .slice(0, 12);
    out(`  heap spaces (MB) running: ${spacesRunning}; terminated: ${spacesTerminated}`);
    out("  collections reachable from the platform while running (entries):");
    for (const line of censusLines(runningCensus, opts.containers)) out(`    ${line}`);
    out("  and once terminated:");
    for (const line of censusLines(terminatedCensus, opts.containers)) out(`    ${line}`);
    out("  held after termination, by constructor (growth since idle):");
    for (const g of grown) {
      out(
        `    ${(g.bytes / 1024).toFixed(0).padStart(8)} KB  ${String(g.count).padStart(7)} × ${g.name.slice(0, 60)}`,
      );
    }
  } finally {
    await b.close();
  }
}
