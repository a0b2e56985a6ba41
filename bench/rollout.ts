// Rolling redeploys and rollbacks (issue 29) on simulated nodes: a service of N containers with an
// HTTP health check on two nodes whose fake engines take a docker-like time per call (create
// 100 ms, start 150 ms, stop 100 ms, remove 50 ms); the same image change redeployed all at once
// (no strategy: the baseline, measured in the same run), stop-first one and two at a time,
// start-first one and two beside the old; then a manual rollback, and an automatic one (a new
// image whose check fails). Each line: the action's time, its ratio to the baseline, and the
// fewest containers serving (running and healthy) at any moment, sampled every 20 ms.

import { LABELS } from "../src/domain/service.ts";
import type { ContainerSpec, StopContainerOptions, StopOutcome } from "../src/drivers/engine.ts";
import { FakeEngine, type FakeRegistryImage } from "../src/drivers/fake/index.ts";
import {
  type Caller,
  call,
  createUser,
  type Harness,
  startHarness,
  waitFor,
} from "../test/support/harness.ts";
import { ratio, sleep } from "./support.ts";

const LATENCY_MS = { create: 100, start: 150, stop: 100, remove: 50 };

/** A fake engine that takes about as long per call as a Docker engine on a small machine. */
class SlowEngine extends FakeEngine {
  override async createContainer(spec: ContainerSpec): Promise<string> {
    await sleep(LATENCY_MS.create);
    return super.createContainer(spec);
  }
  override async startContainer(id: string): Promise<void> {
    await sleep(LATENCY_MS.start);
    return super.startContainer(id);
  }
  override async stopContainer(id: string, options?: StopContainerOptions): Promise<StopOutcome> {
    await sleep(LATENCY_MS.stop);
    return super.stopContainer(id, options);
  }
  override async removeContainer(id: string, options?: Parameters<FakeEngine["removeContainer"]>[1]) {
    await sleep(LATENCY_MS.remove);
    return super.removeContainer(id, options);
  }
}

const serving = (ports: number[], status = 200) => ({ ports, status });
const REGISTRY: FakeRegistryImage[] = [
  { ref: "app:1", cmd: ["server"], programs: ["server"], serves: serving([8080]) },
  { ref: "app:2", cmd: ["server"], programs: ["server"], serves: serving([8080]) },
  { ref: "app:sick", cmd: ["server"], programs: ["server"], serves: serving([8080], 503) },
];
const CHECK = { type: "http", port: 8080, interval: 0.1, timeout: 1, retries: 2 };

interface Run {
  ms: number;
  state: string;
  minServing: number;
}

export async function runRollout(opts: { containers: number }, out: (line: string) => void) {
  const engines: SlowEngine[] = [];
  const h = await startHarness({
    env: { BERTH_RECONCILE_INTERVAL_MS: "1000", BERTH_CONTAINER_STOP_TIMEOUT_S: "1" },
    stepTimeoutMs: 120_000,
    makeFakeEngine: (n) => {
      const e = new SlowEngine({
        name: `bench-${n.uuid.slice(0, 8)}`,
        subnet: `10.${128 + Math.floor(n.slot / 256)}.${n.slot % 256}.0/24`,
        registry: REGISTRY,
      });
      engines.push(e);
      return e;
    },
  });
  try {
    const alice = await createUser(h, "alice");
    await deploy(h, alice);
    const n = opts.containers;
    out(
      `rollout: ${n} containers with an HTTP check (interval 0.1 s) on 2 simulated nodes; engine calls create ${LATENCY_MS.create} / start ${LATENCY_MS.start} / stop ${LATENCY_MS.stop} / remove ${LATENCY_MS.remove} ms`,
    );
    const scenarios: [string, Record<string, unknown> | null][] = [
      ["all at once (no strategy, baseline)", null],
      ["stop-first, 1 at a time", { order: "stop-first", max_unavailable: 1 }],
      ["stop-first, 2 at a time", { order: "stop-first", max_unavailable: 2 }],
      ["start-first, 1 beside the old", { order: "start-first", max_surge: 1 }],
      ["start-first, 2 beside the old", { order: "start-first", max_surge: 2 }],
    ];
    let baseline = 0;
    for (const [i, [label, rollout]] of scenarios.entries()) {
      const uri = await runningService(h, alice, `r${i}`, n, rollout);
      await must(call(h, alice, "PATCH", uri, { image: "app:2" }));
      const r = await timed(h, alice, engines, uri, `${uri}redeploy/`);
      if (i === 0) baseline = r.ms;
      out(
        `rollout: redeploy ${label}: ${(r.ms / 1000).toFixed(2)} s (${ratio(r.ms, baseline)} the baseline), ${r.state}, fewest serving ${r.minServing} of ${n}`,
      );
      if (i === 3) {
        const back = await timed(h, alice, engines, uri, `${uri}rollback/`);
        out(
          `rollout: manual rollback, start-first 1 beside the old: ${(back.ms / 1000).toFixed(2)} s (${ratio(back.ms, baseline)}), ${back.state}, fewest serving ${back.minServing} of ${n}`,
        );
        await must(call(h, alice, "PATCH", uri, { image: "app:sick" }));
        const auto = await timed(h, alice, engines, uri, `${uri}redeploy/`);
        out(
          `rollout: a new image whose check fails, start-first: rolled back in ${(auto.ms / 1000).toFixed(2)} s (${ratio(auto.ms, baseline)}), ${auto.state}, fewest serving ${auto.minServing} of ${n}`,
        );
      }
      await must(call(h, alice, "DELETE", uri));
    }
  } finally {
    await h.close();
    for (const e of engines) e.close();
  }
}

