// Writing node and node-cluster records: every change of a row goes with its change-feed entry
// (`node` / `nodecluster`, parents = the cluster), so no write can forget its event. Also the
// tag lists as stored on both. Clusters, attach, agents, the probe and the routes write through it.
import { invalidField } from "../domain/errors.ts";
import type { Clock } from "../domain/time.ts";
import type { ClusterRow, NewNode, NodeRow } from "../store/nodes.ts";
import type { Store } from "../store/store.ts";
import { clusterUri, nodeUri } from "./views.ts";

type ChangeAction = "create" | "update" | "delete";

/** The distinct, trimmed tag names of a request's `tags` (objects with a name, or strings). */
export function tagNames(tags: ({ name: string } | string)[] | undefined, field = "tags"): string[] {
  const names = (tags ?? []).map((t, i) => {
    const name = typeof t === "string" ? t : t?.name;
    if (typeof name !== "string" || name.trim() === "")
      throw invalidField(`${field}[${i}].name`, "must be a non-empty string");
    return name.trim();
  });
  return [...new Set(names)];
}

/** The name a node is known by before it has a nickname of its own. */
export const nodeFqdn = (uuid: string, namespace: string) =>
  `${uuid.slice(0, 8)}.${namespace}.node.berth.internal`;

/**
 * A new node row: no engine facts, no lifecycle times, no tags and the FQDN as nickname until
 * `fields` say otherwise (clusters' nodes, attached engines and agent nodes all start here).
 */
export function newNodeRow(
  fields: Pick<
    NewNode,
    "uuid" | "namespace" | "cluster_uuid" | "provider" | "region" | "node_type" | "state" | "created"
  > &
    Partial<NewNode>,
): NewNode {
  const fqdn = nodeFqdn(fields.uuid, fields.namespace);
  return {
    availability_zone: null,
    external_fqdn: fqdn,
    nickname: fqdn,
    engine_url: "",
    engine_tls: null,
    engine_id: "",
    engine_execdriver: "",
    engine_graphdriver: "",
    engine_version: "",
    cpu: 0,
    memory: 0,
    disk: 0,
    public_ip: "",
    tunnel: null,
    private_subnet: "",
    slot: 0,
    last_seen: null,
    unreachable_since: null,
    deployed_at: null,
    destroyed_at: null,
    tags: "[]",
    ...fields,
  };
}

export class NodeRecords {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  /** The change-feed entry of a cluster row just written in `tx`. */
  async emitCluster(tx: Store, c: ClusterRow, action: ChangeAction = "update"): Promise<void> {
    await tx.appendChange({
      namespace: c.namespace,
      type: "nodecluster",
      action,
      resource_uri: clusterUri(c),
      state: c.state,
      parents: "[]",
      datetime: this.clock.now(),
    });
  }

  /** The change-feed entry of a node row just written in `tx`. */
  async emitNode(tx: Store, n: NodeRow, action: ChangeAction = "update"): Promise<void> {
    await tx.appendChange({
      namespace: n.namespace,
      type: "node",
      action,
      resource_uri: nodeUri(n),
      state: n.state,
      parents: JSON.stringify(
        n.cluster_uuid ? [clusterUri({ namespace: n.namespace, uuid: n.cluster_uuid })] : [],
      ),
      datetime: this.clock.now(),
    });
  }

  /** Applies a patch to a node, re-reading on version conflicts, and emits the change. */
  async patchNode(
    uuid: string,
    patch: (n: NodeRow) => Partial<NodeRow> | undefined,
  ): Promise<NodeRow | undefined> {
    return this.store.mutate({
      read: (store) => store.nodes.findNode(uuid),
      change: patch,
      write: (tx, n, p) => tx.nodes.updateNode(n, p),
      after: (tx, n, r) =>
        this.emitNode(tx, r, r.state === "Terminated" && n.state !== "Terminated" ? "delete" : "update"),
    });
  }

  /** Applies a patch to a cluster, re-reading on version conflicts, and emits the change. */
  async patchCluster(
    uuid: string,
    patch: (c: ClusterRow) => Partial<ClusterRow> | undefined,
  ): Promise<ClusterRow | undefined> {
    return this.store.mutate({
      read: (store) => store.nodes.findCluster(uuid),
      change: patch,
      write: (tx, c, p) => tx.nodes.updateCluster(c, p),
      after: (tx, c, r) =>
        this.emitCluster(tx, r, r.state === "Terminated" && c.state !== "Terminated" ? "delete" : "update"),
    });
  }
}
