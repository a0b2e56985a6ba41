// Queries of node clusters and nodes.

import { setImmediate as nextTurn } from "node:timers/promises";
import { inChunks } from "./batches.ts";
import { containsText, type ListOrder, orderOf } from "./list-search.ts";
import { clusterFailing, nodeFailing } from "./overview.ts";
import type { ClusterRow, Kernel, NewRow, NodeRow, Patch } from "./types.ts";

export type { ClusterRow, NodeRow } from "./types.ts";
export type NewCluster = Omit<ClusterRow, "id" | "version">;
/** A new node: its `state` is derived by the store (derived.ts). */
export type NewNode = NewRow<"node">;

/** Live nodes read per statement (liveNodes). */
export const LIVE_NODES_PAGE = 1000;
/** A change of a node: node actions write `phase`, health checks `observed`, never `state`. */
export type NodePatch = Patch<"node">;

export interface ClusterQuery {
  namespace: string;
  uuid?: string;
  uuidPrefix?: string;
  state?: string;
  /** Leaves out this state (`state__not`). */
  stateNot?: string;
  name?: string;
  region?: string;
  nodeType?: string;
  /** Names containing this text, any case (`name__icontains`). */
  nameContains?: string;
  /** Only failing clusters (`failing=true`, store/overview.ts), or only the others. */
  failing?: boolean;
  orderBy?: ListOrder;
  limit: number;
  offset: number;
}

export interface NodeQuery {
  namespace: string;
  uuid?: string;
  uuidPrefix?: string;
  state?: string;
  /** Leaves out this state (`state__not`). */
  stateNot?: string;
  cluster?: string;
  nodeType?: string;
  region?: string;
  engineVersion?: string;
  /** Names containing this text, any case (`name__icontains`). */
  nameContains?: string;
  /** Only failing nodes (`failing=true`, store/overview.ts), or only the others. */
  failing?: boolean;
  orderBy?: ListOrder;
  limit: number;
  offset: number;
}

/** Node rows as this process last read or wrote them (NodeStore.knownNodes). */
export class NodeRowCache {
  private readonly rows = new Map<string, NodeRow>();
  /** Counts the changes told; a read keeps a row only if no change of it was told since the read began. */
  private generation = 0;
  /** When each row was last written (its generation), and when everything was last dropped. */
  private readonly writtenAt = new Map<string, number>();
  private clearedAt = 0;
  private static readonly MAX = 100_000;

  /** Rows this process's committed transactions wrote. */
  wrote(rows: readonly NodeRow[]): void {
    this.generation += 1;
    for (const r of rows) {
      this.rows.set(r.uuid, r);
      this.writtenAt.set(r.uuid, this.generation);
    }
  }

  /** Another replica changed nodes (or what it changed is not known): nothing held is trusted. */
  clear(): void {
    this.generation += 1;
    this.clearedAt = this.generation;
    this.rows.clear();
    this.writtenAt.clear();
  }

  async get(
    uuids: readonly string[],
    read: (missing: string[]) => Promise<NodeRow[]>,
  ): Promise<Map<string, NodeRow>> {
    const out = new Map<string, NodeRow>();
    const missing: string[] = [];
    for (const u of new Set(uuids)) {
      const hit = this.rows.get(u);
      if (hit) out.set(u, hit);
      else missing.push(u);
    }
    if (missing.length === 0) return out;
    const began = this.generation;
    const found = await read(missing);
    if (this.rows.size + found.length > NodeRowCache.MAX) this.clear();
    for (const r of found) {
      out.set(r.uuid, r);
      // A row written, or everything dropped, while the read ran: what the read saw may be older.
      if (this.clearedAt > began || (this.writtenAt.get(r.uuid) ?? 0) > began) continue;
      this.rows.set(r.uuid, r);
    }
    return out;
  }
}

export class NodeStore {
  constructor(
    private readonly s: Kernel,
    private readonly cache?: NodeRowCache,
  ) {}

