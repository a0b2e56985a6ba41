// The controllers' work queue: each of its rules, on its own.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { backoffDelayMs, WorkQueue } from "./work-queue.ts";

interface Key {
  uuid: string;
  node?: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A deferred promise a test resolves by hand. */
function gate(): { promise: Promise<void>; open(): void } {
  let open = () => {};
  const promise = new Promise<void>((r) => {
    open = r;
  });
  return { promise, open };
}

describe("work queue", () => {
  // The queue's timers do not hold the process open; this does while the tests run.
  const keepAlive = setInterval(() => {}, 1000);
  after(() => clearInterval(keepAlive));

  test("a key added many times while queued is worked on once", async () => {
    const seen: string[] = [];
    const q = new WorkQueue<Key>({
      id: (k) => k.uuid,
      gatherMs: 5,
      batch: 10,
      work: async (keys) => {
        seen.push(...keys.map((k) => k.uuid));
        return undefined;
      },
    });
    for (let i = 0; i < 5; i++) q.add({ uuid: "a" });
    q.add({ uuid: "b" });
    q.add({ uuid: "a" });
    await q.idle();
    assert.deepEqual(seen, ["a", "b"]);
  });

  test("a key is never worked on by two workers at once; one added during its work is worked on again after", async () => {
    let running = 0;
    let most = 0;
    let runs = 0;
    const first = gate();
    const q = new WorkQueue<Key>({
      id: (k) => k.uuid,
      workers: 4,
      work: async () => {
        running += 1;
        most = Math.max(most, running);
        runs += 1;
        if (runs === 1) await first.promise;
        running -= 1;
        return undefined;
      },
    });
    q.add({ uuid: "a" });
    await sleep(5);
    q.add({ uuid: "a" });
    q.add({ uuid: "a" });
    await sleep(5);
    assert.equal(running, 1, "the second add waits for the first work");
    first.open();
    await q.idle();
    assert.equal(most, 1);
    assert.equal(runs, 2, "worked on once more after, not once per add");
  });

  test("workers run in parallel, at most perNode keys of one node at a time", async () => {
    const active = new Map<string, number>();
    let most = 0;
    let mostOfNode = 0;
    const q = new WorkQueue<Key>({
      id: (k) => k.uuid,
      nodeOf: (k) => k.node,
      workers: 6,
      perNode: 2,
      work: async ([k]) => {
        const n = (active.get(k!.node!) ?? 0) + 1;
        active.set(k!.node!, n);
        mostOfNode = Math.max(mostOfNode, n);
        most = Math.max(
          most,
          [...active.values()].reduce((a, b) => a + b, 0),
        );
        await sleep(10);
        active.set(k!.node!, (active.get(k!.node!) ?? 1) - 1);
        return undefined;
      },
    });
    for (let i = 0; i < 12; i++) q.add({ uuid: `c${i}`, node: `n${i % 3}` });
    await q.idle();
    assert.equal(mostOfNode, 2);
    assert.equal(most, 6);
  });

  test("a failing key comes back after a back-off that doubles, up to the cap, then is dropped", async () => {
    const at: number[] = [];
    const gaveUp: number[] = [];
    const q = new WorkQueue<Key>({
      id: (k) => k.uuid,
      backoff: { baseMs: 20, maxMs: 60, maxFailures: 5 },
      onGiveUp: (_k, failures) => gaveUp.push(failures),
      work: async (keys) => {
        at.push(Date.now());
        return keys;
      },
    });
    assert.deepEqual(
      [1, 2, 3, 4, 5].map((f) => backoffDelayMs({ baseMs: 20, maxMs: 60, maxFailures: 5 }, f)),
      [20, 40, 60, 60, 60],
    );
    q.add({ uuid: "a" });
    for (let i = 0; i < 100 && gaveUp.length === 0; i++) await sleep(20);
    assert.deepEqual(gaveUp, [5]);
    assert.equal(at.length, 5, "tried once, then again after each of four back-offs");
    const gaps = at.slice(1).map((t, i) => t - at[i]!);
    // Timers are late, never early: each gap is at least its doubled (then capped) delay. (An upper
    // bound, or comparing two gaps, fails on a loaded machine, where any timer can be late.)
    for (const [i, want] of [20, 40, 60, 60].entries())
      assert.ok(gaps[i]! >= want - 2, `gap ${i}: ${gaps[i]}`);
    assert.equal(q.failuresOf({ uuid: "a" }), 0, "forgotten once dropped");
  });

  test("a success resets the back-off of a key", async () => {
    let calls = 0;
    const q = new WorkQueue<Key>({
      id: (k) => k.uuid,
      backoff: { baseMs: 5, maxMs: 1000, maxFailures: 10 },
      // Fails twice, then succeeds.
      work: async (keys) => (++calls <= 2 ? keys : undefined),
    });
    q.add({ uuid: "a" });
    for (let i = 0; i < 100 && calls < 3; i++) await sleep(5);
    await q.idle();
    assert.equal(calls, 3);
    assert.equal(q.failuresOf({ uuid: "a" }), 0);
  });

  test("a throwing batch fails each of its keys; the others of a batch that names its failures succeed", async () => {
    const errors: unknown[] = [];
    let round = 0;
    const q = new WorkQueue<Key>({
      id: (k) => k.uuid,
      batch: 10,
      backoff: { baseMs: 10_000 },
      onError: (err) => errors.push(err),
      work: async (keys) => {
        round += 1;
        if (round === 1) throw new Error("engine down");
        // Named by new values with the same id: the queue compares ids.
        return keys.filter((k) => k.uuid === "b").map((k) => ({ ...k }));
      },
    });
    q.add({ uuid: "a" });
    q.add({ uuid: "b" });
    await q.idle();
    assert.equal(errors.length, 1);
    assert.equal(q.failuresOf({ uuid: "a" }), 1);
    q.add({ uuid: "a" });
    q.add({ uuid: "b" });
    await q.idle();
    assert.equal(q.failuresOf({ uuid: "a" }), 0);
    assert.equal(q.failuresOf({ uuid: "b" }), 2);
    await q.shutdown();
  });

  test("shutdown waits for the work under way, drops what is queued and takes nothing after", async () => {
    const started: string[] = [];
    const ended: string[] = [];
    const slow = gate();
    const q = new WorkQueue<Key>({
      id: (k) => k.uuid,
      work: async ([k]) => {
        started.push(k!.uuid);
        await slow.promise;
        ended.push(k!.uuid);
        return undefined;
      },
    });
    q.add({ uuid: "a" });
    q.add({ uuid: "b" });
    q.addAfter({ uuid: "c" }, 5);
    await sleep(1);
    let done = false;
    const closing = q.shutdown().then(() => {
      done = true;
    });
    await sleep(10);
    assert.equal(done, false, "a's work is still under way");
    slow.open();
    await closing;
    assert.deepEqual(ended, ["a"]);
    q.add({ uuid: "d" });
    await sleep(10);
    assert.deepEqual(started, ["a"], "nothing is taken after shutdown");
  });
});
