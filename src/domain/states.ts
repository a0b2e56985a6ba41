// State tables of the spec: which operations each state allows. The API refuses anything else
// with 409 naming the state and where the operation is allowed (CONTRACT §6).
import { stateConflict } from "./errors.ts";

export type ClusterState =
  | "Init"
  | "Deploying"
  | "Deployed"
  | "Partly deployed"
  | "Scaling"
  | "Terminating"
  | "Terminated"
  | "Empty cluster";
export const CLUSTER_STATES: ClusterState[] = [
  "Init",
  "Deploying",
  "Deployed",
  "Partly deployed",
  "Scaling",
  "Terminating",
  "Terminated",
  "Empty cluster",
];

export type NodeState = "Deploying" | "Deployed" | "Unreachable" | "Upgrading" | "Terminating" | "Terminated";
export const NODE_STATES: NodeState[] = [
  "Deploying",
  "Deployed",
  "Unreachable",
  "Upgrading",
  "Terminating",
  "Terminated",
];

type Table<S extends string> = Record<string, S[]>;

/** Node cluster: operation → states that allow it. `scale` is a PATCH of target_num_nodes. */
export const CLUSTER_OPERATIONS: Table<ClusterState> = {
  deploy: ["Init"],
  terminate: ["Init", "Deployed", "Partly deployed", "Empty cluster"],
  scale: ["Init", "Deployed", "Partly deployed", "Empty cluster"],
};

export const NODE_OPERATIONS: Table<NodeState> = {
  terminate: ["Deployed", "Unreachable"],
  "engine-upgrade": ["Deployed"],
  "health-check": ["Unreachable"],
};

/** Throws the 409 of the state table when `operation` is not allowed in `state`. */
export function assertAllowed<S extends string>(
  table: Table<S>,
  what: string,
  state: S,
  operation: string,
): void {
  const allowed = table[operation] ?? [];
  if (!allowed.includes(state)) throw stateConflict(what, state, operation, allowed);
}

/** A cluster's state once no operation is running, derived from its nodes and its target. */
export function settledClusterState(nodeStates: NodeState[], targetNumNodes: number): ClusterState {
  const live = nodeStates.filter((s) => s !== "Terminated");
  if (live.length === 0) return "Empty cluster";
  const deployed = live.filter((s) => s === "Deployed").length;
  return deployed === live.length && deployed >= targetNumNodes ? "Deployed" : "Partly deployed";
}
