// Node filters. Every filter that rejects a node says why in words a user can act on, so that
// "nothing fits" is never a bare refusal (SwarmKit's explainable filters).
import type { ContainerSnapshot, NodeSnapshot } from "./types.ts";

const PLACEABLE_STATE = "Deployed";

/** Terminating containers are on their way out; counting them would keep nodes looking full. */
export function isLive(container: ContainerSnapshot): boolean {
  return container.state !== "Terminated" && container.state !== "Terminating";
}

export function isPlaceable(node: NodeSnapshot): boolean {
  return node.state === PLACEABLE_STATE;
}

export interface NodeFilterResult {
  /** Nodes that can take a container, in input order (input order is the tie-break). */
  eligible: NodeSnapshot[];
  /** One line per rejected node, in input order. */
  rejections: string[];
}

/** Keeps the nodes that are Deployed and carry all of `serviceTags`; explains every other one. */
export function filterNodes(nodes: NodeSnapshot[], serviceTags: string[]): NodeFilterResult {
  const wanted = [...new Set(serviceTags)];
  const eligible: NodeSnapshot[] = [];
  const rejections: string[] = [];
  for (const node of nodes) {
    const why: string[] = [];
    if (!isPlaceable(node)) why.push(`state is ${node.state}, only ${PLACEABLE_STATE} nodes take containers`);
    const has = new Set(node.tags);
    const missing = wanted.filter((tag) => !has.has(tag));
    if (missing.length > 0) why.push(`lacks ${missing.length === 1 ? "tag" : "tags"} ${missing.join(", ")}`);
    if (why.length === 0) eligible.push(node);
    else rejections.push(`node ${node.name} (${node.uuid}): ${why.join("; ")}`);
  }
  return { eligible, rejections };
}

export const NO_NODES_REASON = "no nodes in this namespace: deploy a node cluster or attach an engine first";

/** The refusal when no node passed the filters: a summary of the rule, then each node's reason. */
export function explainNoFit(nodes: NodeSnapshot[], serviceTags: string[], rejections: string[]): string[] {
  if (nodes.length === 0) return [NO_NODES_REASON];
  const wanted = [...new Set(serviceTags)];
  const rule =
    wanted.length === 0
      ? `a ${PLACEABLE_STATE} node`
      : `a ${PLACEABLE_STATE} node with ${wanted.length === 1 ? "tag" : "tags"} ${wanted.join(", ")}`;
  const checked =
    nodes.length === 1 ? "the only node does not qualify" : `none of the ${nodes.length} nodes qualifies`;
  return [`no node can take a container: it needs ${rule}, and ${checked}`, ...rejections];
}
