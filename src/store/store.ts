// The Store: every query of the platform lives in store/ (only `store/` knows SQL). Components
// never call each other; they share this store, its transactions and its change feed.
// Layers, each importing only those below it: types.ts (rows and the Kernel interface) and
// codec.ts (stored JSON decoded, one function per column); this file, the transaction kernel
// (transactions, `mutate`, writes of rows with events and their feed entries, notifications);
// and the sections over the kernel (identity, actions, services, nodes, stacks, …), which take a
// Kernel and are reached as `store.<section>`.
import { type Kysely, sql } from "kysely";
import { VersionConflict } from "../domain/errors.ts";
import { type Clock, systemClock } from "../domain/time.ts";
import { AccountStore } from "./accounts.ts";
import { ActionStore } from "./actions.ts";
import { AgentStore } from "./agents.ts";
import { insertEachSqlite, ROWS_PER_INSERT } from "./batches.ts";
import type { Dialect } from "./db.ts";
import { derivedColumns } from "./derived.ts";
import { isUniqueViolation, UniqueViolation } from "./errors.ts";
import { ChangeFeed } from "./feed.ts";
import { PendingChanges } from "./feed-commit.ts";
import { FeedReads } from "./feed-reads.ts";
import { IdentityStore } from "./identity.ts";
import { NamespaceStore } from "./namespaces.ts";
import { NodeRowCache, NodeStore } from "./nodes.ts";
import { announce, ChangeNotifier, IDENTITY_CHANGE } from "./notify.ts";
import { QuotaStore } from "./quotas.ts";
import { RegistryStore } from "./registries.ts";
import { ReplicaStore } from "./replicas.ts";
import { withUpdatedRow } from "./row-writes.ts";
import type { Database } from "./schema.ts";
import { ServiceStore } from "./services.ts";
import { StackStore } from "./stacks.ts";
import type {
  ChangeRow,
  ContainerRow,
  FeedRows,
  FeedType,
  Kernel,
  NewRow,
  NodeRow,
  Patch,
  ServiceRow,
  Written,
} from "./types.ts";
import { type Grouping, WriteGroups } from "./write-groups.ts";
import { insertOne, NOUNS, TABLES, updateVersioned } from "./write-statements.ts";

export type { ActionQuery } from "./actions.ts";
export { ACTIVE_STATES } from "./actions.ts";
export { CHANGE_CHANNEL, ChangeNotifier, IDENTITY_CHANGE } from "./notify.ts";
export type {
  ActionRow,
  ApiKeyRow,
  ChangeRow,
  FeedRows,
  FeedType,
  InvitationRow,
  NewAction,
  NewRow,
  Patch,
  UserRow,
  Written,
} from "./types.ts";
export type { Grouping } from "./write-groups.ts";

export { isUniqueViolation, UniqueViolation };

/** What a store and the stores of its transactions share. */
interface Shared {
  notifier: ChangeNotifier;
  /** Told after users, API keys or memberships change (identity caches drop what they hold). */
  identityNotifier: ChangeNotifier;
  /** The change feed's one writer (its parents cache outlives transactions). */
  feed: ChangeFeed;
  /** The store's own connection, outside any transaction (what runs after a commit uses it). */
  root: Kysely<Database>;
  /** Told of the rows each committed transaction of this process wrote (onCommittedWrites). */
  writeListeners: Set<WriteListener>;
  /** Told of the changes other replicas announce (onRemoteChange). */
  remoteNotifier: ChangeNotifier;
  /** Node rows as last read or written (NodeStore.knownNodes). */
  nodeRows: NodeRowCache;
  /** Grouped transactions (write-groups.ts). */
  groups?: WriteGroups;
}

/** What a committed transaction wrote to rows of one type (see Store.onCommittedWrites). */
export type WriteListener = <K extends FeedType>(type: K, written: readonly Written<K>[]) => void;

