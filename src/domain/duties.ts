// Work that must happen once across replicas sharing a database (issue 16): each node's engine
// watcher and health checks belong to one replica, and once-only jobs to one leader. Components
// ask these questions; `ops/replicas.ts` answers them from leases in the database.
/** `alerts`: alert rules' evaluation and deliveries, and the stats series' roll-up and pruning. */
export type Job = "reconcile" | "registry" | "alerts";

export interface Duties {
  /** Whether this replica watches and health-checks the node now. */
  ownsNode(nodeUuid: string): boolean;
  /** Whether this replica runs the once-only job now. */
  leads(job: Job): boolean;
  /** This replica's id, when it shares the database with others (placement's tie-break). */
  readonly replicaId?: string;
}

/** A single process (SQLite, or tests): every duty is its own. */
export const SOLO_DUTIES: Duties = { ownsNode: () => true, leads: () => true };
