// `npm run bench [-- <name>…]`: runs the benchmarks (not tests; nothing fails on a slow machine)
// and prints their figures, each baseline measured in the same run. Names: api, placement,
// large, scale, tenants, idle, stats, real, router, rollout, rollout-real, fanout, writes, memory, replicas (all of
// them without a name; replicas needs BERTH_TEST_PG_URL; scale is 5,000 nodes and 150,000 containers, --quick a
// tenth). `--quick` shortens the runs. `rollout` is simulated nodes; `rollout-real` the same redeploys on real
// engines (`local` nodes, root and dockerd and caddy, else one line saying why) behind Berth's router under HTTP
// load: a baseline without a redeploy, a start-first redeploy and an automatic rollback (bench/rollout-real.ts).
// `scale --budget M`: minutes the placement steps may take in all (40, --quick 10); the steps past
// it are not run, and what ran is measured and terminated. `--nodes N --containers N` set its size.
// `placement --replicas N`: the same placement through N replica processes on one PostgreSQL
// (BERTH_TEST_PG_URL; 30,000 containers onto 1,000 nodes, --quick 3,000 onto 100).
// `writes`: PATCH throughput with 1,000 events subscribers against none (--subscribers N; 0: three rounds without).
// The events fan-out keeps its options: --subscribers N, --events N, --rate N, --batch N.
import os from "node:os";
import { parseArgs } from "node:util";
import { runApi } from "./api.ts";
import { runScale } from "./cluster-scale.ts";
import { type FanoutOptions, formatFanout, runEventsFanout } from "./events-fanout.ts";
import { runMemory } from "./memory.ts";
import { runPlacement } from "./placement.ts";
import { runReplicaPlacement } from "./placement-replicas.ts";
import { runRealDeploy } from "./real.ts";
import { runReplicas } from "./replicas.ts";
import { runRollout } from "./rollout.ts";
import { runRolloutReal } from "./rollout-real.ts";
import { runRouter } from "./router.ts";
import { runIdle, runLargeNamespace, runTenants } from "./scale.ts";
import { runStats } from "./stats.ts";
import { runWritesFanout } from "./writes-fanout.ts";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    quick: { type: "boolean" },
    subscribers: { type: "string" },
    events: { type: "string" },
    rate: { type: "string" },
    batch: { type: "string" },
    replicas: { type: "string" },
    budget: { type: "string" },
    nodes: { type: "string" },
    containers: { type: "string" },
  },
});

const positive = (name: string, text: string | undefined, fallback: number): number => {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer, got "${text}"`);
  return n;
};

const quick = values.quick === true;
const out = (line: string) => process.stdout.write(`${line}\n`);

const benches: Record<string, () => Promise<void>> = {
  api: () => runApi({ durationMs: quick ? 1500 : 3000, connections: [1, 10, 100] }, out),
  placement: () =>
    values.replicas === undefined
      ? runPlacement(
          quick
            ? { nodes: 100, services: 10, perService: 100, capMs: 60_000 }
            : { nodes: 1000, services: 100, perService: 100, capMs: 240_000 },
          out,
        )
      : runReplicaPlacement(
          {
            replicas: Math.min(5, positive("replicas", values.replicas, 1)),
            ...(quick
              ? { nodes: 100, services: 30, perService: 100, capMs: 300_000 }
              : { nodes: 1000, services: 300, perService: 100, capMs: 900_000 }),
            // --nodes N, --containers N (services of 100): a size between --quick and the full one.
            ...(values.nodes ? { nodes: positive("nodes", values.nodes, 100) } : {}),
            ...(values.containers
              ? { services: Math.ceil(positive("containers", values.containers, 3000) / 100) }
              : {}),
          },
          out,
        ),
  large: () =>
    runLargeNamespace(
      quick
        ? { nodes: 100, containers: 3000, durationMs: 1500 }
        : { nodes: 1000, containers: 30_000, durationMs: 3000 },
      out,
    ),
  scale: () =>
    runScale(
      quick
        ? {
            nodes: positive("nodes", values.nodes, 500),
            containers: positive("containers", values.containers, 15_000),
            durationMs: 1500,
            budgetMs: positive("budget", values.budget, 10) * 60_000,
          }
        : {
            nodes: positive("nodes", values.nodes, 5000),
            containers: positive("containers", values.containers, 150_000),
            durationMs: 3000,
            budgetMs: positive("budget", values.budget, 40) * 60_000,
          },
      out,
    ),
  tenants: () => runTenants({ services: quick ? 200 : 1000, durationMs: quick ? 3000 : 5000 }, out),
  idle: () => runIdle({ seconds: quick ? 5 : 10 }, out),
  stats: () =>
    runStats(
      quick
        ? { nodes: 100, containers: 1000, rounds: 6, intervalMs: 10_000 }
        : { nodes: 1000, containers: 10_000, rounds: 12, intervalMs: 10_000 },
      out,
    ),
  real: () => runRealDeploy({ containers: 10 }, out),
  router: () => runRouter({ seconds: quick ? 3 : 8, connections: 8 }, out),
  rollout: () => runRollout({ containers: quick ? 4 : 8 }, out),
  "rollout-real": () => runRolloutReal({ nodes: quick ? 1 : 2, baselineSeconds: quick ? 4 : 8 }, out),
  replicas: () =>
    runReplicas(
      quick ? { seconds: 3, clients: 16, events: 100 } : { seconds: 8, clients: 16, events: 300 },
      out,
    ),
  memory: () => runMemory(quick ? { nodes: 20, containers: 1000 } : { nodes: 100, containers: 5000 }, out),
  writes: () =>
    runWritesFanout(
      {
        // `--subscribers 0`: only the rounds without (the write path's own cost, quickly).
        subscribers: values.subscribers === "0" ? 0 : positive("subscribers", values.subscribers, 1000),
        rounds: 2,
        connections: 10,
        durationMs: quick ? 3000 : 6000,
      },
      out,
    ),
  fanout: async () => {
    const custom = [values.subscribers, values.events, values.rate, values.batch].some(
      (v) => v !== undefined,
    );
    const scenarios: FanoutOptions[] = custom
      ? [
          {
            subscribers: positive("subscribers", values.subscribers, 1000),
            events: positive("events", values.events, 1000),
            ratePerS: positive("rate", values.rate, 100),
            batch: positive("batch", values.batch, 1),
          },
        ]
      : [
          { subscribers: 1000, events: 500, ratePerS: 50, batch: 1 },
          { subscribers: 1000, events: 3000, ratePerS: 100_000, batch: 50 },
        ];
    for (const scenario of scenarios) out(formatFanout(await runEventsFanout(scenario)));
  },
};

const unknown = positionals.filter((p) => !(p in benches));
if (unknown.length) {
  process.stderr.write(
    `unknown benchmark ${unknown.join(", ")}; known: ${Object.keys(benches).join(", ")}\n`,
  );
  process.exit(2);
}
const chosen = positionals.length ? positionals : Object.keys(benches);
out(
  `berth bench ${chosen.join(" ")}${quick ? " (quick)" : ""}: ${os.cpus().length} CPUs, load ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")}, node ${process.version}`,
);
for (const name of chosen) {
  const t0 = performance.now();
  await benches[name]!();
  out(
    `  (${name} took ${((performance.now() - t0) / 1000).toFixed(0)} s, load ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")})`,
  );
}
process.exit(0);
