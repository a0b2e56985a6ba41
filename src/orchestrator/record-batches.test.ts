// The runtime's group commit (record-batches.ts), rule by rule, on mocked timers: a patch waits
// for the others in flight or RECORD_DELAY_MS; an urgent one (engine work waits for it) is written
// in the next turn, or as soon as the batch being written is done.
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, mock, test } from "node:test";
import type { ContainerRow } from "../store/services.ts";
import { RECORD_DELAY_MS, RecordBatches } from "./record-batches.ts";

/** A group commit whose writes are recorded and finish when the test says. */
function batches() {
  const writes: { uuids: string[]; finish(): void }[] = [];
  const b = new RecordBatches(
    (uuids) =>
      new Promise<Map<string, ContainerRow>>((resolve) => {
        writes.push({ uuids, finish: () => resolve(new Map()) });
      }),
  );
  return { b, writes };
}

/** Lets promise callbacks run (the mocked timers do not move). */
const settle = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe("record batches", () => {
  beforeEach(() => mock.timers.enable({ apis: ["setTimeout", "setImmediate"] }));
  afterEach(() => mock.timers.reset());

  test("a patch parked while other work is in flight waits RECORD_DELAY_MS for company", async () => {
    const { b, writes } = batches();
    b.hooks.started();
    b.hooks.started();
    void b.record("a", () => ({}));
    mock.timers.tick(0);
    await settle();
    assert.equal(writes.length, 0, "not written while the other item may park");
    mock.timers.tick(RECORD_DELAY_MS);
    assert.deepEqual(
      writes.map((w) => w.uuids),
      [["a"]],
    );
  });

  test("an urgent patch is written in the next turn, with whatever was parked by then", async () => {
    const { b, writes } = batches();
    for (let i = 0; i < 3; i++) b.hooks.started();
    void b.record("a", () => ({}));
    void b.record("b", () => ({}), undefined, { urgent: true });
    mock.timers.tick(0);
    assert.deepEqual(
      writes.map((w) => w.uuids),
      [["a", "b"]],
      "written without waiting RECORD_DELAY_MS",
    );
  });

  test("an urgent patch parked while a batch is written goes as soon as that batch is done", async () => {
    const { b, writes } = batches();
    for (let i = 0; i < 4; i++) b.hooks.started();
    void b.record("a", () => ({}), undefined, { urgent: true });
    mock.timers.tick(0);
    assert.equal(writes.length, 1);
    void b.record("b", () => ({}), undefined, { urgent: true });
    void b.record("c", () => ({}));
    mock.timers.tick(0);
    await settle();
    assert.equal(writes.length, 1, "one batch written at a time while patches are urgent");
    writes[0]!.finish();
    await settle();
    mock.timers.tick(0);
    assert.deepEqual(
      writes.map((w) => w.uuids),
      [["a"], ["b", "c"]],
    );
  });
});
