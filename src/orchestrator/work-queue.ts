// The controllers' work queue (after client-go's rate-limited work queue): a key says "look at
// this object again", never what to do to it (the worker re-reads and acts on the difference).
// Keys are typed values named by `id`; a key is queued once however often it is added, never
// worked on by two workers at once (one added again while it is worked on is worked on again
// after), and a key whose work failed comes back after a per-key exponential back-off, until it
// has failed `maxFailures` times in a row (then it is dropped: the periodic pass looks again).
// Workers run in parallel, at most `perNode` keys of one node at a time where keys have a node.
// What is queued lives in memory: it is derived from the store and the engines, never durable.

export interface Backoff {
  /** The delay after a key's first failure; it doubles with every failure in a row. */
  baseMs: number;
  /** The longest delay. */
  maxMs: number;
  /** Failures in a row after which a key is dropped (until it is added again). */
  maxFailures: number;
}

export interface WorkQueueOptions<K> {
  /** What makes two keys the same key. */
  id(key: K): string;
  /**
   * Works on keys taken together (at most `batch`); answers the keys whose work failed (by id;
   * or throws: all of them failed). The others succeeded and their failures are forgotten.
   */
  work(keys: K[]): Promise<undefined | readonly K[]>;
  /** Batches worked on at once. */
  workers?: number;
  /** Keys taken together by one worker. */
  batch?: number;
  /** The node a key's work talks to, if any: at most `perNode` such keys are worked on at once. */
  nodeOf?(key: K): string | undefined;
  perNode?: number;
  /** How long keys gather after an add before workers take them (a burst is taken in few batches). */
  gatherMs?: number;
  backoff?: Partial<Backoff>;
  onError?(err: unknown): void;
  /** Told when a key is dropped after `maxFailures` failures in a row. */
  onGiveUp?(key: K, failures: number): void;
}

export const DEFAULT_BACKOFF: Backoff = { baseMs: 100, maxMs: 30_000, maxFailures: 6 };

/** The delay before the next attempt of a key that has failed `failures` times in a row. */
export function backoffDelayMs(b: Backoff, failures: number): number {
  return Math.min(b.maxMs, b.baseMs * 2 ** Math.max(0, failures - 1));
}

export class WorkQueue<K> {
  /** Keys wanting work (not yet taken), by id: each is in `ready` unless it is being worked on. */
  private readonly dirty = new Map<string, K>();
  /** Keys that may be taken, in the order they were added. */
  private readonly ready = new Map<string, K>();
  private readonly processing = new Set<string>();
  /** Keys being worked on, by node. */
  private readonly busyNodes = new Map<string, number>();
  /** Keys waiting for their back-off (or an addAfter) to pass. */
  private readonly delayed = new Map<string, NodeJS.Timeout>();
  private readonly failures = new Map<string, number>();
  private readonly backoff: Backoff;
  private activeWorkers = 0;
  private gather: NodeJS.Timeout | undefined;
  private closed = false;
  private waiters: (() => void)[] = [];

  constructor(private readonly o: WorkQueueOptions<K>) {
    this.backoff = { ...DEFAULT_BACKOFF, ...o.backoff };
  }

  /** Keys queued or being worked on (not those waiting for their back-off). */
  get length(): number {
    return this.dirty.size + this.processing.size;
  }

  /** Queues a key (once: a key already queued stays where it is, with this value). */
  add(key: K): void {
    if (this.closed) return;
    const id = this.o.id(key);
    const timer = this.delayed.get(id);
    if (timer) {
      clearTimeout(timer);
      this.delayed.delete(id);
    }
    this.dirty.set(id, key);
    if (!this.processing.has(id)) this.ready.set(id, key);
    this.schedule();
  }

  /** Queues a key after a delay (an earlier add wins). */
  addAfter(key: K, delayMs: number): void {
    if (this.closed) return;
    const id = this.o.id(key);
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    if (this.delayed.has(id) || this.dirty.has(id)) return;
    const timer = setTimeout(() => {
      this.delayed.delete(id);
      this.add(key);
    }, delayMs);
    timer.unref();
    this.delayed.set(id, timer);
  }

