// Reads asked for in one turn of the event loop, shared. The first read of a turn is sent at once;
// callers that ask for the same key later in that turn (a hundred GETs checking their cached
// answers while the server is busy) wait for one read sent when the turn ends (setImmediate),
// which is after each of them asked: whatever any of them could have seen committed, that read
// sees. So a lone request pays nothing, and a busy server sends a statement or two per turn
// instead of one per request.
export class TurnReads<V> {
  private pending = new Map<string, { resolve(v: V): void; reject(e: unknown): void }[]>();
  /** Whether a read has been sent in this turn (cleared when the turn ends). */
  private busyTurn = false;

  constructor(private readonly read: (key: string) => Promise<V>) {}

  get(key: string): Promise<V> {
    if (!this.busyTurn) {
      this.busyTurn = true;
      setImmediate(() => this.endTurn());
      return this.read(key);
    }
    return new Promise<V>((resolve, reject) => {
      let waiters = this.pending.get(key);
      if (!waiters) {
        waiters = [];
        this.pending.set(key, waiters);
      }
      waiters.push({ resolve, reject });
    });
  }

  private endTurn(): void {
    this.busyTurn = false;
    const batch = this.pending;
    if (batch.size === 0) return;
    this.pending = new Map();
    for (const [key, waiters] of batch) {
      this.read(key).then(
        (v) => {
          for (const w of waiters) w.resolve(v);
        },
        (err: unknown) => {
          for (const w of waiters) w.reject(err);
        },
      );
    }
  }
}