export interface StoreOptions {
  /** The time of change-feed entries. */
  clock?: Clock;
  /** Set by `transaction` for the store of a transaction. */
  within?: {
    shared: Shared;
    /** Callbacks run after the outermost transaction commits (change-feed wake-ups). */
    afterCommit: (() => void)[];
    /** The transaction's change-feed entries, written just before it commits (feed-commit.ts). */
    changes: PendingChanges;
  };
}

export class Store implements Kernel {
  private readonly shared: Shared;
  private readonly inTransaction: boolean;
  private readonly afterCommit: (() => void)[];
  private readonly changes: PendingChanges | undefined;
  /** Reads of the change feed (one per root store: it keeps statements and shares reads). */
  private feedReads: FeedReads | undefined;

  constructor(
    readonly db: Kysely<Database>,
    readonly dialect: Dialect,
    opts: StoreOptions = {},
  ) {
    this.shared = opts.within?.shared ?? {
      notifier: new ChangeNotifier(),
      identityNotifier: new ChangeNotifier(),
      feed: new ChangeFeed(opts.clock ?? systemClock),
      root: db,
      writeListeners: new Set(),
      remoteNotifier: new ChangeNotifier(),
      nodeRows: new NodeRowCache(),
    };
    this.inTransaction = opts.within !== undefined;
    this.afterCommit = opts.within?.afterCommit ?? [];
    this.changes = opts.within?.changes;
    if (!opts.within) {
      // Node rows follow this process's commits, and are dropped on another replica's.
      const nodeRows = this.shared.nodeRows;
      this.onCommittedWrites((type, written) => {
        if (type === "node") nodeRows.wrote(written.map((w) => w.row as NodeRow));
      });
      this.onRemoteChange((type) => {
        if (type === "node" || type === "") nodeRows.clear();
      });
    }
  }

  /** Users, API keys, organizations, memberships and invitations. */
  get identity(): IdentityStore {
    return new IdentityStore(this);
  }

  /** Actions: recording, claiming, leases and logs. */
  get actions(): ActionStore {
    return new ActionStore(this);
  }

  /** Node clusters and nodes. */
  get nodes(): NodeStore {
    return new NodeStore(this, this.inTransaction ? undefined : this.shared.nodeRows);
  }

  /** Services and containers. */
  get services(): ServiceStore {
    return new ServiceStore(this);
  }

  /** External repositories and service triggers. */
  get registries(): RegistryStore {
    return new RegistryStore(this);
  }

  /** Accounts API: email addresses, profile changes, access and confirmation tokens. */
  get accounts(): AccountStore {
    return new AccountStore(this);
  }

  /** Stacks. */
  get stacks(): StackStore {
    return new StackStore(this);
  }

  /** Node registration tokens and agent node keys. */
  get agents(): AgentStore {
    return new AgentStore(this);
  }

  /** Quotas: what a namespace holds of each bounded resource, and its limits. */
  get quotas(): QuotaStore {
    return new QuotaStore(this);
  }

  /** Namespace settings: privileges and limits an administrator set. */
  get namespaces(): NamespaceStore {
    return new NamespaceStore(this);
  }

  /** Replica heartbeats, leases, shared sign-in counters, control-plane facts. */
  get replicas(): ReplicaStore {
    return new ReplicaStore(this);
  }

  /** This replica's id, carried by its change notifications (PostgreSQL). */
  setOrigin(replicaId: string): void {
    this.shared.notifier.origin = replicaId;
  }

  /** A cheap round trip: whether the database answers now. */
  async ping(): Promise<void> {
    await sql`select 1`.execute(this.db);
  }

  /** Whether this store runs inside a transaction. */
  get isTransaction(): boolean {
    return this.inTransaction;
  }

