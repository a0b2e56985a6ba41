// The slices a stats roll-up and a prune work through (store/stats.ts uuidSlices): however many,
// every uuid falls in exactly one, so no subject's points are rolled up twice or left unpruned when
// the collector makes its slices finer at scale.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
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
