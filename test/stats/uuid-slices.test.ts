// The slices a stats roll-up and a prune work through (store/stats.ts uuidSlices): however many,
// every uuid falls in exactly one, so no subject's points are rolled up twice or left unpruned when
// the collector makes its slices finer at scale; and the collector starts with as many as its last
// round's containers need.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { slicesFor } from "../../src/stats/collector.ts";
import { MAX_SLICES, MIN_SLICES, uuidSlices } from "../../src/store/stats.ts";

const inside = (uuid: string, s: { low?: string; high?: string }) =>
  (s.low === undefined || uuid >= s.low) && (s.high === undefined || uuid < s.high);

test("every uuid is in exactly one slice, for every slice count from the fewest to the most", () => {
  const uuids = [
    ...Array.from({ length: 2_000 }, () => randomUUID()),
    "00000000-0000-4000-8000-000000000000",
    "ffffffff-ffff-4fff-bfff-ffffffffffff",
    "0fffffff-ffff-4fff-bfff-ffffffffffff",
    "10000000-0000-4000-8000-000000000000",
  ];
  for (let n = MIN_SLICES; n <= MAX_SLICES; n *= 2) {
    const slices = uuidSlices(n);
    assert.equal(slices.length, n);
    for (const uuid of uuids) {
      assert.equal(slices.filter((s) => inside(uuid, s)).length, 1, `${uuid} in ${n} slices`);
    }
  }
});

test("a count out of bounds is brought within them", () => {
  assert.equal(uuidSlices(1).length, MIN_SLICES);
  assert.equal(uuidSlices(10_000).length, MAX_SLICES);
});

test("the collector's slices take at most 250 containers each from the first statement on, up to the most slices", () => {
  // Adapting alone started at 16 and doubled only after a statement held the loop too long: a
  // minute's roll-up of 30,000 containers in 16 slices held it 57 ms.
  assert.equal(slicesFor(0), MIN_SLICES);
  assert.equal(slicesFor(4_000), MIN_SLICES);
  for (const containers of [4_001, 30_000, 64_000]) {
    assert.ok(
      containers / slicesFor(containers) <= 250,
      `${containers} containers in ${slicesFor(containers)} slices`,
    );
  }
  assert.equal(slicesFor(150_000), MAX_SLICES);
});
