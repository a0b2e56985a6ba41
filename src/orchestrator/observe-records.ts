// What engines report about container records, recorded: `observed` and the engine's facts, never
// an action's phase (the runtime's observations for the reconciler and the health watcher).
import { addTo } from "../domain/collections.ts";
import type { ContainerView } from "../drivers/engine.ts";
import type { ContainerRow } from "../store/services.ts";
import { BatchListings } from "./batch-listings.ts";
import { observedPatch } from "./container-patches.ts";
import { byGeneration } from "./engine-containers.ts";
import type { RuntimeDeps } from "./runtime-deps.ts";

/** What observeMany saw of a record: its engine container, and the one it held when it was read. */
interface Observed {
  uuid: string;
  generation: string;
  engineId: string | null;
  view: ContainerView | undefined;
}

/**
 * `observe` over many records: their engines are asked in parallel (at most `perNode` at a time
 * on one node), and what they report is written in one transaction. A record whose node cannot
 * be reached, or whose engine answers with an error, is left as it is. Answers the records as
 * they are now.
 */
export async function observeMany(
  d: RuntimeDeps,
  rows: ContainerRow[],
  opts: { perNode: number },
): Promise<Map<string, ContainerRow>> {
  const live = rows.filter((c) => c.state !== "Terminated");
  const nodes = await d.store.nodes.knownNodes(live.map((c) => c.node_uuid));
  const seen: Observed[] = [];
  const byNode = new Map<string, ContainerRow[]>();
  for (const c of live) {
    addTo(byNode, c.node_uuid, c);
  }
  // One listing per node for all its records. An engine container made after it is not in it:
  // its record, once it holds that container, is left alone (recordObserved).
  const listings = new BatchListings(live);
  await Promise.all(
    [...byNode].map(async ([nodeUuid, list]) => {
      const node = nodes.get(nodeUuid);
      if (!node) return;
      const engine = d.engines.forNode(node);
      for (let i = 0; i < list.length; i += opts.perNode) {
        await Promise.all(
          list.slice(i, i + opts.perNode).map(async (c) => {
            try {
              const { current } = byGeneration(c, await listings.of(c, engine));
              const view = current ? await engine.inspectContainer(current.id) : undefined;
              seen.push({ uuid: c.uuid, generation: c.generation, engineId: c.engine_id, view });
            } catch {
              // unreachable or failing: the health watcher and the reconciler look again later
            }
          }),
        );
      }
    }),
  );
  const out = new Map(rows.map((c) => [c.uuid, c]));
  for (const [uuid, r] of await recordObserved(d, seen)) out.set(uuid, r);
  return out;
}

/** What engines reported about many records, written in one transaction (see ensureRunningMany). */
function recordObserved(d: RuntimeDeps, items: readonly Observed[]): Promise<Map<string, ContainerRow>> {
  const now = d.clock.now();
  const seen = new Map(items.map((i) => [i.uuid, i]));
  // A record removed, or moved to another generation (a redeploy), since it was read is left
  // alone: the engine spoke of a container it no longer has. So is a record found without its
  // container that holds another one now than when it was read: that one was made (and
  // recorded) after the listing, which could not show it. Phases are the action's to end.
  return d.store.services.patchContainers([...seen.keys()], (r) => {
    const item = seen.get(r.uuid);
    if (!item || r.destroyed_at !== null || r.generation !== item.generation) return undefined;
    if (!item.view && r.engine_id !== item.engineId) return undefined;
    return observedPatch(r, item.view, now);
  });
}