  /**
   * Nodes by uuid as this process last read or wrote them, for the work of actions and the
   * reconciler (a burst of container work reads each node once, not once per batch): every
   * committed write of this process updates them (Store.onCommittedWrites), and a commit another
   * replica announces (Store.onRemoteChange) drops them all, so they lag another replica's write
   * only until its notification arrives, as a read made just before that write would. Views and
   * anything in a transaction read the database (`nodesByUuid`).
   */
  async knownNodes(uuids: readonly string[]): Promise<Map<string, NodeRow>> {
    if (!this.cache) return new Map((await this.nodesByUuid([...new Set(uuids)])).map((n) => [n.uuid, n]));
    return this.cache.get(uuids, (missing) => this.nodesByUuid(missing));
  }

  /** One node as `knownNodes` holds it. */
  async knownNode(uuid: string): Promise<NodeRow | undefined> {
    return (await this.knownNodes([uuid])).get(uuid);
  }

  /** Inserts a cluster with its change-feed entry. */
  async insertCluster(c: NewCluster): Promise<ClusterRow> {
    const [row] = await this.s.insertRows("nodecluster", [c]);
    return row!;
  }

  /** The cluster of that name in the namespace that is not Terminated (names are unique among those). */
  async findLiveClusterByName(namespace: string, name: string): Promise<ClusterRow | undefined> {
    return this.s.db
      .selectFrom("nodeclusters")
      .selectAll()
      .where("namespace", "=", namespace)
      .where("name", "=", name)
      .where("state", "!=", "Terminated")
      .executeTakeFirst();
  }

  async findCluster(uuid: string): Promise<ClusterRow | undefined> {
    return this.s.db.selectFrom("nodeclusters").selectAll().where("uuid", "=", uuid).executeTakeFirst();
  }

  /** Optimistic update with its change-feed entry (`Store.updateRow`). */
  async updateCluster(c: ClusterRow, patch: Partial<ClusterRow>): Promise<ClusterRow> {
    return this.s.updateRow("nodecluster", c, patch);
  }

  async listClusters(q: ClusterQuery): Promise<{ rows: ClusterRow[]; total: number }> {
    let base = this.s.db.selectFrom("nodeclusters").where("namespace", "=", q.namespace);
    if (q.uuid !== undefined) base = base.where("uuid", "=", q.uuid);
    if (q.uuidPrefix !== undefined)
      base = base.where("uuid", "like", `${q.uuidPrefix.replace(/[%_\\]/g, "")}%`);
    if (q.state !== undefined) base = base.where("state", "=", q.state);
    if (q.stateNot !== undefined) base = base.where("state", "!=", q.stateNot);
    if (q.name !== undefined) base = base.where("name", "=", q.name);
    if (q.region !== undefined) base = base.where("region", "=", q.region);
    if (q.nodeType !== undefined) base = base.where("node_type", "=", q.nodeType);
    if (q.nameContains !== undefined) base = base.where(containsText(["name"], q.nameContains));
    if (q.failing !== undefined)
      base = base.where((eb) => (q.failing ? clusterFailing(eb) : eb.not(clusterFailing(eb))));
    const count = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst();
    const rows = await base.selectAll().orderBy(orderOf(q.orderBy)).limit(q.limit).offset(q.offset).execute();
    return { rows, total: Number(count?.n ?? 0) };
  }

  /** Inserts a node with its change-feed entry. */
  async insertNode(n: NewNode): Promise<NodeRow> {
    const [row] = await this.s.insertRows("node", [n]);
    return row!;
  }

  async findNode(uuid: string): Promise<NodeRow | undefined> {
    return this.s.db.selectFrom("nodes").selectAll().where("uuid", "=", uuid).executeTakeFirst();
  }

  /** Nodes by uuid, in any state (batched lookups of views). */
  async nodesByUuid(uuids: readonly string[]): Promise<NodeRow[]> {
    return inChunks(uuids, (part) =>
      this.s.db.selectFrom("nodes").selectAll().where("uuid", "in", part).execute(),
    );
  }

  /** Optimistic update with its change-feed entry (`Store.updateRow`). */
  async updateNode(n: NodeRow, patch: NodePatch): Promise<NodeRow> {
    return this.s.updateRow("node", n, patch);
  }

