// A simulated node's engine holds what runs on it, not its history (issue 34, item 2): simulated
// engines live in Berth's own process, so what they keep of removed containers is Berth's memory.
// After a full collection, 10,000 more containers created, started, sampled by the stats collector's
// call and removed leave a fake engine's heap within 1 MB (the stats counters of every container
// ever sampled were kept before: ~4 MB). A heap check with a generous bound, not a benchmark.
import assert from "node:assert/strict";
import { test } from "node:test";
import v8 from "node:v8";
import vm from "node:vm";
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
