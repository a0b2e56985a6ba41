// What commits with the update of a row besides its change-feed entry (Store.updateRow): a
// service's link rows follow its definition (rewritten only when its links changed); a node that turns Terminated loses its placement
// guard (no plan places there again, and a plan that read its generation is stale at commit).
import { specLinks } from "./codec.ts";
import { PlacementGuardStore } from "./placement-guards.ts";
import { ServiceRows } from "./service-rows.ts";
import type { FeedRows, FeedType, Kernel, Patch, ServiceRow } from "./types.ts";

export async function withUpdatedRow<K extends FeedType>(
  tx: Kernel,
  type: K,
  before: FeedRows[K],
  row: FeedRows[K],
  patch: Patch<K>,
): Promise<void> {
  if (type === "service" && "spec" in patch && linksMoved(before as ServiceRow, row as ServiceRow))
    await new ServiceRows(tx).indexLinks(row.uuid, (row as unknown as ServiceRow).spec);
  if (type === "node" && "state" in row && row.state === "Terminated" && before.state !== row.state)
    await new PlacementGuardStore(tx).forget(row.uuid);
}

/** Whether a new definition links to other services than the old (most updates change no link). */
function linksMoved(before: ServiceRow, row: ServiceRow): boolean {
  if (before.spec === row.spec) return false;
  return JSON.stringify(specLinks(row.uuid, before.spec)) !== JSON.stringify(specLinks(row.uuid, row.spec));
}
