// What placement knows of a namespace between two plans. A plan reads the namespace's live
// nodes, services and containers (PlanApplier.snapshot); when the services of a large
// burst of starts are planned in many batches, re-reading all of that for every batch made the
// cost of a burst grow with batches × containers (10,000 containers in 56 batches read 285,000
// container rows). A batch whose plan committed keeps its snapshot, with its own placements
// counted, for the next batch of the namespace, as long as nothing placement reads has changed.
//
// "Changed" is counted, not guessed: every write of a node, service or container row goes through
// the store's write methods, which tell this process's committed writes (Store.onCommittedWrites),
// and other replicas' commits are announced (Store.onRemoteChange). A namespace's generation
// moves with each committed write that changes what a snapshot holds; a kept snapshot is used
// only by a batch that finds the generation where the snapshot's own commit left it. Writes that
// do not change placement (a container going from Starting to Running, an engine's report, a
// service's state during its start) leave it alone, or a burst would never reuse anything.
//
// Other replicas' commits are announced by type only, so they do not drop what is kept (with
// several replicas placing, every batch would read the namespace whole): the plan applier checks
// at commit what they could have changed under a kept snapshot (see REMOTE_TRUST_MS) and counts
// again only the nodes where they placed.
import { performance } from "node:perf_hooks";
import type { Demand, PlacementState } from "../scheduler/index.ts";
import type { NodeRow } from "../store/nodes.ts";
import type { ContainerRow, ServiceRow } from "../store/services.ts";
import type { FeedType, Store, Written } from "../store/store.ts";

export interface Snapshot {
  state: PlacementState;
  /** Container numbers taken, per service. */
  numbers: Map<string, number[]>;
  /**
   * The placement generation of each node as read (absent: 0), moved by the snapshot's own
   * commits: what the plan applier expects to find at commit (plan-applier.ts).
   */
  generations: Map<string, number>;
  /** What a container of each service claims (from the service's definition as read). */
  demands: Map<string, Demand>;
  /** When the namespace was read whole (performance.now()). */
  readAt: number;
}

/** A kept snapshot, and whether other replicas committed anything since it was read whole. */
export interface Taken {
  snapshot: Snapshot;
  remote: boolean;
}

/**
 * How long a kept snapshot is used after another replica committed something of its kinds. Their
 * placements are caught at commit (the node guards) and counted again node by node
 * (plan-applier.ts); what they free only makes a plan refuse, and a plan that refuses anything on a
 * kept snapshot is made again on a fresh one. What no guard sees (another replica changed a
 * node's size or tags, or a service's definition) counts from the next whole read, at most this
 * long after.
 */
export const REMOTE_TRUST_MS = 2000;

/** A container's part in placement: its node, and whether it is live and counted as running. */
function containerKey(c: ContainerRow): string {
  // scheduler: live = neither Terminating nor Terminated; running = Running or Starting. A
  // Terminating container still holds its number (placementSnapshot reads all but Terminated).
  const stage =
    c.state === "Terminated" ? "gone" : c.state === "Running" || c.state === "Starting" ? "running" : c.state;
  return `${c.node_uuid}\u0000${stage}`;
}

const NODE_COLUMNS = ["state", "nickname", "external_fqdn", "tags", "memory", "cpu"] as const;

function nodeChanged(before: NodeRow, row: NodeRow): boolean {
  return NODE_COLUMNS.some((k) => before[k] !== row[k]);
}

function serviceChanged(before: ServiceRow, row: ServiceRow): boolean {
  return before.spec !== row.spec || (before.state === "Terminated") !== (row.state === "Terminated");
}

/** Whether a committed write changes what a snapshot of the row's namespace holds. */
function changesPlacement(type: FeedType, w: Written<FeedType>): boolean {
  // A new service has no container yet: what a snapshot holds of services is the demand of those
  // that have (a plan takes the demand of the services it places from their own rows).
  if (!w.before) return type === "container" || type === "node";
  switch (type) {
    case "container":
      return containerKey(w.before as ContainerRow) !== containerKey(w.row as ContainerRow);
    case "node":
      return nodeChanged(w.before as NodeRow, w.row as NodeRow);
    case "service":
      return serviceChanged(w.before as ServiceRow, w.row as ServiceRow);
    default:
      return false;
  }
}

/** Namespaces whose snapshot is kept at once (the most recently placed). */
const KEPT_MAX = 16;

export class PlacementSnapshots {
  /** Moves with every change to any namespace that this process cannot see the rows of. */
  private epoch = 0;
  private readonly generations = new Map<string, number>();
  private readonly kept = new Map<string, { generation: number; snapshot: Snapshot }>();
  private readonly unsubscribe: (() => void)[];
  /** When another replica's commit of a container, node or service was last announced (-1: never). */
  private remoteAt = -1;

  constructor(store: Store) {
    this.unsubscribe = [
      store.onCommittedWrites((type, written) => {
        const moved = new Set<string>();
        for (const w of written) {
          if (changesPlacement(type, w as Written<FeedType>)) moved.add(w.row.namespace);
        }
        for (const ns of moved) {
          this.generations.set(ns, (this.generations.get(ns) ?? 0) + 1);
          this.kept.delete(ns);
        }
      }),
      // Another replica's commit: which rows it wrote is not told. Kept snapshots stay usable for
      // REMOTE_TRUST_MS (see there); a reconnect of the listener ("": anything may have been
      // missed) drops them.
      store.onRemoteChange((type) => {
        if (type === "container" || type === "node" || type === "service") {
          this.remoteAt = performance.now();
          return;
        }
        if (type !== "") return;
        this.epoch += 1;
        this.kept.clear();
      }),
    ];
  }

  /** Where the namespace stands: read before a snapshot is, compared when it is kept and used. */
  generation(namespace: string): number {
    return this.epoch + (this.generations.get(namespace) ?? 0);
  }

  /**
   * The snapshot a previous batch kept, if nothing placement reads changed since: taken out, so a
   * batch that fails after planning on it (and so changed it) leaves nothing behind.
   */
  take(namespace: string, generation: number): Taken | undefined {
    const k = this.kept.get(namespace);
    if (!k) return undefined;
    this.kept.delete(namespace);
    if (k.generation !== generation) return undefined;
    const remote = this.remoteAt >= k.snapshot.readAt;
    if (remote && performance.now() - k.snapshot.readAt > REMOTE_TRUST_MS) return undefined;
    return { snapshot: k.snapshot, remote };
  }

  /** Whether any other replica's commit was ever announced here (one replica: never). */
  get replicated(): boolean {
    return this.remoteAt >= 0;
  }

  /**
   * Keeps a batch's snapshot (its placements counted) once its transaction has committed.
   * `generation`: read before the snapshot was; `ownWrites`: the placement-changing writes the
   * batch's transaction itself committed (each told once). Anything else committed since the
   * snapshot was read moved the generation further, and then nothing is kept.
   */
  keep(namespace: string, snapshot: Snapshot, generation: number, ownWrites: number): void {
    const now = this.generation(namespace);
    if (now !== generation + ownWrites) return;
    this.kept.delete(namespace);
    this.kept.set(namespace, { generation: now, snapshot });
    if (this.kept.size > KEPT_MAX) this.kept.delete(this.kept.keys().next().value as string);
  }

  close(): void {
    for (const u of this.unsubscribe) u();
  }
}
