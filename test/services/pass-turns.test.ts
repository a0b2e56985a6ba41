// The reconciler's periodic pass gives the event loop back as it goes (issue 34, item 3): its work
// grows with the cluster (a sweep per node, a comparison per container), and SQLite and simulated
// engines answer without waiting for I/O, so an unpaced pass ran whole in one turn of the loop,
// holding every request meanwhile (119–238 ms of CPU at 30,000 containers). Here each node's
// listing costs 2 ms of CPU: the sweeps of 30 nodes (60 ms) must spread over several turns (they
// ran in one before). Turns are counted, not timed: a loaded machine only makes more of them.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { deployCluster, type Sim, startSim } from "./sim.ts";

let s: Sim;

before(async () => {
  // No periodic pass of its own: the test runs the one it watches.
  s = await startSim({ env: { BERTH_RECONCILE_INTERVAL_MS: "3600000" } });
  await deployCluster(s, { name: "pool", target_num_nodes: 30 });
  await s.h.reconciler.resync();
});
after(() => s.close());

test("a periodic pass over 30 nodes whose listings cost 2 ms each spreads over several turns of the loop", async () => {
  let turn = 0;
  let ticking = true;
  const tick = () => {
    if (!ticking) return;
    turn += 1;
    setImmediate(tick);
  };
  setImmediate(tick);
  const turnsOfListings = new Set<number>();
  for (const engine of s.engines.values()) {
    const list = engine.listContainers.bind(engine);
    engine.listContainers = (options) => {
      turnsOfListings.add(turn);
      const until = performance.now() + 2;
      while (performance.now() < until) {
        // What answering costs a busy engine's client: CPU on this thread.
      }
      return list(options);
    };
  }
  try {
    await s.h.reconciler.resync();
  } finally {
    ticking = false;
  }
  assert.equal(s.engines.size, 30);
  assert.ok(
    turnsOfListings.size >= 3,
    `the pass listed 30 nodes in ${turnsOfListings.size} turn(s) of the event loop`,
  );
});
