// Scale-down choice: which containers of a service to remove first.
import { isLive, isPlaceable } from "./filters.ts";
import type { ContainerSnapshot, RemovalRequest } from "./types.ts";

interface Candidate {
  container: ContainerSnapshot;
  /** Containers on a node that is not Deployed (or no longer known) are the least useful. */
  healthy: boolean;
}

/**
 * Container uuids to remove when scaling down by `count`. Preference: containers on nodes that
 * are not Deployed, then the node with the most live containers of the service (re-evaluated
 * after each pick so removals even out the spread), then the highest number, so the survivors
 * keep the low names `web-1, web-2…`.
 */
export function planRemoval(req: RemovalRequest): string[] {
  if (req.count <= 0) return [];
  const deployed = new Set(req.nodes.filter(isPlaceable).map((node) => node.uuid));
  const candidates: Candidate[] = req.containers
    .filter((container) => container.service === req.service && isLive(container))
    .map((container) => ({ container, healthy: deployed.has(container.node) }));
  const perNode = new Map<string, number>();
  for (const { container } of candidates) perNode.set(container.node, (perNode.get(container.node) ?? 0) + 1);

  const removeFirst = (a: Candidate, b: Candidate): number =>
    Number(a.healthy) - Number(b.healthy) ||
    (perNode.get(b.container.node) ?? 0) - (perNode.get(a.container.node) ?? 0) ||
    b.container.number - a.container.number ||
    // Same number twice should not happen; uuid order keeps the plan deterministic if it does.
    (a.container.uuid < b.container.uuid ? -1 : a.container.uuid > b.container.uuid ? 1 : 0);

  const removed: string[] = [];
  const remaining = [...candidates];
  while (removed.length < req.count && remaining.length > 0) {
    let bestIndex = 0;
    for (let i = 1; i < remaining.length; i++) {
      if (removeFirst(remaining[i]!, remaining[bestIndex]!) < 0) bestIndex = i;
    }
    const [best] = remaining.splice(bestIndex, 1);
    if (!best) break;
    removed.push(best.container.uuid);
    perNode.set(best.container.node, (perNode.get(best.container.node) ?? 1) - 1);
  }
  return removed;
}
