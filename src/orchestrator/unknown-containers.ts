// Engine containers that carry Berth's labels for a container record Berth does not hold (issue
// 31). A record is written before its engine container, so in normal operation there are none:
// they come from a restore of a backup older than them (a scale-up or a new service after the
// backup), or from a database that lost rows. Berth never removes them: each is reported once, by
// a "Container Unknown" action on its node that names it, its service and what to do, and is
// then left running. Which were reported is kept as a control fact, shared by replicas. An
// operator lists them (GET …/node/<uuid>/unknowncontainer/) and removes one through Berth
// (DELETE …/unknowncontainer/<engine id>/, an action in the audit log; `berth node unknown ls|rm`).
import { randomUUID } from "node:crypto";
import type { ActionEngine } from "../actions/engine.ts";
import { notFound } from "../domain/errors.ts";
import { LABELS } from "../domain/service.ts";
import type { ContainerSummary, Engine } from "../drivers/engine.ts";
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
      logLine: `Engine container ${c.id.slice(0, 12)} (${c.name}, ${c.state}) carries Berth's labels for container ${c.labels[LABELS.container]}${service ? ` of service ${service}` : ""}, which Berth does not hold (${why}). Berth leaves it as it is and never removes it by itself: remove it once it is no longer needed with DELETE ${nodeUri(node)}unknowncontainer/${c.id.slice(0, 12)}/ (berth node unknown rm).`,
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

export interface UnknownContainer {
  id: string;
  name: string;
  state: string;
  /** The container record its labels name (Berth holds none). */
  container: string;
  service: string | null;
  created: number;
}

/**
 * The engine containers on `node` that carry Berth's labels for this node and its namespace and a
 * container record Berth does not hold (one engine listing, one store read).
 */
export async function unknownContainers(
  store: Store,
  engine: Engine,
  node: NodeRow,
): Promise<UnknownContainer[]> {
  const ours = (await engine.listContainers({ labels: { [LABELS.node]: node.uuid }, all: true })).filter(
    (c) => c.labels[LABELS.container] && c.labels[LABELS.namespace] === node.namespace,
  );
  const held = new Set(
    (await store.services.containerHeads(ours.map((c) => c.labels[LABELS.container]!))).map((r) => r.uuid),
  );
  return ours
    .filter((c) => !held.has(c.labels[LABELS.container]!))
    .map((c) => ({
      id: c.id,
      name: c.name,
      state: c.state,
      container: c.labels[LABELS.container]!,
      service: c.labels[LABELS.service] ?? null,
      created: c.createdAt,
    }));
}

/**
 * Removes one unknown engine container of `node` at an operator's request (the route's action
 * records it): found again on the engine by id (or a unique id prefix of 12+ characters) and
 * checked unknown at this moment; then force-removed with its anonymous volumes, and forgotten
 * by the reported list.
 */
export async function removeUnknown(
  store: Store,
  engine: Engine,
  node: NodeRow,
  id: string,
): Promise<UnknownContainer> {
  const found = (await unknownContainers(store, engine, node)).filter(
    (c) => c.id === id || (id.length >= 12 && c.id.startsWith(id)),
  );
  if (found.length !== 1) {
    // Known to Berth (or not there at all): never removed this way.
    throw notFound("unknown engine container");
  }
  const c = found[0]!;
  await engine.removeContainer(c.id, { force: true, removeVolumes: true });
  await store.transaction(async (tx) => {
    const left = factListOf(await tx.replicas.findFact(REPORTED_FACT)).filter((x) => x !== c.id);
    await tx.replicas.putFact(REPORTED_FACT, JSON.stringify(left));
  });
  return c;
}
