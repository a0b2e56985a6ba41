// A cache of rendered answers of GET routes (one service, one container, a page of a list…), each
// kept with its JSON, encoded, so that a hit is neither rebuilt, serialized nor encoded again.
//
// An answer is trusted only while the change feed has not moved in the namespaces of every row it
// was built from: each request checks that in one indexed statement (Store.namespaceRevision),
// never through in-process notifications, so an answer cached by one replica is dropped as soon as
// another replica commits a change on the same database. This holds because every write of a
// service, container, stack, node, node cluster or action appends its change-feed entry, in the
// namespace of the row, in the transaction of the write (store/feed.ts), and revisions commit in
// their order. The revision is read before the answer is built, so a change committed meanwhile
// makes the next request build it again. A build that read rows of a namespace it did not check
// first is not kept: the next build checks that namespace too, and is kept.
//
// test/api/answer-cache.test.ts changes each kind of row a view reads, through another store on the
// same database, and fails when the cached answer is served stale.
import type { FastifyRequest } from "fastify";
import { bytesOf, deepFreeze, jsonOf, madeJson } from "../domain/json.ts";
import type { Store } from "../store/store.ts";
import { namespaceOf } from "./namespaces.ts";

interface Entry {
  /** Namespaces whose revision the entry was checked against (sorted). */
  namespaces: string[];
  revision: number;
  /** Absent when the last build read a namespace it had not checked: only the namespaces are kept. */
  value?: object;
  chars: number;
}

export interface AnswerCacheOptions {
  /** Most answers kept. */
  maxEntries?: number;
  /** Most bytes of JSON kept in all (the objects are held too). */
  maxChars?: number;
  /** Answers larger than this (bytes of JSON) are built every time. */
  maxEntryChars?: number;
}

export class AnswerCache {
  private readonly entries = new Map<string, Entry>();
  /** Builds under way, so that callers asking at once for the same answer wait for one build. */
  private readonly building = new Map<
    string,
    { checked: string; revision: number; answer: Promise<object> }
  >();
  private chars = 0;
  private readonly maxEntries: number;
  private readonly maxChars: number;
  private readonly maxEntryChars: number;
  /** Off: every answer is built (tests that count the statements of a build). */
  enabled = true;

  constructor(
    private readonly store: Store,
    opts: AnswerCacheOptions = {},
  ) {
    this.maxEntries = opts.maxEntries ?? 5000;
    this.maxChars = opts.maxChars ?? 32 * 1024 * 1024;
    this.maxEntryChars = opts.maxEntryChars ?? 8 * 1024 * 1024;
  }

  /**
   * The answer under `key` (which must name everything the answer depends on besides rows: the
   * namespace, the path and query), built by `build` when missing or stale. `namespace` is the
   * namespace the request addresses; `build` adds to `read` the namespace of every row it reads.
   */
  async answer<T extends object>(
    key: string,
    namespace: string,
    build: (read: Set<string>) => Promise<T>,
  ): Promise<T> {
    if (!this.enabled) return build(new Set());
    const cached = this.entries.get(key);
    const namespaces = cached?.namespaces ?? [namespace];
    const revision = await this.store.namespaceRevision(namespaces);
    if (cached?.value !== undefined && cached.revision === revision) {
      // Most recently used last: the first entry is the one to evict.
      this.entries.delete(key);
      this.entries.set(key, cached);
      return cached.value as T;
    }
    const checked = namespaces.join("\u0000");
    const pending = this.building.get(key);
    if (pending && pending.revision === revision && pending.checked === checked)
      return (await pending.answer) as T;
    const answer = this.build(key, namespace, namespaces, revision, build);
    this.building.set(key, { checked, revision, answer });
    try {
      return await answer;
    } finally {
      if (this.building.get(key)?.answer === answer) this.building.delete(key);
    }
  }

  /** The answer of a GET route under `key` in the namespace the request addresses (see `answer`). */
  forRequest<T extends object>(
    req: FastifyRequest,
    key: string,
    build: (read: Set<string>) => Promise<T>,
  ): Promise<T> {
    const namespace = namespaceOf(req);
    return this.answer(`${namespace} ${key}`, namespace, build);
  }

  private async build<T extends object>(
    key: string,
    namespace: string,
    checked: string[],
    revision: number,
    build: (read: Set<string>) => Promise<T>,
  ): Promise<T> {
    const read = new Set([namespace]);
    const value = await build(read);
    this.drop(key);
    if ([...read].every((ns) => checked.includes(ns))) {
      // Kept encoded, so that a hit allocates nothing (this request sends the same bytes).
      const bytes = bytesOf(value) ?? Buffer.from(jsonOf(value));
      madeJson(value, { bytes });
      if (bytes.length > this.maxEntryChars) return value;
      // Frozen: a cached answer is shared by every request.
      deepFreeze(value);
      this.keep(key, { namespaces: checked, revision, value, chars: bytes.length });
    } else {
      this.keep(key, { namespaces: [...new Set([...checked, ...read])].sort(), revision, chars: 0 });
    }
    return value;
  }

  private keep(key: string, entry: Entry): void {
    this.entries.set(key, entry);
    this.chars += entry.chars;
    while (this.entries.size > this.maxEntries || this.chars > this.maxChars) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.drop(oldest);
    }
  }

  private drop(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.chars -= entry.chars;
    this.entries.delete(key);
  }
}
