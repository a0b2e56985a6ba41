// Pacing of the periodic passes whose work grows with the cluster (issue 34, item 3): the
// reconciler's sweeps and comparison, and the stats rounds. A pass that reads SQLite (synchronous)
// and fake engines (answering at once) never waits for I/O, so without pacing a whole pass ran in
// one turn of the event loop, holding every request for as long: 119–238 ms of CPU at 30,000
// containers for the orphans sweep, 180 ms for a stats round of 16 lanes at 15,000.

import { setImmediate as nextTurn } from "node:timers/promises";

/** A pass gives the event loop back after this long. */
export const PASS_TURN_MS = 10;

/**
 * Answers a promise of a later turn once this one has run `turnMs`, and nothing before. Those who
 * share one pacer (a controller's workers) wait for the same later turn, and that turn's slice
 * starts once: with a slice each, workers resumed together would each run a slice of their own.
 */
export function turnPacer(turnMs = PASS_TURN_MS): () => Promise<void> | undefined {
  let started = performance.now();
  let waiting: Promise<void> | undefined;
  return () => {
    if (waiting) return waiting;
    if (performance.now() - started < turnMs) return undefined;
    waiting = nextTurn().then(() => {
      waiting = undefined;
      started = performance.now();
    });
    return waiting;
  };
}

/** Runs `work` over items, at most `limit` at a time. */
export async function eachLimited<T>(items: readonly T[], limit: number, work: (t: T) => Promise<void>) {
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await work(items[next++]!);
  });
  await Promise.all(lanes);
}

/** At most `n` calls run at once; the others wait their turn, in order (calls that come at any time). */
export class Turns {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly n: number) {}

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.active < this.n) this.active += 1;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await work();
    } finally {
      // The turn passes to the next waiting call, or is given back.
      const next = this.waiting.shift();
      if (next) next();
      else this.active -= 1;
    }
  }
}
