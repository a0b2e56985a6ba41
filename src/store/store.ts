// The Store: every query of the platform lives here (only `store/` knows SQL).
// Components never call each other; they share this store, its transactions and its change feed.
import { CompiledQuery, type Kysely, sql } from "kysely";
import { VersionConflict } from "../domain/errors.ts";
import { type Clock, systemClock } from "../domain/time.ts";
import { AccountStore } from "./accounts.ts";
import { AgentStore } from "./agents.ts";
import type { Dialect } from "./db.ts";
import { derivedColumns, type NewRow, type Patch } from "./derived.ts";
import { isUniqueViolation, UniqueViolation } from "./errors.ts";
import { ChangeFeed, type FeedRows, type FeedType, type Written } from "./feed.ts";
import { NamespaceStore } from "./namespaces.ts";
import { type NodeRow, NodeRowCache, NodeStore } from "./nodes.ts";
import { QuotaStore } from "./quotas.ts";
import { RegistryStore } from "./registries.ts";
import { ReplicaStore } from "./replicas.ts";
import type {
  ActionTable,
  ApiKeyTable,
  ChangeTable,
  Database,
  OrgInvitationTable,
  OrgMemberTable,
  UserTable,
} from "./schema.ts";
import { type ContainerRow, inChunks, ROWS_PER_INSERT, type ServiceRow, ServiceStore } from "./services.ts";
import { StackStore } from "./stacks.ts";
import { TurnReads } from "./turn-reads.ts";

export type UserRow = Omit<UserTable, "id"> & { id: number };
export type InvitationRow = OrgInvitationTable;
export type ApiKeyRow = Omit<ApiKeyTable, "id"> & { id: number };
export type ActionRow = Omit<ActionTable, "id"> & { id: number };
export type ChangeRow = Omit<ChangeTable, "revision"> & { revision: number };
export type NewAction = Omit<
  ActionRow,
  "id" | "version" | "step" | "attempts" | "lease_owner" | "lease_until"
>;

/**
 * In-process wake-up for change-feed readers after a commit. Readers also poll the feed,
 * which covers changes committed by other processes (PostgreSQL scale-out).
 */
export class ChangeNotifier {
  private readonly listeners = new Set<(type: string) => void>();
  /** This replica's id, sent with PostgreSQL notifications so that a replica skips its own. */
  origin = "";
  subscribe(listener: (type: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  /** `type` is the changed object's type ("" when unknown: read the feed to learn more). */
  notify(type = ""): void {
    for (const l of this.listeners) l(type);
  }
}

/**
 * The PostgreSQL channel of change-feed notifications. A channel belongs to the database, not to a
 * schema: each payload ends with the schema the change was committed in (`origin type datetime
 * schema`), and a listener drops those of other schemas (other installations, other tests).
 */
export const CHANGE_CHANNEL = "berth_changes";

/**
 * The advisory lock that makes the feed's revisions commit in order (appendChange). It is the
 * database's, not the schema's: every replica of an installation must take the same one, those of
 * the previous release included while a rolling restart mixes them.
 */
const FEED_LOCK = 7340071;

/** A notification on the change channel in the schema's name (delivered only if its transaction commits). */
function announce(payload: string) {
  return sql`pg_notify(${CHANGE_CHANNEL}, ${payload} || ' ' || coalesce(current_schema(), ''))`;
}

/** Takes the feed lock and announces the commit. */
function lockAndAnnounce(payload: string) {
  return sql`select pg_advisory_xact_lock(${sql.lit(FEED_LOCK)}), ${announce(payload)}`;
}

/** The change channel's type for a change of users, API keys or memberships (not a feed change). */
export const IDENTITY_CHANGE = "identity";

export { isUniqueViolation, UniqueViolation };

export interface ActionQuery {
  namespaces: string[];
  uuid?: string;
  uuidPrefix?: string;
  states?: string[];
  objects?: string[];
  startGte?: number;
  startLte?: number;
  endGte?: number;
  endLte?: number;
  newestFirst?: boolean;
  limit: number;
  offset: number;
}

export const ACTIVE_STATES = ["In progress", "Canceling"];

export type { FeedRows, FeedType, NewRow, Patch, Written };

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
  };
}

/** The table of each resource that has events. */
const TABLES = {
  service: "services",
  container: "containers",
  stack: "stacks",
  node: "nodes",
  nodecluster: "nodeclusters",
  action: "actions",
} as const;

