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
import type { PlacementState } from "../scheduler/index.ts";
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
}

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
      // Another replica's commit: which rows it wrote is not told, so nothing kept is trusted.
      store.onRemoteChange((type) => {
        if (type !== "" && type !== "container" && type !== "node" && type !== "service") return;
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
  take(namespace: string, generation: number): Snapshot | undefined {
    const k = this.kept.get(namespace);
    if (!k) return undefined;
    this.kept.delete(namespace);
    return k.generation === generation ? k.snapshot : undefined;
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
