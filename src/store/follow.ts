// The one way to follow the change feed: from a revision, page by page, in revision order. A
// follower wakes on this process's commits and on other replicas' announced ones (Store.onChange,
// fed by store/listen.ts on PostgreSQL) and polls only as a fallback; it reads one page at a time
// and the next only after the caller's `onPage` has resolved (back-pressure), and it stops for good
// when told. The events stream, the controllers and the stack follower all follow the feed here.
import type { FeedType } from "./feed.ts";
import { FeedReads } from "./feed-reads.ts";
import type { ChangeRow, Store } from "./store.ts";

/** Changes read per query; a follower far behind catches up in pages of this size. */
export const FOLLOW_PAGE = 500;

/** While notifications arrive, a polling follower still reads once per this many poll intervals. */
const SAFETY_POLLS = 15;

export interface FollowOptions {
  /** Only changes of these types are read (the rest are skipped in SQL); every type when absent. */
  types?: readonly FeedType[];
  /** The revision to follow from (changes after it); the feed's latest revision when absent. */
  from?: number;
  /**
   * Called with each page (never empty), in order; the next page is read once it resolves. When it
   * throws, the page is read again at the next wake-up (`position` has not moved past it).
   */
  onPage(rows: ChangeRow[]): Promise<void> | void;
  /** Which commit notifications (by the changed object's type; "" is "unknown") wake it; all when absent. */
  wakesOn?(type: string): boolean;
  /** Fallback poll interval; no polling when absent (the caller has its own periodic pass). */
  pollMs?: number;
  /** Whether other replicas' commits are announced now: polling then becomes a rare safety net. */
  announced?(): boolean;
  pageSize?: number;
  onError?(err: unknown): void;
}

export interface Follower {
  /** The revision of the last change handed to `onPage` (its promise resolved); undefined until known. */
  readonly position: number | undefined;
  /** Resolves once `position` is known: every change committed later will be handed over. */
  ready(): Promise<void>;
  /** Whether a read is under way or asked for. */
  readonly reading: boolean;
  /** Reads now (coalesced: one read at a time, and one more after it when woken meanwhile). */
  wake(): void;
  /** Resolves when no read is under way or asked for (tests and `settle` helpers). */
  idle(): Promise<void>;
  /** Stops for good: no page is handed over after this returns. */
  stop(): void;
}

/** Follows the store's change feed (see the module comment). */
export function follow(store: Store, opts: FollowOptions): Follower {
  const pageSize = opts.pageSize ?? FOLLOW_PAGE;
  let position: number | undefined = opts.from;
  let stopped = false;
  let reading: Promise<void> | undefined;
  /** Whether the read under way has asked for its page: a commit told before that is in it. */
  let asked = false;
  let again = false;
  let lastReadAt = 0;
  let timer: NodeJS.Timeout | undefined;

  // Without a starting revision the follower would replay the whole history: it keeps asking until
  // the database answers (or it is stopped).
  const startup: Promise<void> =
    position !== undefined
      ? Promise.resolve()
      : (async () => {
          while (!stopped) {
            try {
              const latest = await store.latestRevision();
              position ??= latest;
              return;
            } catch (err) {
              opts.onError?.(err);
              await new Promise((resolve) => setTimeout(resolve, opts.pollMs ?? 1000));
            }
          }
        })();

  // A follower of some types reads how far the feed went too: it moves past entries of other types.
  const reads = opts.types ? new FeedReads(store) : undefined;
  const read = async (): Promise<void> => {
    await startup;
    lastReadAt = Date.now();
    while (!stopped && position !== undefined) {
      asked = true;
      if (reads && opts.types) {
        const page = await reads.changesThrough(position, pageSize, opts.types);
        if (stopped) return;
        if (page.rows.length) await opts.onPage(page.rows);
        if (stopped) return;
        position = page.through;
        if (!page.full) return;
        continue;
      }
      const rows = await store.changesSince(position, pageSize, opts.types);
      if (stopped || rows.length === 0) return;
      await opts.onPage(rows);
      if (stopped) return;
      position = Number(rows.at(-1)!.revision);
      if (rows.length < pageSize) return;
    }
  };

  const wake = (): void => {
    if (stopped) return;
    if (reading) {
      // A commit told before the read asked for its page is in that page (one commit of several
      // types tells each of them, one after another): only a later one needs a read of its own.
      if (asked) again = true;
      return;
    }
    asked = false;
    reading = read()
      .catch((err: unknown) => opts.onError?.(err))
      .finally(() => {
        reading = undefined;
        if (again) {
          again = false;
          wake();
        }
      });
  };

  const unsubscribe = store.onChange((type) => {
    if (!opts.wakesOn || opts.wakesOn(type)) wake();
  });
  if (opts.pollMs !== undefined) {
    const pollMs = opts.pollMs;
    timer = setInterval(() => {
      if (opts.announced?.() && Date.now() - lastReadAt < pollMs * SAFETY_POLLS) return;
      wake();
    }, pollMs);
    timer.unref();
  }
  // Changes committed between `from` and the subscription are read at once.
  if (opts.from !== undefined) wake();

  return {
    get position() {
      return position;
    },
    get reading() {
      return reading !== undefined;
    },
    ready: () => startup,
    wake,
    async idle() {
      while (reading && !stopped) await reading;
    },
    stop() {
      stopped = true;
      unsubscribe();
      if (timer) clearInterval(timer);
      timer = undefined;
    },
  };
}
