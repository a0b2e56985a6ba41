// Queries of node clusters and nodes.
import type { NewRow, Patch } from "./derived.ts";
import type { NodeClusterTable, NodeTable } from "./schema.ts";
import { chunks } from "./services.ts";
import type { Store } from "./store.ts";

export type ClusterRow = Omit<NodeClusterTable, "id"> & { id: number };
export type NodeRow = Omit<NodeTable, "id"> & { id: number };
export type NewCluster = Omit<ClusterRow, "id" | "version">;
/** A new node: its `state` is derived by the store (derived.ts). */
export type NewNode = NewRow<"node">;
/** A change of a node: node actions write `phase`, health checks `observed`, never `state`. */
export type NodePatch = Patch<"node">;

export interface ClusterQuery {
  namespace: string;
  uuid?: string;
  uuidPrefix?: string;
  state?: string;
  name?: string;
  region?: string;
  nodeType?: string;
  limit: number;
  offset: number;
}

export interface NodeQuery {
  namespace: string;
  uuid?: string;
  uuidPrefix?: string;
  state?: string;
  cluster?: string;
  nodeType?: string;
  region?: string;
  engineVersion?: string;
  limit: number;
  offset: number;
}

export class NodeStore {
  constructor(private readonly s: Store) {}

  /** Inserts a cluster with its change-feed entry. */
  async insertCluster(c: NewCluster): Promise<ClusterRow> {
    const [row] = await this.s.insertRows("nodecluster", [c]);
    return row!;
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
    if (q.name !== undefined) base = base.where("name", "=", q.name);
    if (q.region !== undefined) base = base.where("region", "=", q.region);
    if (q.nodeType !== undefined) base = base.where("node_type", "=", q.nodeType);
    const count = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst();
    const rows = await base.selectAll().orderBy("id", "desc").limit(q.limit).offset(q.offset).execute();
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
    const out: NodeRow[] = [];
    for (const part of chunks(uuids)) {
      out.push(...(await this.s.db.selectFrom("nodes").selectAll().where("uuid", "in", part).execute()));
    }
    return out;
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
    if (q.cluster !== undefined) base = base.where("cluster_uuid", "=", q.cluster);
    if (q.nodeType !== undefined) base = base.where("node_type", "=", q.nodeType);
    if (q.region !== undefined) base = base.where("region", "=", q.region);
    if (q.engineVersion !== undefined) base = base.where("engine_version", "=", q.engineVersion);
    const count = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst();
    const rows = await base.selectAll().orderBy("id", "desc").limit(q.limit).offset(q.offset).execute();
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

  /** Nodes of several clusters, ordered by cluster and age. */
  async nodesOfClusters(clusterUuids: readonly string[]): Promise<NodeRow[]> {
    const out: NodeRow[] = [];
    for (const part of chunks(clusterUuids)) {
      out.push(
        ...(await this.s.db
          .selectFrom("nodes")
          .selectAll()
          .where("cluster_uuid", "in", part)
          .orderBy("cluster_uuid")
          .orderBy("id")
          .execute()),
      );
    }
    return out;
  }

  /** Nodes that are not Terminated, of every namespace (health watcher, scheduler, routes). */
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

  async liveNodes(filter: { provider?: string; namespace?: string } = {}): Promise<NodeRow[]> {
    let q = this.s.db.selectFrom("nodes").selectAll().where("state", "!=", "Terminated");
    if (filter.provider !== undefined) q = q.where("provider", "=", filter.provider);
    if (filter.namespace !== undefined) q = q.where("namespace", "=", filter.namespace);
    return q.orderBy("id").execute();
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
