// Answer schemas of the infrastructure catalogue (read only): providers, regions, availability
// zones, node types; shared by the catalogue routes, OpenAPI and the dashboard.
import { type Static, Type } from "typebox";

export const Provider = Type.Object({
  resource_uri: Type.String(),
  name: Type.String(),
  label: Type.String(),
  regions: Type.Array(Type.String()),
  available: Type.Boolean(),
  node_cluster_rules: Type.Object(
    {
      provider_options: Type.Boolean({ description: "whether provider_options (vpc, iam) may be given" }),
      disk: Type.Union([Type.Literal("any"), Type.Literal("none"), Type.Literal("fixed")], {
        description: "any: any size in GB; none: disk cannot be set; fixed: only disk_sizes",
      }),
      disk_sizes: Type.Array(Type.Integer()),
      default_disk: Type.Union([Type.Integer(), Type.Null()], {
        description: "the disk (GB) a cluster gets when its create body names none; null where disk is none",
      }),
    },
    { description: "Berth extension: what node clusters of this provider accept" },
  ),
});
export const Region = Type.Object({
  resource_uri: Type.String(),
  name: Type.String(),
  label: Type.String(),
  node_types: Type.Array(Type.String()),
  availability_zones: Type.Array(Type.String()),
  provider: Type.String(),
  available: Type.Boolean(),
});
export const Az = Type.Object({
  resource_uri: Type.String(),
  name: Type.String(),
  region: Type.String(),
  available: Type.Boolean(),
});
export const NodeType = Type.Object({
  resource_uri: Type.String(),
  name: Type.String(),
  label: Type.String(),
  regions: Type.Array(Type.String()),
  availability_zones: Type.Array(Type.String()),
  provider: Type.String(),
  available: Type.Boolean(),
});

export type ProviderView = Static<typeof Provider>;
export type RegionView = Static<typeof Region>;
export type AzView = Static<typeof Az>;
export type NodeTypeView = Static<typeof NodeType>;