/** How a version conflict names the row. */
const NOUNS: Record<FeedType, string> = {
  service: "service",
  container: "container",
  stack: "stack",
  node: "node",
  nodecluster: "node cluster",
  action: "action",
};

export class Store {
  private readonly shared: Shared;
  private readonly inTransaction: boolean;
  private readonly afterCommit: (() => void)[];
  /** namespaceRevision's SQL text, by number of namespaces. */
  private readonly revisionSql = new Map<number, string>();
  /** namespaceRevision's reads of one turn of the event loop, shared. */
  private revisionReads: TurnReads<string, number> | undefined;

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

  private get notifier(): ChangeNotifier {
    return this.shared.notifier;
  }

  private get identityNotifier(): ChangeNotifier {
    return this.shared.identityNotifier;
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
    this.notifier.origin = replicaId;
  }

  /** A cheap round trip: whether the database answers now. */
  async ping(): Promise<void> {
    await sql`select 1`.execute(this.db);
  }

  /** Whether this store runs inside a transaction. */
  get isTransaction(): boolean {
    return this.inTransaction;
  }

  /**
   * A transaction that is run again from the start when a version check inside it fails (a
   * concurrent writer won): `fn` re-reads what it decides on each time. Outside a transaction only.
   */
  async retrying<T>(fn: (tx: Store) => Promise<T>, attempts = 5): Promise<T> {
    if (this.inTransaction) throw new Error("retrying() starts its own transaction");
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.transaction(fn);
      } catch (err) {
        if (!(err instanceof VersionConflict) || attempt >= attempts) throw err;
      }
    }
  }

  /** Runs fn in one transaction; nested calls join the outer one. */
  async transaction<T>(fn: (tx: Store) => Promise<T>): Promise<T> {
    if (this.inTransaction) return fn(this);
    const pending: (() => void)[] = [];
    const result = await this.db
      .transaction()
      .execute((trx) =>
        fn(new Store(trx, this.dialect, { within: { shared: this.shared, afterCommit: pending } })),
      );
    for (const cb of pending) cb();
    return result;
  }

  /**
   * The one way to change a row that has events: re-read it, let `change` decide the patch, write
   * it with its change-feed entry (`updateRow`) and, in the same transaction, what goes with it
   * (`after`: a log line); when another writer got there first (VersionConflict) start over from
   * a fresh read. Answers the row as written, the row as read when `change` answers undefined or
   * an empty patch (nothing to do), or undefined when the row is gone.
   */
  async mutate<K extends FeedType>(
    type: K,
    uuid: string,
    change: (row: FeedRows[K]) => Patch<K> | undefined | Promise<Patch<K> | undefined>,
    opts: { after?: (tx: Store, before: FeedRows[K], written: FeedRows[K]) => Promise<void> } = {},
  ): Promise<FeedRows[K] | undefined> {
    for (;;) {
      const row = await this.findRow(type, uuid);
      if (row === undefined) return undefined;
      const patch = await change(row);
      if (patch === undefined || Object.keys(patch).length === 0) return row;
      try {
        return await this.transaction(async (tx) => {
          const written = await tx.updateRow(type, row, patch);
          await opts.after?.(tx, row, written);
          return written;
        });
      } catch (err) {
        if (!(err instanceof VersionConflict)) throw err;
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
   * Inserts rows that have events (version 1), one statement per ROWS_PER_INSERT, with their
   * change-feed entries (`create`) in one more, in one transaction; answered in the given order.
   * A service's definition commits with its link rows.
   */
  async insertRows<K extends FeedType>(type: K, values: readonly NewRow<K>[]): Promise<FeedRows[K][]> {
    if (values.length === 0) return [];
    return this.transaction(async (tx) => {
      const out: FeedRows[K][] = [];
      if (type === "container" && tx.dialect === "sqlite") {
        out.push(...((await insertEachSqlite(tx, TABLES[type], values)) as FeedRows[K][]));
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
        for (const r of out) await tx.services.indexLinks(r.uuid, (r as ServiceRow).spec);
      }
      await tx.recordWrites(
        type,
        out.map((row) => ({ row })),
      );
      return out;
    });
  }

  /**
   * Optimistic update of a row that has events: applies the patch (with the columns derived from
   * the row as written, see derived.ts) only if the row still has the version it was read with
   * (VersionConflict otherwise) and appends its change-feed entry in the same transaction. `before` is the row as read (what changed decides the entry).
   */
  async updateRow<K extends FeedType>(type: K, before: FeedRows[K], patch: Patch<K>): Promise<FeedRows[K]> {
    return this.transaction(async (tx) => {
      const row = await tx.db
        .updateTable(TABLES[type] as "nodes")
        .set({
          ...patch,
          ...derivedColumns(type, { ...before, ...patch }),
          version: before.version + 1,
        } as never)
        .where("uuid", "=", before.uuid)
        .where("version", "=", before.version)
        .returningAll()
        .executeTakeFirst();
      if (!row) throw new VersionConflict(`${NOUNS[type]} ${before.uuid}`);
      // A service's new definition commits with its link rows.
      if (type === "service" && "spec" in patch)
        await tx.services.indexLinks(row.uuid, (row as unknown as ServiceRow).spec);
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
   * Subscribes to the rows this process's transactions write through the store's write methods
   * (every write of a row that has events goes through `recordWrites`), told once each
   * transaction commits, before `transaction()` answers; a transaction rolled back tells nothing.
   * Other replicas' writes are not told here: see onRemoteChange.
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

  private committed(cb: () => void): void {
    if (this.inTransaction) this.afterCommit.push(cb);
    else cb();
  }

  /**
   * Every write to users, API keys or organization memberships calls this: in-process caches of
   * authentication and namespace access are dropped when it commits (see IdentityService). On
   * PostgreSQL the other replicas are told too (IDENTITY_CHANGE on the change channel), so a revoked
   * key or a removed member loses access there, open streams included, without waiting for a cache
   * to expire. Sent after the commit; if it is lost, their caches still expire
   * (IDENTITY_CACHE_TTL_MS) and a reconnecting listener drops them (announceRemoteChange).
   */
  identityChanged(): void {
    this.committed(() => {
      this.identityNotifier.notify();
      if (this.dialect !== "postgres") return;
      const payload = `${this.notifier.origin} ${IDENTITY_CHANGE} ${Date.now()}`;
      void sql`select ${announce(payload)}`.execute(this.shared.root).catch(() => undefined);
    });
  }

  /** Subscribes to identity changes (this process's, and other replicas' as they are announced). */
  onIdentityChange(listener: () => void): () => void {
    return this.identityNotifier.subscribe(listener);
  }

  // ---- namespaces, users, organizations -------------------------------------------------------

  async namespaceExists(name: string): Promise<boolean> {
    const row = await this.db
      .selectFrom("namespaces")
      .select("name")
      .where("name", "=", name)
      .executeTakeFirst();
    return row !== undefined;
  }

  async findNamespace(name: string) {
    return this.db.selectFrom("namespaces").selectAll().where("name", "=", name).executeTakeFirst();
  }

  async countUsers(): Promise<number> {
    const row = await this.db
      .selectFrom("users")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  /** Creates a user, its namespace and its primary email. Throws UniqueViolation if the name is taken. */
  async createUser(u: Omit<UserRow, "id">): Promise<UserRow> {
    return this.transaction(async (tx) => {
      try {
        await tx.db
          .insertInto("namespaces")
          .values({ name: u.username, kind: "user", created: u.date_joined })
          .execute();
      } catch (err) {
        if (isUniqueViolation(err)) throw new UniqueViolation(u.username);
        throw err;
      }
      const row = await tx.db.insertInto("users").values(u).returningAll().executeTakeFirstOrThrow();
      await tx.db
        .insertInto("emails")
        .values({ user_id: row.id, email: u.email, verified: 1, primary: 1, created: u.date_joined })
        .execute();
      return row;
    });
  }

  async findUserByName(username: string): Promise<UserRow | undefined> {
    return this.db.selectFrom("users").selectAll().where("username", "=", username).executeTakeFirst();
  }

  async firstAdmin(): Promise<UserRow | undefined> {
    return this.db
      .selectFrom("users")
      .selectAll()
      .where("is_admin", "=", 1)
      .orderBy("id")
      .limit(1)
      .executeTakeFirst();
  }

  async findUserById(id: number): Promise<UserRow | undefined> {
    return this.db.selectFrom("users").selectAll().where("id", "=", id).executeTakeFirst();
  }

  async insertApiKey(k: Omit<ApiKeyRow, "id">): Promise<ApiKeyRow> {
    return this.db.insertInto("api_keys").values(k).returningAll().executeTakeFirstOrThrow();
  }

  async listApiKeys(userId: number): Promise<ApiKeyRow[]> {
    return this.db.selectFrom("api_keys").selectAll().where("user_id", "=", userId).orderBy("id").execute();
  }

  async deleteApiKey(userId: number, id: number): Promise<boolean> {
    const res = await this.db
      .deleteFrom("api_keys")
      .where("user_id", "=", userId)
      .where("id", "=", id)
      .executeTakeFirst();
    this.identityChanged();
    return Number(res.numDeletedRows) > 0;
  }

  async deleteServiceApiKeys(serviceUuid: string): Promise<void> {
    await this.db.deleteFrom("api_keys").where("service_uuid", "=", serviceUuid).execute();
    this.identityChanged();
  }

  /** The key with that hash and its user, in one statement. */
  async findApiKeyByHash(hash: string): Promise<{ key: ApiKeyRow; user: UserRow } | undefined> {
    const row = await this.db
      .selectFrom("api_keys as k")
      .innerJoin("users as u", "u.id", "k.user_id")
      .selectAll("u")
      .select([
        "k.id as k_id",
        "k.user_id as k_user_id",
        "k.label as k_label",
        "k.key_hash as k_key_hash",
        "k.created as k_created",
        "k.namespace_limit as k_namespace_limit",
        "k.service_uuid as k_service_uuid",
      ])
      .where("k.key_hash", "=", hash)
      .executeTakeFirst();
    if (!row) return undefined;
    const { k_id, k_user_id, k_label, k_key_hash, k_created, k_namespace_limit, k_service_uuid, ...user } =
      row;
    return {
      key: {
        id: k_id,
        user_id: k_user_id,
        label: k_label,
        key_hash: k_key_hash,
        created: k_created,
        namespace_limit: k_namespace_limit,
        service_uuid: k_service_uuid,
      },
      user,
    };
  }

  async createOrg(name: string, owner: string, now: number): Promise<void> {
    await this.transaction(async (tx) => {
      try {
        await tx.db.insertInto("namespaces").values({ name, kind: "org", created: now }).execute();
      } catch (err) {
        if (isUniqueViolation(err)) throw new UniqueViolation(name);
        throw err;
      }
      await tx.db.insertInto("org_members").values({ org: name, username: owner, role: "owner" }).execute();
      tx.identityChanged();
    });
  }

  async orgMembers(org: string): Promise<OrgMemberTable[]> {
    return this.db.selectFrom("org_members").selectAll().where("org", "=", org).orderBy("username").execute();
  }

  async membership(org: string, username: string): Promise<OrgMemberTable | undefined> {
    return this.db
      .selectFrom("org_members")
      .selectAll()
      .where("org", "=", org)
      .where("username", "=", username)
      .executeTakeFirst();
  }

  async orgsOf(username: string): Promise<string[]> {
    const rows = await this.db
      .selectFrom("org_members")
      .select("org")
      .where("username", "=", username)
      .execute();
    return rows.map((r) => r.org).sort();
  }

  /** Adds or changes a membership. */
  async putMember(org: string, username: string, role: "owner" | "member"): Promise<void> {
    await this.transaction(async (tx) => {
      const existing = await tx.membership(org, username);
      if (existing) {
        await tx.db
          .updateTable("org_members")
          .set({ role })
          .where("org", "=", org)
          .where("username", "=", username)
          .execute();
      } else {
        await tx.db.insertInto("org_members").values({ org, username, role }).execute();
      }
      tx.identityChanged();
    });
  }

  async removeMember(org: string, username: string): Promise<boolean> {
    const res = await this.db
      .deleteFrom("org_members")
      .where("org", "=", org)
      .where("username", "=", username)
      .executeTakeFirst();
    this.identityChanged();
    return Number(res.numDeletedRows) > 0;
  }

  // ---- organization invitations ------------------------------------------------------------------

  /**
   * Writes an invitation (a second one to the same name replaces the first). `userId` is the user
   * the name belongs to now, or null: the same statements run for an unknown name.
   */
  async putInvitation(inv: OrgInvitationTable): Promise<OrgInvitationTable> {
    return this.transaction(async (tx) => {
      await tx.db
        .deleteFrom("org_invitations")
        .where("org", "=", inv.org)
        .where("username", "=", inv.username)
        .execute();
      return tx.db.insertInto("org_invitations").values(inv).returningAll().executeTakeFirstOrThrow();
    });
  }

  async orgInvitations(org: string): Promise<OrgInvitationTable[]> {
    return this.db
      .selectFrom("org_invitations")
      .selectAll()
      .where("org", "=", org)
      .orderBy("created")
      .orderBy("username")
      .execute();
  }

  /** Invitations the user may accept: made to its name while it was this user. */
  async invitationsOf(user: { id: number; username: string }): Promise<OrgInvitationTable[]> {
    return this.db
      .selectFrom("org_invitations")
      .selectAll()
      .where("username", "=", user.username)
      .where("user_id", "=", user.id)
      .orderBy("created")
      .orderBy("org")
      .execute();
  }

  async deleteInvitation(org: string, username: string): Promise<boolean> {
    const res = await this.db
      .deleteFrom("org_invitations")
      .where("org", "=", org)
      .where("username", "=", username)
      .executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  }

  /**
   * Accepts the user's invitation to `org`: the membership (with the invitation's role) and the
   * invitation's removal commit together. Undefined when the user has no such invitation.
   */
  async acceptInvitation(
    org: string,
    user: { id: number; username: string },
  ): Promise<OrgInvitationTable | undefined> {
    return this.transaction(async (tx) => {
      const inv = await tx.db
        .deleteFrom("org_invitations")
        .where("org", "=", org)
        .where("username", "=", user.username)
        .where("user_id", "=", user.id)
        .returningAll()
        .executeTakeFirst();
      if (!inv) return undefined;
      // The organization may have gone meanwhile; then there is nothing to join.
      if ((await tx.findNamespace(org))?.kind !== "org") return undefined;
      if (await tx.membership(org, user.username)) {
        await tx.db
          .updateTable("org_members")
          .set({ role: inv.role })
          .where("org", "=", org)
          .where("username", "=", user.username)
          .execute();
      } else {
        await tx.db
          .insertInto("org_members")
          .values({ org, username: user.username, role: inv.role })
          .execute();
      }
      tx.identityChanged();
      return inv;
    });
  }

  /**
   * Removes a member unless that would leave the organization without an owner: the check and the
   * delete commit together, so two owners leaving at once cannot both go. Answers what happened.
   */
  async removeMemberKeepingOwner(
    org: string,
    username: string,
  ): Promise<"removed" | "missing" | "last_owner"> {
    return this.transaction(async (tx) => {
      if (tx.dialect === "postgres") await tx.lockNamespace(org);
      const members = await tx.orgMembers(org);
      const target = members.find((m) => m.username === username);
      if (!target) return "missing";
      if (target.role === "owner" && members.filter((m) => m.role === "owner").length === 1)
        return "last_owner";
      await tx.removeMember(org, username);
      return "removed";
    });
  }

  /**
   * Serializes writers that count before they insert in one namespace (quotas, the last owner):
   * on PostgreSQL the namespace's row is locked until the transaction ends, so a second writer
   * counts after the first commits; SQLite runs one write transaction at a time already.
   */
  async lockNamespace(namespace: string): Promise<void> {
    if (!this.inTransaction) throw new Error("lockNamespace() runs in a transaction");
    if (this.dialect !== "postgres") return;
    await sql`select name from namespaces where name = ${namespace} for update`.execute(this.db);
  }

  // ---- actions ---------------------------------------------------------------------------------

  /** Inserts an action with its change-feed entry; `lease` reserves it for the worker that recorded it until `until`. */
  async insertAction(a: NewAction, lease?: { owner: string; until: number }): Promise<ActionRow> {
    const [row] = await this.insertRows("action", [
      { ...a, step: 0, attempts: 0, lease_owner: lease?.owner ?? null, lease_until: lease?.until ?? null },
    ]);
    return row!;
  }

  async findAction(uuid: string): Promise<ActionRow | undefined> {
    return this.db.selectFrom("actions").selectAll().where("uuid", "=", uuid).executeTakeFirst();
  }

  /** Optimistic update (`updateRow`): a change of state appends the action's change-feed entry. */
  async updateAction(a: ActionRow, patch: Partial<ActionRow>): Promise<ActionRow> {
    return this.updateRow("action", a, patch);
  }

  async listActions(q: ActionQuery): Promise<{ rows: ActionRow[]; total: number }> {
    let base = this.db
      .selectFrom("actions")
      .where("namespace", "in", q.namespaces.length ? q.namespaces : [""]);
    if (q.uuid !== undefined) base = base.where("uuid", "=", q.uuid);
    if (q.uuidPrefix !== undefined)
      base = base.where("uuid", "like", `${q.uuidPrefix.replace(/[%_\\]/g, "")}%`);
    if (q.states?.length) base = base.where("state", "in", q.states);
    if (q.objects) base = base.where("object", "in", q.objects.length ? q.objects : [""]);
    if (q.startGte !== undefined) base = base.where("start_date", ">=", q.startGte);
    if (q.startLte !== undefined) base = base.where("start_date", "<=", q.startLte);
    if (q.endGte !== undefined) base = base.where("end_date", ">=", q.endGte);
    if (q.endLte !== undefined) base = base.where("end_date", "<=", q.endLte);
    const count = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst();
    const rows = await base
      .selectAll()
      .orderBy("id", q.newestFirst ? "desc" : "asc")
      .limit(q.limit)
      .offset(q.offset)
      .execute();
    return { rows, total: Number(count?.n ?? 0) };
  }

  /** Which of `objects` an action works on now (one statement per chunk of objects). */
  async objectsWithActiveActions(objects: readonly string[]): Promise<Set<string>> {
    const rows = await inChunks(objects, (part) =>
      this.db
        .selectFrom("actions")
        .select("object")
        .where("object", "in", part)
        .where("kind", "is not", null)
        .where("state", "in", ACTIVE_STATES)
        .execute(),
    );
    return new Set(rows.map((r) => r.object));
  }

  /** The action currently holding the object (In progress or Canceling), if any. */
  async activeActionOn(object: string): Promise<ActionRow | undefined> {
    return this.db
      .selectFrom("actions")
      .selectAll()
      .where("object", "=", object)
      .where("kind", "is not", null)
      .where("state", "in", ACTIVE_STATES)
      .executeTakeFirst();
  }

  /**
   * Actions a worker could run now: active ones whose lease lapsed, those reserved for `mine.owner`
   * (recorded by it) that it is not running yet (`mine.running`), and the oldest Pending per free
   * object.
   */
  async claimableActions(
    now: number,
    limit: number,
    mine?: { owner: string; running: string[] },
  ): Promise<ActionRow[]> {
    const active = await this.db
      .selectFrom("actions")
      .selectAll()
      .where("kind", "is not", null)
      .where("state", "in", ACTIVE_STATES)
      .where((eb) => {
        const free = [eb("lease_until", "is", null), eb("lease_until", "<", now)];
        if (!mine) return eb.or(free);
        const reserved = eb.and([
          eb("lease_owner", "=", mine.owner),
          ...(mine.running.length ? [eb("uuid", "not in", mine.running)] : []),
        ]);
        return eb.or([...free, reserved]);
      })
      .orderBy("id")
      .limit(limit)
      .execute();
    const pending = await this.db
      .selectFrom("actions as a")
      .selectAll("a")
      .where("a.state", "=", "Pending")
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom("actions as b")
              .select("b.id")
              .whereRef("b.object", "=", "a.object")
              .where("b.kind", "is not", null)
              .where((eb) =>
                eb.or([
                  eb("b.state", "in", ACTIVE_STATES),
                  eb.and([eb("b.state", "=", "Pending"), eb("b.id", "<", eb.ref("a.id"))]),
                ]),
              ),
          ),
        ),
      )
      .orderBy("a.id")
      .limit(limit)
      .execute();
    return [...active, ...pending];
  }

  /** Gives up the leases a stopping worker holds on unfinished actions: others claim them at once. */
  async releaseActionLeases(owner: string): Promise<void> {
    await this.db
      .updateTable("actions")
      .set((eb) => ({ lease_until: 0, version: eb("version", "+", 1) }))
      .where("lease_owner", "=", owner)
      .where("state", "in", ACTIVE_STATES)
      .execute();
  }

  async unfinishedActionCount(): Promise<number> {
    const row = await this.db
      .selectFrom("actions")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("state", "in", ["Pending", ...ACTIVE_STATES])
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  async appendActionLog(actionUuid: string, ts: number, line: string): Promise<void> {
    await this.db.insertInto("action_logs").values({ action_uuid: actionUuid, ts, line }).execute();
  }

  /** Lines of actions' logs (of one action or several) in one statement per ROWS_PER_INSERT, in order. */
  async appendActionLogs(lines: readonly { action_uuid: string; ts: number; line: string }[]): Promise<void> {
    await insertMany(this, "action_logs", ["action_uuid", "ts", "line"], lines);
  }

  /** The last `tail` lines of an action's log, oldest first, with ids for following. */
  async actionLogTail(actionUuid: string, tail: number) {
    const rows = await this.db
      .selectFrom("action_logs")
      .selectAll()
      .where("action_uuid", "=", actionUuid)
      .orderBy("id", "desc")
      .limit(tail)
      .execute();
    return rows.reverse();
  }

  async actionLogAfter(actionUuid: string, afterId: number) {
    return this.db
      .selectFrom("action_logs")
      .selectAll()
      .where("action_uuid", "=", actionUuid)
      .where("id", ">", afterId)
      .orderBy("id")
      .execute();
  }

  // ---- change feed -----------------------------------------------------------------------------

  /**
   * Appends a change to the feed inside the caller's transaction. On PostgreSQL an advisory lock
   * held to commit makes revisions commit in order, so a reader never skips a late-committing one.
   */
  async appendChange(c: Omit<ChangeRow, "revision">): Promise<number> {
    if (this.dialect === "postgres") {
      // NOTIFY is delivered at commit: other replicas wake their feed readers (LISTEN, store/listen.ts).
      await lockAndAnnounce(`${this.notifier.origin} ${c.type} ${c.datetime}`).execute(this.db);
    }
    const row = await this.db.insertInto("changes").values(c).returning("revision").executeTakeFirstOrThrow();
    this.committed(() => this.notifier.notify(c.type));
    return row.revision;
  }

  /**
   * Appends several changes in one statement (per ROWS_PER_INSERT), in order, inside the caller's
   * transaction: a batch of container records and its change-feed entries commit together.
   */
  async appendChanges(cs: readonly Omit<ChangeRow, "revision">[]): Promise<void> {
    if (cs.length === 0) return;
    if (this.dialect === "postgres") {
      await lockAndAnnounce(`${this.notifier.origin} ${cs[0]!.type} ${cs[0]!.datetime}`).execute(this.db);
    }
    await insertMany(this, "changes", CHANGE_COLUMNS, cs);
    const types = new Set(cs.map((c) => c.type));
    this.committed(() => {
      for (const type of types) this.notifier.notify(type);
    });
  }

  /** Feed entries after `revision`, in order; only those of `types` when given (the rest are skipped in SQL). */
  async changesSince(revision: number, limit: number, types?: readonly FeedType[]): Promise<ChangeRow[]> {
    let q = this.db.selectFrom("changes").selectAll().where("revision", ">", revision);
    if (types) q = q.where("type", "in", types);
    return q.orderBy("revision").limit(limit).execute();
  }

  async latestRevision(): Promise<number> {
    const row = await this.db
      .selectFrom("changes")
      .select((eb) => eb.fn.max("revision").as("r"))
      .executeTakeFirst();
    return Number(row?.r ?? 0);
  }

  /**
   * Where the change feed stands in these namespaces: the sum of each one's latest revision, which
   * grows whenever any of them does (revisions only grow, and commit in their order: appendChanges).
   * A view built after reading it is current as long as it has not moved, provided every row the
   * view read lives in these namespaces (api/answer-cache.ts). One statement, one seek of
   * `changes_ns` per namespace, its SQL text built once per number of namespaces.
   */
  async namespaceRevision(namespaces: readonly string[]): Promise<number> {
    if (namespaces.length === 0) return 0;
    // Outside a transaction, the checks of one turn share their statement (TurnReads).
    if (this.inTransaction) return this.readNamespaceRevision(namespaces);
    this.revisionReads ??= new TurnReads(
      async (keys) =>
        new Map(
          await Promise.all(
            keys.map(async (k) => [k, await this.readNamespaceRevision(k.split("\u0000"))] as const),
          ),
        ),
      { firstAtOnce: true },
    );
    return (await this.revisionReads.get(namespaces.join("\u0000"))) ?? 0;
  }

  private async readNamespaceRevision(namespaces: readonly string[]): Promise<number> {
    let text = this.revisionSql.get(namespaces.length);
    if (text === undefined) {
      const compiled = this.db
        .selectNoFrom((eb) =>
          namespaces.map((ns, i) =>
            eb
              .selectFrom("changes")
              .select((e) => e.fn.max("revision").as("m"))
              .where("namespace", "=", ns)
              .as(`r${i}`),
          ),
        )
        .compile();
      text = compiled.sql;
      this.revisionSql.set(namespaces.length, text);
    }
    const { rows } = await this.db.executeQuery<Record<string, number | null>>(
      CompiledQuery.raw(text, [...namespaces]),
    );
    let sum = 0;
    for (const v of Object.values(rows[0] ?? {})) sum += Number(v ?? 0);
    return sum;
  }

  /** Subscribes to commit notifications of the change feed (this process's, and other replicas'). */
  onChange(listener: (type: string) => void): () => void {
    return this.notifier.subscribe(listener);
  }

  /** Wakes change-feed readers for a commit another replica announced (store/listen.ts). */
  announceRemoteChange(type: string): void {
    // "" is a reconnect of the listener: what was missed meanwhile may include identity changes.
    if (type === IDENTITY_CHANGE || type === "") this.identityNotifier.notify();
    if (type !== IDENTITY_CHANGE) this.notifier.notify(type);
    this.shared.remoteNotifier.notify(type);
  }

  /**
   * Subscribes to the commits other replicas announce (`type` of the changed object, "" when
   * unknown, as after a reconnect of the listener): in-process state derived from rows this
   * process did not write is dropped on them.
   */
  onRemoteChange(listener: (type: string) => void): () => void {
    return this.shared.remoteNotifier.subscribe(listener);
  }

  /** Unfinished actions: how many wait (Pending) or run, and since when the oldest waits. */
  async actionQueue(): Promise<{ pending: number; active: number; oldestPendingStart: number | null }> {
    const rows = await this.db
      .selectFrom("actions")
      .select((eb) => ["state", eb.fn.countAll<number>().as("n"), eb.fn.min("start_date").as("oldest")])
      .where("state", "in", ["Pending", ...ACTIVE_STATES])
      .groupBy("state")
      .execute();
    let pending = 0;
    let active = 0;
    let oldestPendingStart: number | null = null;
    for (const r of rows) {
      if (r.state === "Pending") {
        pending = Number(r.n);
        oldestPendingStart = r.oldest === null ? null : Number(r.oldest);
      } else active += Number(r.n);
    }
    return { pending, active, oldestPendingStart };
  }
}

/** SQL text of a one-row INSERT into a table, by its table and columns. */
const INSERT_ONE_SQL = new Map<string, string>();

/** The columns of a change-feed entry as written (the revision is the database's). */
const CHANGE_COLUMNS = [
  "namespace",
  "type",
  "action",
  "resource_uri",
  "state",
  "parents",
  "datetime",
] as const satisfies readonly (keyof NewChangeRow)[];
type NewChangeRow = Omit<ChangeRow, "revision">;

const INSERT_MANY_SQL = new Map<string, string>();

/**
 * Rows of the same columns in multi-row statements (ROWS_PER_INSERT rows each) whose text is made
 * once per table, columns and row count: the feed's entries and actions' log lines are appended
 * at every commit of a large deploy, and building each statement through the query builder cost
 * more than running it.
 */
async function insertMany<C extends string>(
  tx: Store,
  table: string,
  columns: readonly C[],
  rows: readonly Readonly<Record<C, unknown>>[],
): Promise<void> {
  for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) {
    const part = rows.slice(i, i + ROWS_PER_INSERT);
    const key = `${tx.dialect}\u0000${table}\u0000${columns.join(",")}\u0000${part.length}`;
    let text = INSERT_MANY_SQL.get(key);
    if (!text) {
      let n = 0;
      const placeholder = tx.dialect === "postgres" ? () => `$${++n}` : () => "?";
      const tuples = part.map(() => `(${columns.map(placeholder).join(", ")})`);
      text = `insert into "${table}" (${columns.map((c) => `"${c}"`).join(", ")}) values ${tuples.join(", ")}`;
      if (INSERT_MANY_SQL.size >= 1000) INSERT_MANY_SQL.clear();
      INSERT_MANY_SQL.set(key, text);
    }
    const parameters: unknown[] = [];
    for (const row of part) for (const c of columns) parameters.push(row[c]);
    await tx.db.executeQuery(CompiledQuery.raw(text, parameters));
  }
}

/**
 * Container records on SQLite: one run of a statement prepared once per record (as cheap as a
 * multi-row statement there, without building one of thousands of parameters or reading the
 * rows back): each answered as inserted, with its id.
 */
async function insertEachSqlite<K extends FeedType>(
  tx: Store,
  table: string,
  values: readonly NewRow<K>[],
): Promise<FeedRows[K][]> {
  const out: FeedRows[K][] = [];
  for (const v of values) {
    const row: Record<string, unknown> = { ...v, ...derivedColumns("container", v as never), version: 1 };
    for (const k of Object.keys(row)) if (row[k] === undefined) delete row[k];
    const columns = Object.keys(row);
    const key = `${table}\u0000${columns.join(",")}`;
    let text = INSERT_ONE_SQL.get(key);
    if (!text) {
      text = `insert into "${table}" (${columns.map((c) => `"${c}"`).join(", ")}) values (${columns.map(() => "?").join(", ")})`;
      INSERT_ONE_SQL.set(key, text);
    }
    const result = await tx.db.executeQuery(CompiledQuery.raw(text, Object.values(row)));
    out.push({ id: Number(result.insertId), ...row } as unknown as FeedRows[K]);
  }
  return out;
}
