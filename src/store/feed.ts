// The change feed's one writer. The store's write methods of every resource with events
// (services, containers, stacks, nodes, node clusters, actions) call it in the transaction of the
// write, so no caller can write such a row without its entry. Each entry is computed from the row
// as written: type, resource_uri (domain/uri.ts), state and the parents of CONTRACT §8
// (container → service, stack, node, node cluster; service → stack; node → node cluster;
// action → its object; stack and node cluster → []).
import { offeredAddress } from "../domain/links.ts";
import type { Clock } from "../domain/time.ts";
import { actionUri, clusterUri, containerUri, nodeUri, serviceUri, stackUri } from "../domain/uri.ts";
import { specOf } from "./codec.ts";
import { ContainerReads } from "./container-reads.ts";
import { NodeStore } from "./nodes.ts";
import type { ChangeTable } from "./schema.ts";
import { ServiceRows } from "./service-rows.ts";
import type {
  ActionRow,
  ContainerRow,
  FeedRows,
  FeedType,
  Kernel,
  NodeRow,
  ServiceRow,
  Written,
} from "./types.ts";

export type { FeedRows, FeedType, Written } from "./types.ts";

export type FeedAction = "create" | "update" | "delete";
export type NewChange = Omit<ChangeTable, "revision">;

/** Services' and nodes' parts remembered (a service's stack and a node's cluster never change). */
const PARENTS_CACHE_MAX = 100_000;

/** Remembers `value`; a map at its bound is emptied first (what it held is read again when needed). */
function remember<V>(map: Map<string, V>, key: string, value: V): void {
  if (map.size >= PARENTS_CACHE_MAX) map.clear();
  map.set(key, value);
}

/** A container's parents that come from its service: the service and its stack. */
function serviceParts(s: ServiceRow): string[] {
  return s.stack_uuid ? [serviceUri(s), stackUri(s.namespace, s.stack_uuid)] : [serviceUri(s)];
}

/** A container's parents that come from its node: the node and its cluster. */
function nodeParts(n: NodeRow): string[] {
  return n.cluster_uuid
    ? [nodeUri(n), clusterUri({ namespace: n.namespace, uuid: n.cluster_uuid })]
    : [nodeUri(n)];
}

/**
 * Columns no answer shows: the row's version, and the two owners of a container's or node's state
 * (an action's `phase`, the engine's `observed`), which show only through the `state` derived from
 * them (domain/states.ts). An engine's report during an action changes `observed` and not `state`.
 */
const UNSHOWN = new Set(["version", "phase", "observed"]);

/**
 * Whether a write changed the object as its events tell it: an action changes with its state (its
 * lease, step and attempts are the engine's bookkeeping); any other object with any value it shows.
 */
function changed<K extends FeedType>(type: K, before: FeedRows[K], row: FeedRows[K]): boolean {
  if (type === "action") return before.state !== row.state;
  const b = before as unknown as Record<string, unknown>;
  const r = row as unknown as Record<string, unknown>;
  return Object.keys(r).some((k) => !UNSHOWN.has(k) && b[k] !== r[k]);
}

/**
 * A write's event: created when inserted, deleted when it makes the object Terminated (once: a later
 * write to a terminated object, such as its destroy time, is an update), updated otherwise.
 */
function actionOf(w: Written<FeedType>): FeedAction {
  if (!w.before) return "create";
  return w.row.state === "Terminated" && w.before.state !== "Terminated" ? "delete" : "update";
}

/** One per root store, shared by its transactions (the parents cache outlives them). */
export class ChangeFeed {
  private readonly serviceParts = new Map<string, string[]>();
  private readonly nodeParts = new Map<string, string[]>();

  constructor(readonly clock: Clock) {}

  /**
   * Appends the entries of rows just written in `tx`, in one multi-row statement: inserts are
   * `create`, writes that changed nothing add no entry. Containers whose address as a link
   * target moved add `update` entries of their link clients (see `linkClients`).
   */
  async record<K extends FeedType>(tx: Kernel, type: K, written: readonly Written<K>[]): Promise<void> {
    const entries = written.filter((w) => !w.before || changed(type, w.before, w.row));
    const changes: NewChange[] = [];
    const datetime = this.clock.now();
    if (type === "container") {
      const rows = entries.map((w) => w.row as ContainerRow);
      const parents = await this.containerParents(tx, rows);
      for (const [i, w] of entries.entries()) {
        changes.push(this.entry(w.row, "container", actionOf(w), containerUri(w.row), parents[i]!, datetime));
      }
      changes.push(...(await this.linkClients(tx, written as readonly Written<"container">[], datetime)));
    } else {
      for (const w of entries) changes.push(this.entryOf(type, w, datetime));
    }
    await tx.appendChanges(changes);
  }

  /**
   * `update` entries of containers whose view changed without a write to their row (their
   * service's links changed): the load balancer and the reconciler follow them.
   */
  async touched(tx: Kernel, rows: readonly ContainerRow[]): Promise<void> {
    const parents = await this.containerParents(tx, rows);
    const datetime = this.clock.now();
    await tx.appendChanges(
      rows.map((c, i) => this.entry(c, "container", "update", containerUri(c), parents[i]!, datetime)),
    );
  }