  /** Failures in a row of a key so far. */
  failuresOf(key: K): number {
    return this.failures.get(this.o.id(key)) ?? 0;
  }

  /** Resolves when nothing is queued or worked on (keys waiting for their back-off do not count). */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /**
   * Takes no key any more: queued and delayed keys are dropped (the next start's full pass finds
   * what they stood for); resolves once the work under way has ended.
   */
  async shutdown(): Promise<void> {
    this.closed = true;
    if (this.gather) clearTimeout(this.gather);
    this.gather = undefined;
    for (const t of this.delayed.values()) clearTimeout(t);
    this.delayed.clear();
    this.dirty.clear();
    this.ready.clear();
    await this.idle();
  }

  /** Takes keys again after a shutdown (a controller started again). */
  reopen(): void {
    this.closed = false;
  }

  private isIdle(): boolean {
    return this.ready.size === 0 && this.processing.size === 0 && this.gather === undefined;
  }

  private settled(): void {
    if (!this.isIdle()) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  private schedule(): void {
    const gatherMs = this.o.gatherMs ?? 0;
    if (gatherMs <= 0) {
      this.pump();
      return;
    }
    if (this.gather) return;
    this.gather = setTimeout(() => {
      this.gather = undefined;
      this.pump();
      this.settled();
    }, gatherMs);
    this.gather.unref();
  }

  private pump(): void {
    while (!this.closed && this.activeWorkers < (this.o.workers ?? 1)) {
      const keys = this.take();
      if (keys.length === 0) break;
      this.activeWorkers += 1;
      void this.run(keys);
    }
  }

  /** Up to `batch` ready keys, in order, skipping those whose node has no free slot. */
  private take(): K[] {
    const batch = this.o.batch ?? 1;
    const perNode = this.o.perNode ?? Number.POSITIVE_INFINITY;
    const keys: K[] = [];
    for (const [id, key] of this.ready) {
      if (keys.length >= batch) break;
      const node = this.o.nodeOf?.(key);
      if (node !== undefined && (this.busyNodes.get(node) ?? 0) >= perNode) continue;
      if (node !== undefined) this.busyNodes.set(node, (this.busyNodes.get(node) ?? 0) + 1);
      this.ready.delete(id);
      this.dirty.delete(id);
      this.processing.add(id);
      keys.push(key);
    }
    return keys;
  }

  private async run(keys: K[]): Promise<void> {
    let failed: ReadonlySet<string>;
    try {
      failed = new Set(((await this.o.work(keys)) ?? []).map((k) => this.o.id(k)));
    } catch (err) {
      this.o.onError?.(err);
      failed = new Set(keys.map((k) => this.o.id(k)));
    }
    this.activeWorkers -= 1;
    for (const key of keys) this.done(key, failed.has(this.o.id(key)));
    this.pump();
    this.settled();
  }

  private done(key: K, failed: boolean): void {
    const id = this.o.id(key);
    this.processing.delete(id);
    const node = this.o.nodeOf?.(key);
    if (node !== undefined) {
      const n = (this.busyNodes.get(node) ?? 1) - 1;
      if (n > 0) this.busyNodes.set(node, n);
      else this.busyNodes.delete(node);
    }
    // Added again while it was worked on: it is worked on again now.
    const again = this.dirty.get(id);
    if (again !== undefined && !this.closed) this.ready.set(id, again);
    if (!failed) {
      this.failures.delete(id);
      return;
    }
    const failures = (this.failures.get(id) ?? 0) + 1;
    if (failures >= this.backoff.maxFailures) {
      this.failures.delete(id);
      this.o.onGiveUp?.(key, failures);
      return;
    }
    this.failures.set(id, failures);
    if (again === undefined) this.addAfter(key, backoffDelayMs(this.backoff, failures));
  }
}
