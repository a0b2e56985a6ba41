// The one reader of the store's change feed for every stream of this process. It wakes on the
// store's commit notifications (this process's, and other replicas' through PostgreSQL
// LISTEN/NOTIFY), reads each change once (store/follow.ts) and fans it out to its listeners: events
// subscribers and log followers. Commits that come faster than one per READ_EVERY_MS share a read
// (a write makes two or three commits, and reading after each cost the writes about as much as
// the fan-out itself; subscribers are served in passes anyway). It polls only as a fallback: every
// `pollMs` while other replicas' commits are not announced, rarely (a safety net) while they are.
// The database is never polled once per subscriber.
import { createHash } from "node:crypto";
import { performance } from "node:perf_hooks";
import { eventTime } from "../../domain/time.ts";
import { uriKey } from "../../domain/uri.ts";
import { FOLLOW_PAGE, type Follower, follow } from "../../store/follow.ts";
import type { ChangeRow, Store } from "../../store/store.ts";

/** Changes read per query; a reader far behind catches up in pages of this size. */
export const FEED_PAGE = FOLLOW_PAGE;

/** While commits keep coming, the feed is read at most once per this many ms. */
const READ_EVERY_MS = 10;

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
 * The reading itself is the store's one feed follower (store/follow.ts).
 */
export class EventFeed {
  private readonly listeners = new Set<FeedListener>();
  private readonly pageListeners = new Map<FeedListener, PageListener>();
  private pos = 0;
  private follower: Follower | undefined;
  private unwatch: (() => void) | undefined;
  private readTimer: NodeJS.Timeout | undefined;
  private lastReadAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly opts: EventFeedOptions) {}

  /** The revision of the last change offered to the listeners. */
  get position(): number {
    return Math.max(this.pos, this.follower?.position ?? 0);
  }

  /** Adds a listener and starts reading if it is the first; returns the unsubscribe function. */
  listen(listener: FeedListener, onPageEnd?: PageListener): () => void {
    this.listeners.add(listener);
    if (onPageEnd) this.pageListeners.set(listener, onPageEnd);
    if (!this.follower) this.start();
    return () => {
      this.listeners.delete(listener);
      this.pageListeners.delete(listener);
      if (this.listeners.size === 0) this.stop();
    };
  }

  /** Resolves once `position` is known: every change committed later will be offered. */
  async ready(): Promise<void> {
    await this.follower?.ready();
  }

  private start(): void {
    this.follower = follow(this.opts.store, {
      pollMs: this.opts.pollMs,
      announced: this.opts.announced,
      onError: this.opts.onError,
      onPage: (rows) => this.offer(rows),
      // Commits wake it through `soon`, which lets the commits of one moment share a read.
      wakesOn: () => false,
    });
    this.unwatch = this.opts.store.onChange(() => this.soon());
  }

  /** Reads at the next turn, or READ_EVERY_MS after the last read when that was more recent. */
  private soon(): void {
    if (this.readTimer || !this.follower) return;
    const wait = Math.max(0, this.lastReadAt + READ_EVERY_MS - performance.now());
    this.readTimer = setTimeout(() => {
      this.readTimer = undefined;
      this.lastReadAt = performance.now();
      this.follower?.wake();
    }, wait);
  }

  /** Stops reading; a later listener starts again from the revision current then. */
  stop(): void {
    this.pos = this.position;
    this.unwatch?.();
    this.unwatch = undefined;
    clearTimeout(this.readTimer);
    this.readTimer = undefined;
    this.follower?.stop();
    this.follower = undefined;
  }

  close(): void {
    this.listeners.clear();
    this.pageListeners.clear();
    this.stop();
  }

  /** Reads now (coalesced with a read under way). */
  wake(): void {
    this.follower?.wake();
  }

  private offer(rows: readonly ChangeRow[]): void {
    for (const row of rows) {
      const event = new FeedEvent(row);
      if (event.revision <= this.pos) continue;
      this.pos = event.revision;
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
  }
}
