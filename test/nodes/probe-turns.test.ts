// A replica that takes over hundreds of nodes probes them all at once (issue 34, item 4): each
// probe reads its node and records the answer, and together they held every connection of the
// pool for seconds, so API requests answered 429 database_busy. The probes' engine calls still run
// together; their store work runs SWEEP_STORE_WORK at a time. A probe someone asked for
// (`immediate`) does not wait behind a sweep.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { LAST_SEEN_RESOLUTION_MS, NodeProbe, SWEEP_STORE_WORK } from "../../src/nodes/probe.ts";
import type { Store } from "../../src/store/store.ts";
import { deployCluster, type Sim, startSim, uuidOf } from "../services/sim.ts";

let s: Sim;
let nodes: string[];

before(async () => {
  s = await startSim({ env: { BERTH_RECONCILE_INTERVAL_MS: "3600000" } });
  const cluster = await deployCluster(s, { name: "many", target_num_nodes: 12 });
  nodes = cluster.nodes.map(uuidOf);
});
after(() => s.close());

test("a sweep's probes read and record at most SWEEP_STORE_WORK nodes at a time", async () => {
  let inFlight = 0;
  let most = 0;
  const counted =
    <A extends unknown[], R>(fn: (...a: A) => Promise<R>) =>
    async (...a: A): Promise<R> => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      try {
        return await fn(...a);
      } finally {
        inFlight -= 1;
      }
    };
  const store = s.h.store;
  const nodesOf = store.nodes;
  // The store as the probe uses it, counting its calls under way.
  const watched = new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === "mutate") return counted(target.mutate.bind(target));
      if (prop === "nodes")
        return new Proxy(nodesOf, {
          get: (t, p, r) => (p === "knownNode" ? counted(t.knownNode.bind(t)) : Reflect.get(t, p, r)),
        });
      return Reflect.get(target, prop, receiver);
    },
  }) as Store;
  // A minute later: every answer is recorded (a write per node).
  const probe = new NodeProbe({
    store: watched,
    engines: s.h.engines,
    clock: { now: () => Date.now() + LAST_SEEN_RESOLUTION_MS },
    unreachableGraceMs: 60_000,
  });
  const before = new Map((await store.nodes.liveNodes()).map((n) => [n.uuid, n.version]));
  const rows = await Promise.all(nodes.map((u) => probe.probe(u, { immediate: false })));
  assert.ok(most <= SWEEP_STORE_WORK, `${most} probes used the store at once`);
  for (const row of rows) assert.ok(row!.version > before.get(row!.uuid)!, "every answer recorded");
});