  async listNodes(q: NodeQuery): Promise<{ rows: NodeRow[]; total: number }> {
    let base = this.s.db.selectFrom("nodes").where("namespace", "=", q.namespace);
    if (q.uuid !== undefined) base = base.where("uuid", "=", q.uuid);
    if (q.uuidPrefix !== undefined)
      base = base.where("uuid", "like", `${q.uuidPrefix.replace(/[%_\\]/g, "")}%`);
    if (q.state !== undefined) base = base.where("state", "=", q.state);
    if (q.stateNot !== undefined) base = base.where("state", "!=", q.stateNot);
    if (q.cluster !== undefined) base = base.where("cluster_uuid", "=", q.cluster);
    if (q.nodeType !== undefined) base = base.where("node_type", "=", q.nodeType);
    if (q.region !== undefined) base = base.where("region", "=", q.region);
    if (q.engineVersion !== undefined) base = base.where("engine_version", "=", q.engineVersion);
    if (q.nameContains !== undefined)
      base = base.where(containsText(["external_fqdn", "nickname"], q.nameContains));
    if (q.failing !== undefined)
      base = base.where((eb) => (q.failing ? nodeFailing(eb) : eb.not(nodeFailing(eb))));
    const count = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst();
    const rows = await base
      .selectAll()
      .orderBy(orderOf(q.orderBy, "external_fqdn"))
      .limit(q.limit)
      .offset(q.offset)
      .execute();
    return { rows, total: Number(count?.n ?? 0) };
  }

  async nodesOfCluster(clusterUuid: string): Promise<NodeRow[]> {
    return this.s.db
      .selectFrom("nodes")
      .selectAll()
      .where("cluster_uuid", "=", clusterUuid)
      .orderBy("id")
      .execute();
  }

  /**
   * Live nodes of several clusters, ordered by cluster and age: a cluster's answer shows only
   * those, and its terminated nodes (its whole history) are left unread.
   */
  async liveNodesOfClusters(clusterUuids: readonly string[]): Promise<NodeRow[]> {
    return inChunks(clusterUuids, (part) =>
      this.s.db
        .selectFrom("nodes")
        .selectAll()
        .where("cluster_uuid", "in", part)
        .where("state", "!=", "Terminated")
        .orderBy("cluster_uuid")
        .orderBy("id")
        .execute(),
    );
  }

  /** What placement and engine specs need of a namespace's live nodes (no secrets, no engine details). */
  async liveNodeSummaries(namespace: string) {
    return this.s.db
      .selectFrom("nodes")
      .select(["uuid", "nickname", "external_fqdn", "public_ip", "state", "tags", "memory", "cpu"])
      .where("state", "!=", "Terminated")
      .where("namespace", "=", namespace)
      .orderBy("id")
      .execute();
  }

  /** Nodes that are not Terminated, of every namespace (health watcher, scheduler, routes). */
  async liveNodes(filter: { provider?: string; namespace?: string } = {}): Promise<NodeRow[]> {
    // Pages of whole rows, the event loop given back between: one read of 5,000 nodes held it
    // for some 90 ms in the periodic passes (issue 34). Fewer nodes than a page: one statement.
    const out: NodeRow[] = [];
    for (let after = 0; ; ) {
      let q = this.s.db
        .selectFrom("nodes")
        .selectAll()
        .where("state", "!=", "Terminated")
        .where("id", ">", after);
      if (filter.provider !== undefined) q = q.where("provider", "=", filter.provider);
      if (filter.namespace !== undefined) q = q.where("namespace", "=", filter.namespace);
      const page = await q.orderBy("id").limit(LIVE_NODES_PAGE).execute();
      out.push(...page);
      if (page.length < LIVE_NODES_PAGE) return out;
      after = Number(page.at(-1)!.id);
      await nextTurn();
    }
  }

  async countNodes(namespace: string): Promise<number> {
    const row = await this.s.db
      .selectFrom("nodes")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("namespace", "=", namespace)
      .where("state", "!=", "Terminated")
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  /** The smallest slot not used by a live node of the provider. */
  async freeSlot(provider: string): Promise<number> {
    const used = new Set((await this.liveNodes({ provider })).map((n) => n.slot));
    let slot = 0;
    while (used.has(slot)) slot++;
    return slot;
  }
}