  /** A transaction run again from the start when another writer won (`runAgain`); outside a transaction only. */
  async retrying<T>(fn: (tx: Store) => Promise<T>, attempts = 5, opts?: Grouping): Promise<T> {
    if (this.inTransaction) throw new Error("retrying() starts its own transaction");
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.transaction(fn, opts);
      } catch (err) {
        if (!runAgain(err) || attempt >= attempts) throw err;
      }
    }
  }

  /**
   * Runs fn in one transaction; nested calls join the outer one. Its change-feed entries are
   * written last, just before the commit (feed-commit.ts: the feed lock is held only there).
   * `group`: fn only runs statements, and may share its commit with others (write-groups.ts).
   */
  async transaction<T>(fn: (tx: Store) => Promise<T>, opts?: Grouping): Promise<T> {
    if (this.inTransaction) return fn(this);
    if (opts?.group) {
      this.shared.groups ??= new WriteGroups(this.db, (trx, changes) =>
        changes.write(
          new Store(trx, this.dialect, { within: this.scope([], changes) }),
          this.shared.notifier.origin,
        ),
      );
      return this.shared.groups.run(({ trx, afterCommit, changes }) =>
        fn(new Store(trx, this.dialect, { within: this.scope(afterCommit, changes) })),
      );
    }
    const pending: (() => void)[] = [];
    const result = await this.db.transaction().execute(async (trx) => {
      const changes = new PendingChanges();
      const tx = new Store(trx, this.dialect, { within: this.scope(pending, changes) });
      const out = await fn(tx);
      await changes.write(tx, this.shared.notifier.origin);
      return out;
    });
    for (const cb of pending) cb();
    return result;
  }

  private scope(afterCommit: (() => void)[], changes: PendingChanges) {
    return { shared: this.shared, afterCommit, changes };
  }

  /**
   * The one way to change a row that has events: re-read it, let `change` decide the patch, write
   * it with its feed entry (`updateRow`) and what goes with it (`after`) in one transaction; on a
   * VersionConflict start over from a fresh read. Answers the row as written, as read when there
   * is nothing to do (no patch), or undefined when the row is gone.
   */
  async mutate<K extends FeedType>(
    type: K,
    uuid: string,
    change: (row: FeedRows[K]) => Patch<K> | undefined | Promise<Patch<K> | undefined>,
    opts: {
      after?: (tx: Store, before: FeedRows[K], written: FeedRows[K]) => Promise<void>;
      /** The row as the caller just read it: the first attempt starts from it (not read again). */
      read?: FeedRows[K];
    } & Grouping = {},
  ): Promise<FeedRows[K] | undefined> {
    let known = opts.read?.uuid === uuid ? opts.read : undefined;
    for (;;) {
      const row = known ?? (await this.findRow(type, uuid));
      known = undefined;
      if (row === undefined) return undefined;
      const patch = await change(row);
      if (patch === undefined || Object.keys(patch).length === 0) return row;
      try {
        return await this.transaction(async (tx) => {
          const written = await tx.updateRow(type, row, patch);
          await opts.after?.(tx, row, written);
          return written;
        }, opts);
      } catch (err) {
        if (!runAgain(err)) throw err;
      }
    }
  }

  /** The row of `type` with that uuid. */
  async findRow<K extends FeedType>(type: K, uuid: string): Promise<FeedRows[K] | undefined> {
    const row = await this.db
      .selectFrom(TABLES[type] as "nodes")
      .selectAll()
      .where("uuid", "=", uuid)
      .executeTakeFirst();
    return row as FeedRows[K] | undefined;
  }

  /**
   * Inserts rows that have events (version 1), ROWS_PER_INSERT a statement, with their feed entries
   * (`create`) and a service's link rows, in one transaction; answered in the given order.
   */
  async insertRows<K extends FeedType>(type: K, values: readonly NewRow<K>[]): Promise<FeedRows[K][]> {
    if (values.length === 0) return [];
    return this.transaction(async (tx) => {
      const out: FeedRows[K][] = [];
      if (type === "container" && tx.dialect === "sqlite") {
        out.push(...((await insertEachSqlite(tx, TABLES[type], values)) as FeedRows[K][]));
      }
      if (values.length === 1 && out.length === 0) {
        const v = values[0]!;
        out.push(
          (await insertOne(tx, TABLES[type], {
            ...v,
            ...derivedColumns(type, v),
            version: 1,
          })) as FeedRows[K],
        );
      }
      for (let i = out.length; i < values.length; i += ROWS_PER_INSERT) {
        const part = values.slice(i, i + ROWS_PER_INSERT);
        const rows = (await tx.db
          .insertInto(TABLES[type] as "nodes")
          .values(part.map((v) => ({ ...v, ...derivedColumns(type, v), version: 1 })) as never)
          .returningAll()
          .execute()) as unknown as FeedRows[K][];
        const byUuid = new Map(rows.map((r) => [r.uuid, r]));
        for (const v of part) out.push(byUuid.get((v as unknown as { uuid: string }).uuid)!);
      }
      if (type === "service") {
        for (const r of out) await new ServiceStore(tx).indexLinks(r.uuid, (r as ServiceRow).spec);
      }
      await tx.recordWrites(
        type,
        out.map((row) => ({ row })),
      );
      return out;
    });
  }

  /**
   * Optimistic update of a row that has events: the patch (and derived columns, derived.ts) only if
   * the row still has the version `before` was read with (else VersionConflict), with its feed entry.
   */
  async updateRow<K extends FeedType>(type: K, before: FeedRows[K], patch: Patch<K>): Promise<FeedRows[K]> {
    return this.transaction(async (tx) => {
      const values = {
        ...patch,
        ...derivedColumns(type, { ...before, ...patch }),
        version: before.version + 1,
      };
      const row = await updateVersioned(tx, TABLES[type], values, before.uuid, before.version);
      if (!row) throw new VersionConflict(`${NOUNS[type]} ${before.uuid}`);
      // A service's new definition commits with its link rows, a node's end with its guard's.
      await withUpdatedRow(tx, type, before, row as FeedRows[K], patch);
      await tx.recordWrites(type, [{ before, row: row as FeedRows[K] }]);
      return row as FeedRows[K];
    });
  }

  /**
   * Appends the change-feed entries of rows the store's write methods just wrote in this
   * transaction (one multi-row statement): only those methods call it.
   */
  async recordWrites<K extends FeedType>(type: K, written: readonly Written<K>[]): Promise<void> {
    if (!this.inTransaction) throw new Error("recordWrites() runs in the transaction of the write");
    await this.shared.feed.record(this, type, written);
    const listeners = this.shared.writeListeners;
    if (listeners.size) {
      this.committed(() => {
        for (const l of listeners) l(type, written);
      });
    }
  }

  /**
   * Subscribes to the rows this process's transactions write (`recordWrites`), told when each
   * commits, before `transaction()` answers; never on a rollback; not other replicas' (onRemoteChange).
   */
  onCommittedWrites(listener: WriteListener): () => void {
    this.shared.writeListeners.add(listener);
    return () => this.shared.writeListeners.delete(listener);
  }

  /**
   * `update` entries of containers whose view changed without a write to their row (their
   * service's definition, and so their links, changed).
   */
  async containersTouched(rows: readonly ContainerRow[]): Promise<void> {
    if (rows.length === 0) return;
    await this.transaction((tx) => this.shared.feed.touched(tx, rows));
  }

  /** Runs cb once this store's transaction commits (at once outside a transaction); never on a rollback. */
  whenCommitted(cb: () => void): void {
    this.committed(cb);
  }

  private committed(cb: () => void): void {
    if (this.inTransaction) this.afterCommit.push(cb);
    else cb();
  }

  /**
   * Every write to users, API keys or memberships calls this: identity caches drop what they hold
   * when it commits (IdentityService), other replicas' too on PostgreSQL (IDENTITY_CHANGE on the
   * change channel, after the commit; if lost, their caches expire: IDENTITY_CACHE_TTL_MS).
   */
  identityChanged(): void {
    this.committed(() => {
      this.shared.identityNotifier.notify();
      if (this.dialect !== "postgres") return;
      const payload = `${this.shared.notifier.origin} ${IDENTITY_CHANGE} ${Date.now()}`;
      void sql`select ${announce(payload)}`.execute(this.shared.root).catch(() => undefined);
    });
  }

  /** Subscribes to identity changes (this process's, and other replicas' as they are announced). */
  onIdentityChange(listener: () => void): () => void {
    return this.shared.identityNotifier.subscribe(listener);
  }

  /**
   * Serializes writers that count before they insert in one namespace (quotas, the last owner): a
   * PostgreSQL row lock until the transaction ends; SQLite runs one write transaction at a time.
   */
  async lockNamespace(namespace: string): Promise<void> {
    if (!this.inTransaction) throw new Error("lockNamespace() runs in a transaction");
    if (this.dialect !== "postgres") return;
    await sql`select name from namespaces where name = ${namespace} for update`.execute(this.db);
  }

  // ---- change feed -----------------------------------------------------------------------------

  /**
   * Appends changes to the feed, in order, with the caller's transaction (one of its own outside
   * one): they are written just before it commits (feed-commit.ts), so a batch of rows and its
   * entries commit together. Commit notifications of their types follow the commit.
   */
  async appendChanges(cs: readonly Omit<ChangeRow, "revision">[]): Promise<void> {
    if (cs.length === 0) return;
    if (!this.changes) return this.transaction((tx) => tx.appendChanges(cs));
    this.changes.add(cs);
    const types = new Set(cs.map((c) => c.type));
    this.committed(() => {
      for (const type of types) this.shared.notifier.notify(type);
    });
  }

  /** One change (appendChanges): for tests and benchmarks that seed a feed. */
  appendChange(c: Omit<ChangeRow, "revision">): Promise<void> {
    return this.appendChanges([c]);
  }

  /** Feed entries after `revision`, in order; only those of `types` when given (the rest are skipped in SQL). */
  changesSince(revision: number, limit: number, types?: readonly FeedType[]): Promise<ChangeRow[]> {
    return this.reads.changesSince(revision, limit, types);
  }

  latestRevision(): Promise<number> {
    return this.reads.latestRevision();
  }

  /** Where the change feed stands in these namespaces (FeedReads.namespaceRevision). */
  namespaceRevision(namespaces: readonly string[]): Promise<number> {
    return this.reads.namespaceRevision(namespaces);
  }

  private get reads(): FeedReads {
    this.feedReads ??= new FeedReads(this);
    return this.feedReads;
  }

  /** Subscribes to commit notifications of the change feed (this process's, and other replicas'). */
  onChange(listener: (type: string) => void): () => void {
    return this.shared.notifier.subscribe(listener);
  }

  /** Wakes change-feed readers for a commit another replica announced (store/listen.ts). */
  announceRemoteChange(type: string): void {
    // "" is a reconnect of the listener: what was missed meanwhile may include identity changes.
    if (type === IDENTITY_CHANGE || type === "") this.shared.identityNotifier.notify();
    if (type !== IDENTITY_CHANGE) this.shared.notifier.notify(type);
    this.shared.remoteNotifier.notify(type);
  }

  /**
   * Subscribes to the commits other replicas announce (the changed object's type, "" when unknown,
   * as after a listener's reconnect): in-process state derived from their rows is dropped on them.
   */
  onRemoteChange(listener: (type: string) => void): () => void {
    return this.shared.remoteNotifier.subscribe(listener);
  }
}

/** Run again from a fresh read: a concurrent writer won, or PostgreSQL broke a deadlock (40P01). */
const runAgain = (err: unknown) =>
  err instanceof VersionConflict || (err as { code?: unknown })?.code === "40P01";
