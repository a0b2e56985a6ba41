// Replicas sharing a database plan on equal snapshots at once (issue 34, item 4): if each broke
// ties among equally empty nodes the same way, all of them would pick the same nodes and meet at
// every commit. Each prefers the nodes it watches (its lease share), then an order seeded by its
// id; the strategy's own rule (fewest running containers) still comes first. One process keeps the
// nodes' listed order (test/scheduler/scheduler.test.ts).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Duties } from "../../src/domain/duties.ts";
import { systemClock } from "../../src/domain/time.ts";
import { PlanApplier } from "../../src/orchestrator/plan-applier.ts";
import type { ServiceRow } from "../../src/store/services.ts";
import { Store } from "../../src/store/store.ts";
import { createService, deployCluster, runningService, type Sim, startSim, uuidOf } from "./sim.ts";

let s: Sim;
let nodes: string[];

before(async () => {
  s = await startSim({ env: { BERTH_RECONCILE_INTERVAL_MS: "3600000" } });
  const cluster = await deployCluster(s, { name: "even", target_num_nodes: 6, tags: [{ name: "even" }] });
  nodes = cluster.nodes.map(uuidOf);
});
after(() => s.close());

/** A replica's duties: it watches `owned`. */
const replica = (replicaId: string, owned: readonly string[]): Duties => ({
  replicaId,
  ownsNode: (n) => owned.includes(n),
  leads: () => false,
});

/** Where a replica's plan applier (a store of its own, as another process has) would put `count` containers. */
async function planOf(duties: Duties, service: ServiceRow, count: number): Promise<string[]> {
  const store = new Store(s.h.db.kysely, s.h.db.dialect);
  const plan = await new PlanApplier({ store, clock: systemClock, duties }).planFor(service, count);
  assert.ok(plan.ok, JSON.stringify(plan));
  return plan.placements;
}

async function serviceRow(name: string): Promise<ServiceRow> {
  const svc = await createService(s, {
    image: "busybox:local",
    name,
    run_command: "sleep 100000",
    tags: [{ name: "even" }],
  });
  const [row] = await s.h.store.services.servicesByUuid([svc.uuid]);
  return row!;
}

describe("replicas breaking ties among equally empty nodes", () => {
  test("two replicas with equal snapshots pick different nodes: each its own share first", async () => {
    const row = await serviceRow("shared");
    const one = replica("replica-one", nodes.slice(0, 3));
    const two = replica("replica-two", nodes.slice(3));
    const a = await planOf(one, row, 3);
    const b = await planOf(two, row, 3);
    assert.deepEqual([...a].sort(), nodes.slice(0, 3).sort(), "replica one: the nodes it watches");
    assert.deepEqual([...b].sort(), nodes.slice(3).sort(), "replica two: the nodes it watches");
    // Among nodes neither watches, each replica has an order of its own; the same every time.
    const none = replica("replica-one", []);
    assert.deepEqual(await planOf(none, row, 6), await planOf(none, row, 6));
    assert.notDeepEqual(await planOf(none, row, 6), await planOf(replica("replica-two", []), row, 6));
  });

  test("the emptiest node still comes first, whoever watches it", async () => {
    // Every node but the last holds one running container now.
    await runningService(s, { name: "filler", target_num_containers: 5, tags: [{ name: "even" }] });
    const counts = new Map<string, number>();
    for (const c of await s.h.store.services.containerLoads("alice"))
      counts.set(c.node_uuid, (counts.get(c.node_uuid) ?? 0) + 1);
    const emptiest = nodes.filter((n) => !counts.has(n));
    assert.equal(emptiest.length, 1);
    const row = await serviceRow("after-filler");
    const others = nodes.filter((n) => n !== emptiest[0]);
    assert.deepEqual(await planOf(replica("replica-one", others), row, 1), emptiest);
  });
});
