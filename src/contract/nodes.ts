// TypeBox schemas of node clusters and nodes (spec "Node cluster", "Node"): the request parts that
// carry rules of their own (the provider options and the bounds of a cluster; rules that need the
// catalogue stay in nodes/clusters.ts), and the answers.
import { type Static, Type } from "typebox";
import { Nullable, TagView, Time, Uri, View } from "./common.ts";

export const CLUSTER_LIMITS = {
  maxNodes: 100,
  diskMinGb: 1,
  diskMaxGb: 16384,
} as const;

export const ProviderOptions = Type.Object(
  {
    vpc: Type.Optional(
      Type.Object(
        {
          id: Type.String({
            minLength: 1,
            description: "identifier of the target network in which nodes are deployed",
          }),
          subnets: Type.Optional(
            Type.Array(Type.String(), {
              description: "subnets in that network; with more than one, nodes are balanced among them",
            }),
          ),
          security_groups: Type.Optional(
            Type.Array(Type.String(), { description: "security group applied to every node" }),
          ),
        },
        { additionalProperties: false, description: "network options" },
      ),
    ),
    iam: Type.Optional(
      Type.Object(
        {
          instance_profile_name: Type.String({
            minLength: 1,
            description: "instance profile (container of a role) attached to every node",
          }),
        },
        { additionalProperties: false },
      ),
    ),
  },
  {
    additionalProperties: false,
    description: "provider-specific options, for providers whose rules allow them",
  },
);
export type ProviderOptions = Static<typeof ProviderOptions>;

/** Tags given in a body: `{name}` objects or plain names. */
export const TagsBody = Type.Array(Type.Union([Type.Object({ name: Type.String() }), Type.String()]));

export const NodeClusterCreateBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 100 }),
  node_type: Type.String(),
  region: Type.String(),
  disk: Type.Optional(Type.Integer({ minimum: CLUSTER_LIMITS.diskMinGb, maximum: CLUSTER_LIMITS.diskMaxGb })),
  nickname: Type.Optional(Type.String({ maxLength: 100 })),
  target_num_nodes: Type.Optional(Type.Integer({ minimum: 0, maximum: CLUSTER_LIMITS.maxNodes })),
  tags: Type.Optional(TagsBody),
  provider_options: Type.Optional(Type.Union([ProviderOptions, Type.Null()])),
});
export type NodeClusterCreateBody = Static<typeof NodeClusterCreateBody>;

// ---- answers ----------------------------------------------------------------------------------

export const NodeClusterView = View(
  {
    uuid: Type.String(),
    resource_uri: Uri,
    name: Type.String(),
    nickname: Type.String(),
    state: Type.String(),
    node_type: Uri,
    region: Uri,
    disk: Nullable(Type.Number({ description: "GB" })),
    nodes: Type.Array(Uri),
    target_num_nodes: Type.Integer(),
    current_num_nodes: Type.Integer(),
    deployed_datetime: Time,
    destroyed_datetime: Time,
    tags: Type.Array(TagView),
    provider_options: Nullable(Type.Object({}, { additionalProperties: true })),
  },
  "a node cluster (spec Node cluster)",
);
export type NodeCluster = Static<typeof NodeClusterView>;

const nodeFields = {
  uuid: Type.String(),
  resource_uri: Uri,
  state: Type.String(),
  availability_zone: Nullable(Type.String()),
  node_cluster: Nullable(Uri),
  node_type: Type.String(),
  region: Type.String(),
  external_fqdn: Type.String(),
  nickname: Type.String(),
  engine_execdriver: Type.String(),
  engine_graphdriver: Type.String(),
  engine_version: Type.String(),
  cpu: Type.Number(),
  disk: Type.Number({ description: "GB" }),
  memory: Type.Number({ description: "MB" }),
  current_num_containers: Type.Integer(),
  last_seen: Time,
  public_ip: Type.String(),
  tunnel: Nullable(Type.String()),
  deployed_datetime: Time,
  destroyed_datetime: Time,
  tags: Type.Array(TagView),
};

/** A node as the agent's registration answers it (no compat aliases). */
export const RegisteredNodeView = View(
  {
    ...nodeFields,
    namespace: Type.String(),
    node_key: Type.String({ description: "the node's key for its tunnel; shown only in this answer" }),
  },
  "the registered node and its key",
);

export const NodeView = View(
  {
    ...nodeFields,
    docker_version: Type.String({ description: "historical name of engine_version" }),
    docker_execdriver: Type.String({ description: "historical name of engine_execdriver" }),
    docker_graphdriver: Type.String({ description: "historical name of engine_graphdriver" }),
  },
  "a node (spec Node)",
);
export type Node = Static<typeof NodeView>;
