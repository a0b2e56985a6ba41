// Engine containers that carry Berth's labels for a container record Berth does not hold (issue
// 31). A record is written before its engine container, so in normal operation there are none:
// they come from a restore of a backup older than them (a scale-up or a new service after the
// backup), or from a database that lost rows. Berth never removes them: each is reported once, by
// a "Container Unknown" action on its node that names it, its service and what to do, and is
// then left running. Which were reported is kept as a control fact, shared by replicas.
import { randomUUID } from "node:crypto";
import type { ActionEngine } from "../actions/engine.ts";
import { LABELS } from "../domain/service.ts";
import type { ContainerSummary } from "../drivers/engine.ts";
import { nodeUri } from "../nodes/views.ts";
import { factListOf } from "../store/codec.ts";
import type { NodeRow } from "../store/nodes.ts";
import type { Store } from "../store/store.ts";

export const REPORTED_FACT = "unknown_engine_containers";

/** Who these actions are recorded as. */
export const ADOPTION_META = {
  method: "POST",
  path: "",
  user: "berth",
  userAgent: "berth-adoption",
  ip: "",
  isUserAction: false,
};

export type RecordAction = ActionEngine["recordSync"];

/**
 * Reports the engine containers of `node` that were not reported before (one action each), and
 * remembers them; answers how many were new. `why` completes "…which Berth does not hold".
 */
export async function reportUnknown(
  d: { store: Store; record: RecordAction },
  node: NodeRow,
  found: readonly ContainerSummary[],
  why: string,
): Promise<number> {
  if (found.length === 0) return 0;
  const reported = new Set(factListOf(await d.store.replicas.findFact(REPORTED_FACT)));
  const fresh = found.filter((c) => !reported.has(c.id));
  for (const c of fresh) {
    const service = c.labels[LABELS.service];
    await d.record({
      uuid: randomUUID(),
      namespace: node.namespace,
      object: nodeUri(node),
      name: "Container Unknown",
      meta: ADOPTION_META,
      state: "Failed",
      logLine: `Engine container ${c.id.slice(0, 12)} (${c.name}, ${c.state}) carries Berth's labels for container ${c.labels[LABELS.container]}${service ? ` of service ${service}` : ""}, which Berth does not hold (${why}). Berth leaves it as it is and never removes it: remove it on the node's engine once it is no longer needed.`,
    });
  }
  if (fresh.length > 0) {
    await d.store.transaction(async (tx) => {
      const now = new Set(factListOf(await tx.replicas.findFact(REPORTED_FACT)));
      for (const c of fresh) now.add(c.id);
      await tx.replicas.putFact(REPORTED_FACT, JSON.stringify([...now]));
    });
  }
  return fresh.length;
}
