// Scale-down choice: which containers of a service to remove first.
import { isLive, isPlaceable } from "./filters.ts";
import { Heap } from "./heap.ts";
import type { ContainerSnapshot, RemovalRequest } from "./types.ts";

interface Candidate {
  container: ContainerSnapshot;
  /** Containers on a node that is not Deployed (or no longer known) are the least useful. */
  healthy: boolean;
}

/** A candidate as it was pushed: `onNode` is its node's count at that time (see planRemoval). */
interface Entry {
  candidate: Candidate;
  onNode: number;
}

/**
 * Container uuids to remove when scaling down by `count`. Preference: containers on nodes that
 * are not Deployed, then the node with the most live containers of the service (re-evaluated
 * after each pick so removals even out the spread), then the highest number, so the survivors
 * keep the low names `web-1, web-2…`.
 *
 * Each pick is a heap pop: a node's count only falls as its containers go, so an entry pushed
 * with an older (higher) count is put back with the current one when it comes up, and a plan
 * costs O((containers + removals) × log containers), never removals × containers.
 */
export function planRemoval(req: RemovalRequest): string[] {
  if (req.count <= 0) return [];
  const deployed = new Set(req.nodes.filter(isPlaceable).map((node) => node.uuid));
  const candidates: Candidate[] = req.containers
    .filter((container) => container.service === req.service && isLive(container))
    .map((container) => ({ container, healthy: deployed.has(container.node) }));
  const perNode = new Map<string, number>();
  for (const { container } of candidates) perNode.set(container.node, (perNode.get(container.node) ?? 0) + 1);

  const removeFirst = (x: Entry, y: Entry): number => {
    const a = x.candidate;
    const b = y.candidate;
    return (
      Number(a.healthy) - Number(b.healthy) ||
      y.onNode - x.onNode ||
      b.container.number - a.container.number ||
      // Same number twice should not happen; uuid order keeps the plan deterministic if it does.
      (a.container.uuid < b.container.uuid ? -1 : a.container.uuid > b.container.uuid ? 1 : 0)
    );
  };
  const heap = new Heap<Entry>(removeFirst);
  for (const candidate of candidates)
    heap.push({ candidate, onNode: perNode.get(candidate.container.node)! });

  const removed: string[] = [];
  while (removed.length < req.count) {
    const best = heap.pop();
    if (!best) break;
    const node = best.candidate.container.node;
    const now = perNode.get(node)!;
    if (best.onNode !== now) {
      heap.push({ candidate: best.candidate, onNode: now });
      continue;
    }
    removed.push(best.candidate.container.uuid);
    perNode.set(node, now - 1);
  }
  return removed;
}
