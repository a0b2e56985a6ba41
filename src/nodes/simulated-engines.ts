// The engines of simulated nodes, one per node for every replica (issue 34): each replica keeps a
// copy of a simulated node's engine (drivers/fake/synced.ts) and the copies are kept equal through
// the store (`simulated_containers`, store/simulated.ts), so a container's logs and state are the
// same whichever replica is asked, and a node's watcher that moves to another replica finds the
// containers as they were.
//
// - Before a call that reads or changes containers, a copy reads what other replicas wrote since it
//   last looked (one statement for every node, shared by the calls of the moment); a copy made for a
//   node it never held first reads that node's containers whole.
// - What a call changed is written before the call answers (one transaction for everything changed
//   meanwhile); what changes by itself (a process prints, exits, restarts) is written within
//   FLUSH_MS.
// - While a copy has watchers (an events subscriber, a log follower), it reads others' writes every
//   POLL_MS, so they see another replica's changes as events and lines.
// - A copy nobody watches keeps others' writes it read aside (the latest per container, not
//   decoded) and applies them before its next call: a container written several times is applied
//   once, and a node this replica placed on once costs nothing after (issue 34: every replica used
//   to apply every other replica's writes to its copy of every node).
// A replica never applies its own writes back (each write names the process that made it).
import { randomUUID } from "node:crypto";
import type { Engine } from "../drivers/engine.ts";
import type { SimulatedContainerState, SyncedFakeEngine } from "../drivers/fake/synced.ts";
import {
  type RefusedClaim,
  type SimulatedContainerRecord,
  type SimulatedContainerWrite,
  SimulatedEngineStore,
} from "../store/simulated.ts";
import type { Kernel } from "../store/types.ts";
import type { FakeNodeFacts } from "./engines.ts";

const FLUSH_MS = 20;
const POLL_MS = 200;
const ROWS_PER_READ = 1000;
/** Removed containers are kept this long for replicas that have not read them yet. */
const TOMBSTONE_MS = 10 * 60_000;
/** A replica that read nothing for this long reads its nodes whole again (tombstones may be gone). */
const RESYNC_AFTER_MS = TOMBSTONE_MS / 2;

/** Calls that read or change containers: they see other replicas' writes first. */
const FRESH = new Set([
  "createContainer",
  "startContainer",
  "stopContainer",
  "killContainer",
  "removeContainer",
  "inspectContainer",
  "listContainers",
  "exec",
  "replaceHostEntries",
]);
const STREAMS = new Set(["logs", "events"]);

interface Copy {
  node: string;
  fake: SyncedFakeEngine;
  /** The seq of the last write applied or made, per container (removed ones too). */
  seqs: Map<string, number>;
  /** The node's containers read whole (at its first call; again after a failed read). */
  loaded: Promise<void> | undefined;
  /**
   * Other replicas' writes read but not applied yet, the latest per container: a copy nobody
   * watches applies them at its next call, so writes overwritten meanwhile are never applied and
   * a node this replica no longer calls costs nothing.
   */
  pending: Map<string, SimulatedContainerRecord>;
  engine: Engine;
}