  private entryOf(type: Exclude<FeedType, "container">, w: Written<FeedType>, datetime: number): NewChange {
    const action = actionOf(w);
    switch (type) {
      case "service": {
        const s = w.row as ServiceRow;
        const parents = s.stack_uuid ? [stackUri(s.namespace, s.stack_uuid)] : [];
        return this.entry(s, type, action, serviceUri(s), JSON.stringify(parents), datetime);
      }
      case "stack":
        return this.entry(w.row, type, action, stackUri(w.row.namespace, w.row.uuid), "[]", datetime);
      case "node": {
        const n = w.row as NodeRow;
        const parents = n.cluster_uuid ? [clusterUri({ namespace: n.namespace, uuid: n.cluster_uuid })] : [];
        return this.entry(n, type, action, nodeUri(n), JSON.stringify(parents), datetime);
      }
      case "nodecluster":
        return this.entry(w.row, type, action, clusterUri(w.row), "[]", datetime);
      case "action": {
        const a = w.row as ActionRow;
        return this.entry(a, type, action, actionUri(a.uuid), JSON.stringify([a.object]), datetime);
      }
    }
  }

  private entry(
    row: { namespace: string; state: string },
    type: FeedType,
    action: FeedAction,
    resource_uri: string,
    parents: string,
    datetime: number,
  ): NewChange {
    return { namespace: row.namespace, type, action, resource_uri, state: row.state, parents, datetime };
  }

  /**
   * Parents of each container (JSON), made from its service's part (service, stack) and its
   * node's part (node, cluster), each remembered per service and per node: a service's stack and a
   * node's cluster are set when they are created and never change, so a burst of new containers
   * reads neither table once both are known. Nothing is remembered per container (issue 34: at
   * 150,000 containers a per-container cache held ~300 bytes each for what two lookups rebuild).
   */
  private async containerParents(tx: Kernel, rows: readonly ContainerRow[]): Promise<string[]> {
    if (rows.length === 0) return [];
    const services = await this.partsOf(
      this.serviceParts,
      rows.map((c) => c.service_uuid),
      async (uuids) =>
        (await new ServiceRows(tx).servicesByUuid(uuids)).map((s) => [s.uuid, serviceParts(s)]),
    );
    const nodes = await this.partsOf(
      this.nodeParts,
      rows.map((c) => c.node_uuid),
      async (uuids) => (await new NodeStore(tx).nodesByUuid(uuids)).map((n) => [n.uuid, nodeParts(n)]),
    );
    return rows.map((c) => {
      const parents = services.get(c.service_uuid) ?? [
        serviceUri({ namespace: c.namespace, uuid: c.service_uuid }),
      ];
      const node = nodes.get(c.node_uuid);
      return JSON.stringify(node ? [...parents, ...node] : parents);
    });
  }

  /**
   * The parts of `uuids` (services' or nodes'), those not remembered read together and remembered
   * (one per service or node, PARENTS_CACHE_MAX at most).
   */
  private async partsOf(
    known: Map<string, string[]>,
    uuids: readonly string[],
    read: (uuids: string[]) => Promise<[string, string[]][]>,
  ): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    const unknown = new Set<string>();
    for (const uuid of uuids) {
      const parts = known.get(uuid);
      if (parts) out.set(uuid, parts);
      else unknown.add(uuid);
    }
    if (unknown.size) {
      for (const [uuid, parts] of await read([...unknown])) {
        out.set(uuid, parts);
        remember(known, uuid, parts);
      }
    }
    return out;
  }

  /**
   * Containers' changes as their link clients see them: when a container starts or stops offering
   * an address to its links, its address changes or it is redeployed (new ports and variables),
   * every live container linking to its service (and, with sequential_deployment, the service's
   * own other containers) changes too, since its `linked_to_container` changed with it.
   */
  private async linkClients(
    tx: Kernel,
    written: readonly Written<"container">[],
    datetime: number,
  ): Promise<NewChange[]> {
    const moved = written.filter(
      (w): w is Required<Written<"container">> =>
        w.before !== undefined &&
        (offeredAddress(w.before) !== offeredAddress(w.row) || w.before.generation !== w.row.generation),
    );
    if (moved.length === 0) return [];
    const targets = [...new Set(moved.map((m) => m.row.service_uuid))];
    const clients = new Set(
      (await new ServiceRows(tx).linksTo(targets))
        .filter((l) => moved.some((m) => m.row.service_uuid === l.to_uuid && m.row.namespace === l.namespace))
        .map((l) => l.from_uuid),
    );
    for (const s of await new ServiceRows(tx).servicesByUuid(targets)) {
      if (specOf(s).sequential_deployment) clients.add(s.uuid);
    }
    if (clients.size === 0) return [];
    const self = new Set(moved.map((m) => m.row.uuid));
    const rows = (await new ContainerReads(tx).containersOfServices([...clients])).filter(
      (c) => !self.has(c.uuid),
    );
    const parents = await this.containerParents(tx, rows);
    return rows.map((c, i) => this.entry(c, "container", "update", containerUri(c), parents[i]!, datetime));
  }
}