async function must(p: Promise<{ status: number; raw: string }>) {
  const r = await p;
  if (r.status >= 300) throw new Error(`${r.status}: ${r.raw}`);
  return r;
}

async function deploy(h: Harness, alice: Caller) {
  const c = await must(
    call(h, alice, "POST", "/api/infra/v1/nodecluster/", {
      name: "bench",
      region: "/api/infra/v1/region/aws/us-east-1/",
      node_type: "/api/infra/v1/nodetype/aws/t2.micro/",
      target_num_nodes: 2,
    }),
  );
  const uri = JSON.parse(c.raw).resource_uri as string;
  await must(call(h, alice, "POST", `${uri}deploy/`));
  await waitFor(
    "the cluster",
    async () => (await call(h, alice, "GET", uri)).body.state === "Deployed",
    60_000,
  );
}

async function runningService(
  h: Harness,
  alice: Caller,
  name: string,
  n: number,
  rollout: Record<string, unknown> | null,
): Promise<string> {
  const made = await must(
    call(h, alice, "POST", "/api/app/v1/service/", {
      image: "app:1",
      name,
      target_num_containers: n,
      health_check: CHECK,
      rollout,
    }),
  );
  const uri = JSON.parse(made.raw).resource_uri as string;
  await must(call(h, alice, "POST", `${uri}start/`));
  await waitFor(
    `${name} Running`,
    async () => (await call(h, alice, "GET", uri)).body.state === "Running",
    60_000,
  );
  return uri;
}

/** POSTs an operation, waits for its action to end; the time, the outcome and the fewest serving meanwhile. */
async function timed(
  h: Harness,
  alice: Caller,
  engines: SlowEngine[],
  uri: string,
  path: string,
): Promise<Run> {
  const service = uri.split("/").filter(Boolean).at(-1)!;
  let minServing = Number.POSITIVE_INFINITY;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      minServing = Math.min(minServing, await servingOf(engines, service));
      await sleep(20);
    }
  })();
  const t0 = performance.now();
  const res = await must(call(h, alice, "POST", path));
  const action = (res as unknown as { headers: Record<string, string> }).headers["x-platform-action-uri"]!;
  const a = await waitFor(
    "the action",
    async () => {
      const body = (await call(h, alice, "GET", action)).body;
      return ["Success", "Failed", "Canceled"].includes(body.state) ? body : undefined;
    },
    120_000,
    10,
  );
  const ms = performance.now() - t0;
  sampling = false;
  await sampler;
  return { ms, state: a.state, minServing };
}

async function servingOf(engines: SlowEngine[], service: string): Promise<number> {
  let n = 0;
  for (const e of engines) {
    for (const c of await e.listContainers({ labels: { [LABELS.service]: service } })) {
      const v = await e.inspectContainer(c.id);
      if (v?.running && (!v.health || v.health.status === "healthy")) n += 1;
    }
  }
  return n;
}