export class SimulatedEngines {
  private readonly origin = randomUUID();
  private readonly copies = new Map<string, Copy>();
  private readonly dirty = new Map<Copy, Set<string>>();
  private readonly toLoad: { copy: Copy; resolve(): void; reject(err: unknown): void }[] = [];
  private starting: Promise<void> | undefined;
  private seenSeq = 0;
  private lastReadAt = Date.now();
  /** (time, seq) as read, for purging tombstones every replica has read past. */
  private readonly marks: { at: number; seq: number }[] = [];
  private reading: Promise<void> | undefined;
  private nextRead: Promise<void> | undefined;
  private writing: Promise<void> | undefined;
  private nextWrite: Promise<void> | undefined;
  private flushTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly store: Kernel,
    private readonly make: (node: FakeNodeFacts) => SyncedFakeEngine,
    private readonly onError: (err: unknown) => void = () => {},
    private readonly pollMs = POLL_MS,
  ) {
    this.schedulePoll();
  }

  /** Where reading starts: the last write when this process began (nodes it loads are read whole). */
  private started(): Promise<void> {
    this.starting ??= this.section.latestSeq().then(
      (seq) => {
        this.seenSeq = seq;
      },
      (err: unknown) => {
        this.starting = undefined;
        throw err;
      },
    );
    return this.starting;
  }

  private get section(): SimulatedEngineStore {
    return new SimulatedEngineStore(this.store);
  }

  /** The engine of a simulated node, as every replica sees it. */
  engineFor(facts: FakeNodeFacts): Engine {
    let copy = this.copies.get(facts.uuid);
    if (!copy) {
      const fake = this.make(facts);
      const made: Copy = {
        node: facts.uuid,
        fake,
        seqs: new Map(),
        loaded: undefined,
        pending: new Map(),
        engine: fake,
      };
      fake.onChange = (id) => this.changed(made, id);
      made.engine = this.wrap(made);
      this.copies.set(facts.uuid, made);
      copy = made;
    }
    return copy.engine;
  }

  /** Forgets a simulated node's engine everywhere (its instance was terminated). */
  async drop(nodeUuid: string): Promise<void> {
    const copy = this.copies.get(nodeUuid);
    this.copies.delete(nodeUuid);
    if (copy) {
      this.dirty.delete(copy);
      copy.fake.close();
    }
    await this.section.dropNode(nodeUuid);
  }

  /** Writes what is left to write and stops reading. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.pollTimer);
    clearTimeout(this.flushTimer);
    await this.flush().catch(this.onError);
    for (const copy of this.copies.values()) copy.fake.close();
  }

  /** Reads what other replicas wrote since this one last looked; shared by the calls of the moment. */
  fresh(): Promise<void> {
    if (this.nextRead) return this.nextRead;
    const start = (): Promise<void> => {
      this.nextRead = undefined;
      const read = this.read().finally(() => {
        if (this.reading === read) this.reading = undefined;
      });
      this.reading = read;
      return read;
    };
    const next = (this.reading ?? Promise.resolve()).then(start, start);
    this.nextRead = next;
    return next;
  }

  /** Writes every container changed here since the last write, in one transaction. */
  flush(): Promise<void> {
    if (this.dirty.size === 0 && !this.writing) return Promise.resolve();
    if (this.nextWrite) return this.nextWrite;
    const start = (): Promise<void> => {
      this.nextWrite = undefined;
      const write = this.write().finally(() => {
        if (this.writing === write) this.writing = undefined;
      });
      this.writing = write;
      return write;
    };
    const next = (this.writing ?? Promise.resolve()).then(start, start);
    this.nextWrite = next;
    return next;
  }

  private wrap(copy: Copy): Engine {
    const before = async (fresh: boolean) => {
      copy.loaded ??= this.load(copy).catch((err: unknown) => {
        copy.loaded = undefined;
        throw err;
      });
      await copy.loaded;
      if (fresh) await this.fresh();
      this.applyPending(copy);
    };
    return new Proxy(copy.fake as Engine, {
      get: (target, prop, receiver) => {
        const value: unknown = Reflect.get(target, prop, receiver);
        if (typeof prop !== "string" || typeof value !== "function") return value;
        if (STREAMS.has(prop)) {
          return (...args: unknown[]) =>
            (async function* () {
              await before(true);
              yield* value.apply(target, args) as AsyncIterable<unknown>;
            })();
        }
        const fresh = FRESH.has(prop);
        return async (...args: unknown[]) => {
          await before(fresh);
          let result: unknown;
          try {
            result = await value.apply(target, args);
          } finally {
            if (fresh) await this.flush();
          }
          // Another replica's container took the host port it asked for meanwhile (write()).
          if (prop === "startContainer") {
            const refused = copy.fake.takeRefusal(String(args[0]));
            if (refused) throw refused;
          }
          return result;
        };
      },
    });
  }

  /**
   * Reads a copy's node whole. The copies asked for in one turn are read together (a replica that
   * takes over hundreds of nodes starts their watchers at once: one statement, not one per node).
   */
  private load(copy: Copy): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.toLoad.push({ copy, resolve, reject });
      if (this.toLoad.length > 1) return;
      setImmediate(() => {
        const batch = this.toLoad.splice(0);
        const run = async () => {
          await this.started();
          const rows = await this.section.ofNodes([...new Set(batch.map((b) => b.copy.node))]);
          const byNode = new Map<string, SimulatedContainerRecord[]>();
          for (const row of rows) {
            const list = byNode.get(row.nodeUuid);
            if (list) list.push(row);
            else byNode.set(row.nodeUuid, [row]);
          }
          for (const b of batch) for (const row of byNode.get(b.copy.node) ?? []) this.apply(b.copy, row);
        };
        run().then(
          () => {
            for (const b of batch) b.resolve();
          },
          (err: unknown) => {
            for (const b of batch) b.reject(err);
          },
        );
      });
    });
  }

  private changed(copy: Copy, id: string): void {
    let ids = this.dirty.get(copy);
    if (!ids) {
      ids = new Set();
      this.dirty.set(copy, ids);
    }
    ids.add(id);
    if (!this.flushTimer && !this.stopped) {
      this.flushTimer = setTimeout(() => {
        this.flushTimer = undefined;
        this.flush().catch(this.onError);
      }, FLUSH_MS);
      this.flushTimer.unref();
    }
  }

  private async write(): Promise<void> {
    if (this.dirty.size === 0) return;
    const taken = [...this.dirty];
    this.dirty.clear();
    const rows: SimulatedContainerWrite[] = [];
    const copyOf = new Map<string, Copy>();
    const row = (copy: Copy, id: string): SimulatedContainerWrite => ({
      engineId: id,
      nodeUuid: copy.node,
      origin: this.origin,
      container: copy.fake.exportContainer(id),
      claims: copy.fake.claimsOf(id),
    });
    for (const [copy, ids] of taken) {
      for (const id of ids) {
        rows.push(row(copy, id));
        copyOf.set(id, copy);
      }
    }
    // A container of another replica took a value this one handed out meanwhile: the container
    // here chooses again, within the same write.
    const reclaim = (refused: readonly RefusedClaim[]): SimulatedContainerWrite[] => {
      const byContainer = new Map<string, RefusedClaim[]>();
      for (const r of refused) byContainer.set(r.engineId, [...(byContainer.get(r.engineId) ?? []), r]);
      const again: SimulatedContainerWrite[] = [];
      for (const [id, lost] of byContainer) {
        const copy = copyOf.get(id);
        if (!copy) continue;
        copy.fake.reclaim(id, lost);
        again.push(row(copy, id));
      }
      return again;
    };
    let seq: number;
    try {
      seq = await this.section.write(rows, reclaim);
    } catch (err) {
      // Written again with the next change (or the next call's write).
      for (const [copy, ids] of taken) for (const id of ids) this.changed(copy, id);
      throw err;
    }
    for (const [copy, ids] of taken) for (const id of ids) copy.seqs.set(id, seq);
  }

  private async read(): Promise<void> {
    await this.started();
    const now = Date.now();
    if (now - this.lastReadAt > RESYNC_AFTER_MS) {
      await this.resync();
    }
    for (;;) {
      const rows = await this.section.since(this.seenSeq, ROWS_PER_READ);
      for (const row of rows) {
        const copy = this.copies.get(row.nodeUuid);
        if (copy) {
          // Own writes and watched copies at once (their watchers see others' changes as events).
          if (row.origin === this.origin || copy.fake.hasWatchers()) this.apply(copy, row);
          else {
            const held = copy.pending.get(row.engineId);
            if (!held || held.seq < row.seq) copy.pending.set(row.engineId, row);
          }
        }
        if (row.seq > this.seenSeq) this.seenSeq = row.seq;
      }
      if (rows.length < ROWS_PER_READ) break;
    }
    this.lastReadAt = now;
    await this.purge(now);
  }

  /** Reads every node this replica holds whole again: removals it could not read are gone. */
  private async resync(): Promise<void> {
    this.seenSeq = await this.section.latestSeq();
    for (const copy of this.copies.values()) {
      copy.pending.clear();
      const rows = await this.section.ofNode(copy.node);
      const stored = new Set(rows.map((r) => r.engineId));
      const pending = this.dirty.get(copy);
      for (const id of copy.fake.containerIds()) {
        if (!stored.has(id) && !pending?.has(id)) copy.fake.applyRemoval(id);
      }
      for (const row of rows) this.apply(copy, row);
    }
  }

  private async purge(now: number): Promise<void> {
    const last = this.marks.at(-1);
    if (!last || now - last.at >= 60_000) this.marks.push({ at: now, seq: this.seenSeq });
    const first = this.marks[0];
    if (!first || now - first.at < TOMBSTONE_MS) return;
    this.marks.shift();
    await this.section.purgeRemoved(first.seq);
    // What was removed that long ago cannot come back: its seq is forgotten too.
    for (const copy of this.copies.values()) {
      const present = new Set(copy.fake.containerIds());
      for (const [id, seq] of copy.seqs) if (seq <= first.seq && !present.has(id)) copy.seqs.delete(id);
    }
  }

  private applyPending(copy: Copy): void {
    if (copy.pending.size === 0) return;
    const rows = [...copy.pending.values()].sort((a, b) => a.seq - b.seq);
    copy.pending.clear();
    for (const row of rows) this.apply(copy, row);
  }

  private apply(copy: Copy, row: SimulatedContainerRecord): void {
    if (row.seq <= (copy.seqs.get(row.engineId) ?? 0)) return;
    copy.seqs.set(row.engineId, row.seq);
    if (row.origin === this.origin) return;
    if (!row.container) copy.fake.applyRemoval(row.engineId);
    else copy.fake.applyContainer(row.container as unknown as SimulatedContainerState);
  }

  private schedulePoll(): void {
    if (this.stopped) return;
    this.pollTimer = setTimeout(() => {
      const watched = [...this.copies.values()].some((c) => c.fake.hasWatchers());
      const due = watched || Date.now() - this.lastReadAt > RESYNC_AFTER_MS / 2;
      (due && this.copies.size > 0 ? this.fresh() : Promise.resolve())
        .catch(this.onError)
        .finally(() => this.schedulePoll());
    }, this.pollMs);
    this.pollTimer.unref();
  }
}
