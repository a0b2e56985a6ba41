// A simulated node's engine holds what runs on it, not its history (issue 34, item 2): simulated
// engines live in Berth's own process, so what they keep of removed containers is Berth's memory.
// After a full collection, 10,000 more containers created, started, sampled by the stats collector's
// call and removed leave a fake engine's heap within 1 MB (the stats counters of every container
// ever sampled were kept before: ~4 MB). A heap check with a generous bound, not a benchmark.
import assert from "node:assert/strict";
import { test } from "node:test";
import v8 from "node:v8";
import vm from "node:vm";
import type { ContainerSpec } from "../../src/drivers/engine.ts";
import { FakeEngine } from "../../src/drivers/fake/index.ts";

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;

function heapBytes(): number {
  for (let i = 0; i < 4; i++) gc();
  return process.memoryUsage().heapUsed;
}

/** `count` containers run through their life on `engine`, as Berth drives a simulated node. */
async function lifecycles(engine: FakeEngine, count: number, first: number): Promise<void> {
  for (let at = 0; at < count; at += 100) {
    const ids = await Promise.all(
      Array.from({ length: Math.min(100, count - at) }, (_, i) =>
        engine.createContainer({
          name: `web-${first + at + i}`,
          image: "busybox:local",
          cmd: ["sleep", "100000"],
          labels: { "berth.test": String(first + at + i) },
        }),
      ),
    );
    for (const id of ids) {
      await engine.startContainer(id);
      await engine.containerStats(id);
      await engine.removeContainer(id, { force: true });
    }
  }
}

test("10,000 more removed containers leave a fake engine's heap within 1 MB", async (t) => {
  const engine = new FakeEngine({ subnet: "10.200.0.0/24" });
  // Warm: what is made once (and the events remembered, a bounded number) exists before measuring.
  await lifecycles(engine, 1000, 0);
  const baseline = heapBytes();
  await lifecycles(engine, 10_000, 1000);
  const grown = heapBytes() - baseline;
  t.diagnostic(`heap growth: ${(grown / 1024).toFixed(0)} KB`);
  assert.ok(
    grown < 1024 * 1024,
    `the heap grew by ${(grown / 1024 / 1024).toFixed(2)} MB for 10,000 removed containers`,
  );
});

/**
 * A create request shaped as Berth sends one (bench/cluster-scale.ts samples it): per-container
 * labels and platform variables, the rest the same for every container of a service.
 */
function berthSpec(i: number): ContainerSpec {
  const id = (n: number) => `${String(i).padStart(8, "0")}-0000-4000-8000-${String(n).padStart(12, "0")}`;
  const [container, service, node] = [id(1), id(2), id(3)];
  const env: Record<string, string> = {};
  for (const p of ["PLATFORM", "DOCKERCLOUD"]) {
    env[`${p}_CONTAINER_API_URI`] = `/api/app/v1/admin/container/${container}/`;
    env[`${p}_SERVICE_API_URI`] = `/api/app/v1/admin/service/${service}/`;
    env[`${p}_NODE_API_URI`] = `/api/infra/v1/admin/node/${node}/`;
    env[`${p}_CONTAINER_FQDN`] = `web-${i}.admin.cont.berth.internal`;
    env[`${p}_SERVICE_FQDN`] = `web.admin.svc.berth.internal`;
    env[`${p}_REST_HOST`] = `http://127.0.0.1:${8000 + (i % 1)}`;
  }
  return {
    name: `web-${i}-${container.slice(0, 8)}`,
    image: "busybox:local",
    env,
    cmd: ["sleep", "100000"],
    labels: {
      "io.berth.platform-env": Object.keys(env).join(","),
      "io.berth.container": container,
      "io.berth.service": service,
      "io.berth.namespace": "admin",
      "io.berth.node": node,
    },
    exposedPorts: [{ containerPort: 80, protocol: "tcp" }],
    networkMode: "bridge",
    hostname: `web-${i}`,
    restartPolicy: { name: "no" },
  };
}

// A simulated container costs what it holds, not copies of it (issue 34, item 2): 5,000 running
// containers made from Berth's create requests (their own strings included) hold at most 5 KB each
// (10.2 KB before: a spread copy of each spec and record with a hidden class of its own, three copies
// of its environment, eight empty collections and the shell's frames for `sleep`; 2.6 KB after).
test("a running simulated container made from Berth's create request holds at most 5 KB of heap", async (t) => {
  const engines = Array.from({ length: 100 }, (_, i) => new FakeEngine({ subnet: `10.201.${i}.0/24` }));
  const specs = Array.from({ length: 5000 }, (_, i) => berthSpec(i));
  await engines[0]!.startContainer(await engines[0]!.createContainer({ ...berthSpec(-1), name: "warm" }));
  const baseline = heapBytes();
  for (const [i, spec] of specs.entries()) {
    const engine = engines[i % engines.length]!;
    await engine.startContainer(await engine.createContainer(spec));
  }
  await new Promise((resolve) => setImmediate(resolve));
  // The requests themselves are Berth's, gone once sent: only what the engines keep is counted.
  specs.length = 0;
  const perContainer = (heapBytes() - baseline) / 5000;
  t.diagnostic(`heap per running container: ${(perContainer / 1024).toFixed(2)} KB`);
  for (const engine of engines) engine.close();
  assert.ok(perContainer < 5 * 1024, `a running container holds ${(perContainer / 1024).toFixed(1)} KB`);
});
