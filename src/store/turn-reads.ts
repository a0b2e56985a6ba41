// Reads asked for during one turn of the event loop, made together: every key asked for before the
// read is sent goes into it, and the read is sent when the turn ends (setImmediate), so it starts
// after each of its callers asked: whatever any of them could have seen committed, it sees. A
// container started just before (sequential deployment) is among the link targets of the next one
// (orchestrator/engine-specs.ts); a cached answer checked after a commit sees it
// (Store.namespaceRevision).
//
// `firstAtOnce`: the first read of a turn is sent at once, alone, and only the later callers of
// that turn share a read. A lone request then waits for no turn to end; a hundred GETs checking
// their cached answers in one turn still send two reads, not a hundred.
export class TurnReads<K, V> {
  private next: { keys: Set<K>; result: Promise<Map<K, V>> } | undefined;
  /** Whether a read has been sent at once in this turn (firstAtOnce; cleared when it ends). */
  private busyTurn = false;

  constructor(
    private readonly read: (keys: K[]) => Promise<Map<K, V>>,
    private readonly opts: { firstAtOnce?: boolean } = {},
  ) {}

  get(key: K): Promise<V | undefined> {
    if (this.opts.firstAtOnce && !this.busyTurn) {
      this.busyTurn = true;
      setImmediate(() => {
        this.busyTurn = false;
      });
      return this.read([key]).then((found) => found.get(key));
    }
    const batch = this.next ?? this.begin();
    batch.keys.add(key);
    return batch.result.then((found) => found.get(key));
  }

  private begin(): { keys: Set<K>; result: Promise<Map<K, V>> } {
    const keys = new Set<K>();
    const result = new Promise<Map<K, V>>((resolve, reject) => {
      setImmediate(() => {
        this.next = undefined;
        this.read([...keys]).then(resolve, reject);
      });
    });
    this.next = { keys, result };
    return this.next;
  }
}
