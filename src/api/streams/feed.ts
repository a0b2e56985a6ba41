// The one reader of the store's change feed for every stream of this process. It wakes on the
// store's commit notifications (this process's, and other replicas' through PostgreSQL
// LISTEN/NOTIFY), reads each change once and fans it out to its listeners: events subscribers and
// log followers. It polls only as a fallback: every `pollMs` while other replicas' commits are not
// announced, rarely (a safety net) while they are. The database is never polled once per subscriber.
import { createHash } from "node:crypto";
import { eventTime } from "../../domain/time.ts";
import { uriKey } from "../../domain/uri.ts";
import type { ChangeRow, Store } from "../../store/store.ts";

/** Changes read per query; a reader far behind catches up in pages of this size. */
export const FEED_PAGE = 500;

/** While notifications arrive, the feed still reads once per this many poll intervals. */
const SAFETY_POLLS = 15;

export { uriKey };

/**
 * An event's own id, derived from its revision (a name-based, version-5-shaped UUID): a subscriber
 * that resumes with `since` sees the same ids again, and every process of an installation agrees.
 */
export function eventUuid(revision: number): string {
  const h = createHash("sha1").update(`berth:event:${revision}`).digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString("hex");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/** One change of the feed, as the streams see it. */
export class FeedEvent {
  readonly revision: number;
  readonly namespace: string;
  readonly type: string;
  readonly action: string;
  readonly resourceUri: string;
  readonly parents: string[];
  readonly state: string;
  readonly datetimeMs: number;
  /** Filter keys (uriKey) of the object and of its parents. */
  readonly resourceKey: string;
  readonly parentKeys: string[];
  private encoded: Buffer | undefined;

  constructor(row: ChangeRow) {
    this.revision = Number(row.revision);
    this.namespace = row.namespace;
    this.type = row.type;
    this.action = row.action;
    this.resourceUri = row.resource_uri;
    this.parents = parseParents(row.parents);
    this.state = row.state;
    this.datetimeMs = Number(row.datetime);
    this.resourceKey = uriKey(row.resource_uri);
    this.parentKeys = this.parents.map(uriKey);
  }

  /**
   * The wire frame of CONTRACT §8 plus `revision` (what `since` resumes from), encoded once and
   * sent as the same bytes to every subscriber.
   */
  frame(): Buffer {
    this.encoded ??= Buffer.from(
      JSON.stringify({
        type: this.type,
        action: this.action,
        parents: this.parents,
        resource_uri: this.resourceUri,
        state: this.state,
        uuid: eventUuid(this.revision),
        datetime: eventTime(this.datetimeMs),
        revision: this.revision,
      }),
    );
    return this.encoded;
  }
}

function parseParents(text: string): string[] {
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) ? parsed.filter((p): p is string => typeof p === "string") : [];
  } catch {
    return [];
  }
}

export type FeedListener = (event: FeedEvent) => void;
/** Called after each page of changes has been offered (subscribers flush what they held). */
export type PageListener = () => void;

export interface EventFeedOptions {
  store: Store;
  /** How often the feed is read besides wake-ups, while other replicas' commits are not announced. */
  pollMs: number;
  /** Whether other replicas' commits wake the store's listeners now (then polling backs off). */
  announced?(): boolean;
  onError?(err: unknown): void;
}

/**
 * Reads the change feed while anyone listens (it stops with its last listener) and hands every
 * change, in revision order, to every listener, synchronously: a listener that compares a
 * revision with `position` sees a consistent picture (everything up to `position` was offered).
 */
export class EventFeed {
  private readonly listeners = new Set<FeedListener>();
  private readonly pageListeners = new Map<FeedListener, PageListener>();
  private pos = 0;
  private startup: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  /** Bumped by every start and stop, so that work of an earlier run notices it is stale. */
  private generation = 0;
  private reading = false;
  private again = false;
  private lastReadAt = 0;

  constructor(private readonly opts: EventFeedOptions) {}

  /** The revision of the last change offered to the listeners. */
  get position(): number {
    return this.pos;
  }

  /** Adds a listener and starts reading if it is the first; returns the unsubscribe function. */
  listen(listener: FeedListener, onPageEnd?: PageListener): () => void {
    this.listeners.add(listener);
    if (onPageEnd) this.pageListeners.set(listener, onPageEnd);
    if (!this.startup) this.start();
    return () => {
      this.listeners.delete(listener);
      this.pageListeners.delete(listener);
      if (this.listeners.size === 0) this.stop();
    };
  }

  /** Resolves once `position` is known: every change committed later will be offered. */
  async ready(): Promise<void> {
    await this.startup;
  }

  private start(): void {
    const store = this.opts.store;
    const generation = ++this.generation;
    this.startup = (async () => {
      // Without the current revision the feed would replay the whole history to live subscribers:
      // it keeps asking until the database answers (or the feed is stopped).
      for (;;) {
        try {
          this.pos = Math.max(this.pos, await store.latestRevision());
          return;
        } catch (err) {
          this.opts.onError?.(err);
          await new Promise((resolve) => setTimeout(resolve, this.opts.pollMs));
          if (this.generation !== generation) return;
        }
      }
    })();
    this.unsubscribe = store.onChange(() => this.wake());
    this.timer = setInterval(() => this.poll(), this.opts.pollMs);
    this.timer.unref();
  }

  /** Stops reading; a later listener starts again from the revision current then. */
  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.startup = undefined;
    this.generation += 1;
  }

  close(): void {
    this.listeners.clear();
    this.pageListeners.clear();
    this.stop();
  }

  /** The fallback poll: skipped while notifications arrive, except every SAFETY_POLLS-th time. */
  private poll(): void {
    const announced = this.opts.announced?.() ?? false;
    if (announced && Date.now() - this.lastReadAt < this.opts.pollMs * SAFETY_POLLS) return;
    this.wake();
  }

  /** Coalesces wake-ups: one read at a time, and one more after it when woken meanwhile. */
  wake(): void {
    if (!this.startup) return;
    if (this.reading) {
      this.again = true;
      return;
    }
    this.reading = true;
    void this.read()
      .catch((err: unknown) => this.opts.onError?.(err))
      .finally(() => {
        this.reading = false;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  private async read(): Promise<void> {
    const generation = this.generation;
    await this.startup;
    this.lastReadAt = Date.now();
    for (;;) {
      if (this.generation !== generation) return; // stopped (and maybe restarted) meanwhile
      const rows = await this.opts.store.changesSince(this.pos, FEED_PAGE);
      if (this.generation !== generation) return;
      for (const row of rows) {
        const revision = Number(row.revision);
        if (revision <= this.pos) continue;
        const event = new FeedEvent(row);
        this.pos = revision;
        for (const listener of this.listeners) {
          try {
            listener(event);
          } catch (err) {
            this.opts.onError?.(err);
          }
        }
      }
      for (const pageEnd of this.pageListeners.values()) {
        try {
          pageEnd();
        } catch (err) {
          this.opts.onError?.(err);
        }
      }
      if (rows.length < FEED_PAGE) return;
    }
  }
}
