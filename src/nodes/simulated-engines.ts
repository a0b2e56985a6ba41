// The engines of simulated nodes, one per node for every replica (issue 34): each replica keeps a
// copy of a simulated node's engine (drivers/fake/synced.ts) and the copies are kept equal through
// the store (`simulated_containers`, store/simulated.ts), so a container's logs and state are the
// same whichever replica is asked, and a node's watcher that moves to another replica finds the
// containers as they were.
//
// - Every node has a clock of its own: a write moves the clocks of the nodes it touches, and a
//   copy follows its node's clock alone. Writers and readers of different nodes never meet (issue
//   34: one clock for every node made every replica's writes take turns on its row lock).
// - Before a call that reads or changes containers, a copy reads what other replicas wrote to its
//   node since it last looked (the copies called meanwhile are read in one statement); a copy made
//   for a node it never held first reads that node's containers whole, and so does a copy unread
//   for RESYNC_AFTER_MS (removals it missed may be forgotten by then).
// - What a call changed is written before the call answers (one transaction for everything changed
//   meanwhile); what changes by itself (a process prints, exits, restarts) is written within
//   FLUSH_MS. A write that finds its node's clock where the copy last read it needs no read back.
// - While a copy has watchers (an events subscriber, a log follower), it reads others' writes every
//   POLL_MS, so they see another replica's changes as events and lines.
// - A copy nobody watches reads nothing until its next call: a container written several times
//   meanwhile is read and applied once, and a node this replica placed on once costs nothing after.
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
/** Removed containers are kept this long for replicas that have not read them yet. */
const TOMBSTONE_MS = 10 * 60_000;
/** A copy that read nothing for this long reads its node whole again (tombstones may be gone). */
const RESYNC_AFTER_MS = TOMBSTONE_MS / 2;
/** How often a replica forgets tombstones older than TOMBSTONE_MS. */
const PURGE_EVERY_MS = 60_000;

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
  /** The node's clock as far as this copy has applied every write of it (store/simulated.ts). */
  seen: number;
  /** When the node was last read (Date.now()). */
  readAt: number;
  engine: Engine;
}

interface Waiting {
  resolve(): void;
  reject(err: unknown): void;
}

export class SimulatedEngines {
  private readonly origin = randomUUID();
  private readonly copies = new Map<string, Copy>();
  private readonly dirty = new Map<Copy, Set<string>>();
  private readonly toLoad: { copy: Copy; resolve(): void; reject(err: unknown): void }[] = [];
  /** Copies waiting for the next read of what others wrote to their nodes. */
  private readonly toRead = new Map<Copy, Waiting[]>();
  private readingNodes = false;
  private purgedAt = Date.now();
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
        seen: 0,
        readAt: 0,
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

  /**
   * Reads what other replicas wrote to the copies' nodes since each last looked. The copies asked
   * for while a read runs are read together by the next one (one statement for all of them).
   */
  private fresh(copies: readonly Copy[]): Promise<void> {
    if (copies.length === 0) return Promise.resolve();
    const done = Promise.all(
      copies.map(
        (copy) =>
          new Promise<void>((resolve, reject) => {
            const waiting = this.toRead.get(copy);
            if (waiting) waiting.push({ resolve, reject });
            else this.toRead.set(copy, [{ resolve, reject }]);
          }),
      ),
    );
    if (!this.readingNodes) {
      this.readingNodes = true;
      queueMicrotask(() => void this.readNodes());
    }
    return done.then(() => undefined);
  }

  private async readNodes(): Promise<void> {
    while (this.toRead.size > 0) {
      const batch = [...this.toRead];
      this.toRead.clear();
      try {
        await this.read(batch.map(([copy]) => copy));
        for (const [, waiting] of batch) for (const w of waiting) w.resolve();
      } catch (err) {
        for (const [, waiting] of batch) for (const w of waiting) w.reject(err);
      }
    }
    this.readingNodes = false;
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
      if (fresh) await this.fresh([copy]);
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
        this.readWhole([...new Set(batch.map((b) => b.copy))]).then(
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

  /**
   * Reads copies' nodes whole: every container stored is applied, and one the copy holds that the
   * store has not (its tombstone may be gone) is removed, unless it waits to be written.
   */
  private async readWhole(copies: readonly Copy[]): Promise<void> {
    const now = Date.now();
    const rows = await this.section.ofNodes(copies.map((c) => c.node));
    const byNode = new Map<string, SimulatedContainerRecord[]>();
    for (const row of rows) {
      const list = byNode.get(row.nodeUuid);
      if (list) list.push(row);
      else byNode.set(row.nodeUuid, [row]);
    }
    for (const copy of copies) {
      const stored = byNode.get(copy.node) ?? [];
      const present = new Set(stored.filter((r) => !r.removed).map((r) => r.engineId));
      const pending = this.dirty.get(copy);
      for (const id of copy.fake.containerIds()) {
        if (!present.has(id) && !pending?.has(id) && copy.seqs.has(id)) copy.fake.applyRemoval(id);
      }
      for (const row of stored.sort((a, b) => a.seq - b.seq)) this.apply(copy, row);
      copy.readAt = now;
    }
  }

  /** Reads what others wrote to the copies' nodes since each last looked (stale copies whole). */
  private async read(copies: readonly Copy[]): Promise<void> {
    const now = Date.now();
    const stale = copies.filter((c) => now - c.readAt > RESYNC_AFTER_MS);
    const current = copies.filter((c) => now - c.readAt <= RESYNC_AFTER_MS);
    if (current.length > 0) {
      const rows = await this.section.since(new Map(current.map((c) => [c.node, c.seen])));
      for (const row of rows) {
        const copy = this.copies.get(row.nodeUuid);
        if (copy) this.apply(copy, row);
      }
      for (const c of current) c.readAt = now;
    }
    if (stale.length > 0) await this.readWhole(stale);
    if (now - this.purgedAt >= PURGE_EVERY_MS) {
      this.purgedAt = now;
      await this.section.purgeRemoved(now - TOMBSTONE_MS);
    }
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
    let seqs: Map<string, number>;
    try {
      seqs = await this.section.write(rows, reclaim, Date.now());
    } catch (err) {
      // Written again with the next change (or the next call's write).
      for (const [copy, ids] of taken) for (const id of ids) this.changed(copy, id);
      throw err;
    }
    for (const [copy, ids] of taken) {
      const seq = seqs.get(copy.node) ?? 0;
      for (const id of ids) copy.seqs.set(id, seq);
      // Nobody wrote the node since this copy read it: its own write needs no reading back.
      if (seq === copy.seen + 1) copy.seen = seq;
    }
  }

  private apply(copy: Copy, row: SimulatedContainerRecord): void {
    if (row.seq > copy.seen) copy.seen = row.seq;
    if (row.seq <= (copy.seqs.get(row.engineId) ?? 0)) return;
    copy.seqs.set(row.engineId, row.seq);
    if (row.origin === this.origin) return;
    if (!row.container) copy.fake.applyRemoval(row.engineId);
    else copy.fake.applyContainer(row.container as unknown as SimulatedContainerState);
  }

  private schedulePoll(): void {
    if (this.stopped) return;
    this.pollTimer = setTimeout(() => {
      const watched = [...this.copies.values()].filter((c) => c.fake.hasWatchers() && c.loaded);
      this.fresh(watched)
        .catch(this.onError)
        .finally(() => this.schedulePoll());
    }, this.pollMs);
    this.pollTimer.unref();
  }
}
