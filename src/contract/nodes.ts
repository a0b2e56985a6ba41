// TypeBox schemas of node-cluster request parts that carry rules of their own (spec "Node
// cluster"): the provider options and the bounds of a cluster. Rules that need the catalogue
// (regions, node types, which providers take options or a disk) stay in nodes/clusters.ts.
import { type Static, Type } from "typebox";

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
