// A stats round gives the event loop back in turns of about 10 ms however many nodes it samples at
// once (issue 34, item 3): simulated engines answer without waiting, so a round is one chain of
// promise jobs unless it yields, and its parallel lanes share one slice per turn. Before, each lane
// started a slice of its own when it resumed, so 16 lanes held one turn for 16 slices (180 ms of
// the loop at 15,000 simulated containers).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { runningService } from "../services/sim.ts";
import { deployWatchedCluster, type StatsSim, startStatsSim } from "./support.ts";

let s: StatsSim;

before(async () => {
  s = await startStatsSim();
  await deployWatchedCluster(s, { name: "pool", target_num_nodes: 8 });
  await runningService(s, { name: "web", target_num_containers: 40 });
});
after(() => s.close());

test("a round's engine calls run at most a slice's worth per turn of the event loop", async () => {
  // Each sample costs 1 ms of the loop, as a large simulated node's many containers add up to.
  let calls = 0;
  for (const engine of s.engines.values()) {
    const containerStats = engine.containerStats.bind(engine);
    engine.containerStats = async (id: string) => {
      const until = performance.now() + 1;
      while (performance.now() < until) {
        // the loop held, as by a synchronous sample
      }
      calls += 1;
      run += 1;
      longestRun = Math.max(longestRun, run);
      return containerStats(id);
    };
  }
  // Calls since the loop last reached its check phase.
  let run = 0;
  let longestRun = 0;
  let watching = true;
  const tick = () => {
    run = 0;
    if (watching) setImmediate(tick);
  };
  setImmediate(tick);
  try {
    const round = await s.h.statsCollector.collect();
    assert.equal(round.containers, 40);
    assert.equal(calls, 40);
    // 10 ms of 1 ms calls, and the call each lane had begun: far from the 8 lanes × 4 calls that
    // began at once, or 8 slices of 10 calls in one turn.
    assert.ok(longestRun <= 16, `${longestRun} calls of 1 ms ran in one turn of the event loop`);
  } finally {
    watching = false;
  }
});
