// What the cluster and node pages share: their shapes on the wire and tags as text.
import type { NodeCluster, Node as NodeView } from "../../../../src/contract/nodes.ts";
import type { Resource } from "../../live.ts";

export type Cluster = NodeCluster & Resource;

export type Node = NodeView & Resource;

export const tagNames = (tags: { name: string }[]) => tags.map((t) => t.name).join(", ");
export const tagList = (text: string) =>
  text
    .split(",")
    .map((t) => t.trim())
    .filter(Boolean)
    .map((name) => ({ name }));
