// Wire representations of node clusters and nodes (spec "Node cluster", "Node").
import { restTime } from "../domain/time.ts";
import { clusterUri, nodeUri } from "../domain/uri.ts";
import { providerOptionsOf, tagsOf } from "../store/codec.ts";
import type { ClusterRow, NodeRow } from "../store/nodes.ts";

export { clusterUri, nodeUri };

const tagViews = (row: { tags: string }) => tagsOf(row).map((name) => ({ name }));

export function clusterView(c: ClusterRow, nodes: NodeRow[]) {
  const live = nodes.filter((n) => n.state !== "Terminated");
  return {
    uuid: c.uuid,
    resource_uri: clusterUri(c),
    name: c.name,
    nickname: c.nickname,
    state: c.state,
    node_type: c.node_type,
    region: c.region,
    disk: c.disk,
    nodes: live.map(nodeUri),
    target_num_nodes: c.target_num_nodes,
    current_num_nodes: live.filter(
      (n) => n.state === "Deployed" || n.state === "Unreachable" || n.state === "Upgrading",
    ).length,
    deployed_datetime: restTime(c.deployed_at),
    destroyed_datetime: restTime(c.destroyed_at),
    tags: tagViews(c),
    provider_options: providerOptionsOf(c),
  };
}

export function nodeView(n: NodeRow, opts: { currentNumContainers: number; cluster?: ClusterRow }) {
  return {
    uuid: n.uuid,
    resource_uri: nodeUri(n),
    state: n.state,
    availability_zone: n.availability_zone,
    node_cluster: opts.cluster
      ? clusterUri(opts.cluster)
      : n.cluster_uuid
        ? clusterUri({ namespace: n.namespace, uuid: n.cluster_uuid })
        : null,
    node_type: n.node_type,
    region: n.region,
    external_fqdn: n.external_fqdn,
    nickname: n.nickname,
    engine_execdriver: n.engine_execdriver,
    engine_graphdriver: n.engine_graphdriver,
    engine_version: n.engine_version,
    cpu: n.cpu,
    disk: n.disk,
    memory: n.memory,
    current_num_containers: opts.currentNumContainers,
    last_seen: restTime(n.last_seen),
    public_ip: n.public_ip,
    tunnel: n.tunnel,
    deployed_datetime: restTime(n.deployed_at),
    destroyed_datetime: restTime(n.destroyed_at),
    tags: tagViews(n),
  };
}
