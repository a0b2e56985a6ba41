// The types every module of the store shares: rows as read, the rows that have events, and the
// kernel as its sections see it (store.ts implements it). A leaf: it imports nothing of the store
// but the schema, so sections and the kernel depend on it and never on each other's types.
import type { Kysely } from "kysely";
import type { Dialect } from "./db.ts";
import type {
  ActionTable,
  ApiKeyTable,
  ChangeTable,
  ContainerTable,
  Database,
  NodeClusterTable,
  NodeTable,
  OrgInvitationTable,
  ServiceTable,
  StackTable,
  UserTable,
} from "./schema.ts";

export type ServiceRow = Omit<ServiceTable, "id"> & { id: number };
export type ContainerRow = Omit<ContainerTable, "id"> & { id: number };
export type ClusterRow = Omit<NodeClusterTable, "id"> & { id: number };
export type NodeRow = Omit<NodeTable, "id"> & { id: number };
export type StackRow = Omit<StackTable, "id"> & { id: number };
export type UserRow = Omit<UserTable, "id"> & { id: number };
export type InvitationRow = OrgInvitationTable;
export type ApiKeyRow = Omit<ApiKeyTable, "id"> & { id: number };
export type ActionRow = Omit<ActionTable, "id"> & { id: number };
export type ChangeRow = Omit<ChangeTable, "revision"> & { revision: number };
export type NewAction = Omit<
  ActionRow,
  "id" | "version" | "step" | "attempts" | "lease_owner" | "lease_until"
>;

/** The rows that have events, by event type. */
export interface FeedRows {
  service: ServiceRow;
  container: ContainerRow;
  stack: StackRow;
  node: NodeRow;
  nodecluster: ClusterRow;
  action: ActionRow;
}
export type FeedType = keyof FeedRows;

/** A row's write as the feed records it: the row as written, and as it was read (none when inserted). */
export interface Written<K extends FeedType> {
  before?: FeedRows[K];
  row: FeedRows[K];
}

/** The derived columns of each type: no write method accepts them from a caller. */
export type DerivedColumn<K extends FeedType> = K extends "container" | "node" ? "state" : never;

/** Rules out a derived column even in a value typed as the whole row (`state?: never`). */
type WithoutDerived<K extends FeedType> = { [P in DerivedColumn<K>]?: never };

/** A patch of a row that has events, without its derived columns. */
export type Patch<K extends FeedType> = Partial<Omit<FeedRows[K], DerivedColumn<K>>> & WithoutDerived<K>;

/** A new row that has events, without its id, version and derived columns. */
export type NewRow<K extends FeedType> = Omit<FeedRows[K], "id" | "version" | DerivedColumn<K>> &
  WithoutDerived<K>;

/**
 * The transaction kernel as the store's sections use it (implemented by `Store`, store.ts): the
 * connection, transactions, the writes of rows that have events with their change-feed entries,
 * and the identity and namespace primitives. A section takes a Kernel, never the Store, so the
 * store's modules form no import cycle; a section that needs another constructs it over the same
 * kernel (`new ServiceStore(tx)`).
 */
export interface Kernel {
  readonly db: Kysely<Database>;
  readonly dialect: Dialect;
  readonly isTransaction: boolean;
  transaction<T>(fn: (tx: Kernel) => Promise<T>): Promise<T>;
  mutate<K extends FeedType>(
    type: K,
    uuid: string,
    change: (row: FeedRows[K]) => Patch<K> | undefined | Promise<Patch<K> | undefined>,
  ): Promise<FeedRows[K] | undefined>;
  insertRows<K extends FeedType>(type: K, values: readonly NewRow<K>[]): Promise<FeedRows[K][]>;
  updateRow<K extends FeedType>(type: K, before: FeedRows[K], patch: Patch<K>): Promise<FeedRows[K]>;
  recordWrites<K extends FeedType>(type: K, written: readonly Written<K>[]): Promise<void>;
  appendChanges(cs: readonly Omit<ChangeRow, "revision">[]): Promise<void>;
  identityChanged(): void;
  lockNamespace(namespace: string): Promise<void>;
}
