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

/** What an action is doing to a node now (null: none); only node actions write it. */
export type NodePhase = "deploying" | "upgrading" | "terminating";
export const NODE_PHASES: NodePhase[] = ["deploying", "upgrading", "terminating"];

/** Whether the node's engine last answered; only health checks (and a finished deploy) write it. */
export type NodeObserved = "reachable" | "unreachable";
export const NODE_OBSERVED: NodeObserved[] = ["reachable", "unreachable"];

const NODE_PHASE_STATE: Record<NodePhase, NodeState> = {
  deploying: "Deploying",
  upgrading: "Upgrading",
  terminating: "Terminating",
};

/**
 * The state the API shows for a node: a destroyed node is Terminated; an action's phase shows while
 * it holds one; otherwise the health checks' word. The store computes the stored `state` with it.
 */
export function nodeState(n: {
  phase: NodePhase | null;
  observed: NodeObserved;
  destroyed_at: number | null;
}): NodeState {
  if (n.destroyed_at !== null) return "Terminated";
  if (n.phase !== null) return NODE_PHASE_STATE[n.phase];
  return n.observed === "unreachable" ? "Unreachable" : "Deployed";
}

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

export type ServiceState =
  | "Not running"
  | "Starting"
  | "Running"
  | "Partly running"
  | "Scaling"
  | "Redeploying"
  | "Stopping"
  | "Stopped"
  | "Terminating"
  | "Terminated";
export const SERVICE_STATES: ServiceState[] = [
  "Not running",
  "Starting",
  "Running",
  "Partly running",
  "Scaling",
  "Redeploying",
  "Stopping",
  "Stopped",
  "Terminating",
  "Terminated",
];
export const SERVICE_TRANSITIONAL: ServiceState[] = [
  "Starting",
  "Scaling",
  "Redeploying",
  "Stopping",
  "Terminating",
];

/**
 * Service operations. Start is allowed in Partly running too: the spec's operation description
 * says start acts on "stopped or partly running services" while its table omits it; CONTRACT
 * (and the issue) decide for the description, so a partly running service can be completed.
 * Scale is not in the table; it is allowed wherever no other operation is running.
 */
export const SERVICE_OPERATIONS: Table<ServiceState> = {
  start: ["Not running", "Stopped", "Partly running"],
  stop: ["Running", "Partly running"],
  redeploy: ["Running", "Partly running", "Stopped"],
  // A redeploy to a kept revision's definition (orchestrator/kinds/rollback.ts).
  rollback: ["Running", "Partly running", "Stopped"],
  terminate: ["Not running", "Running", "Partly running", "Stopped"],
  scale: ["Not running", "Running", "Partly running", "Stopped"],
  update: ["Not running", "Running", "Partly running", "Stopped"],
};

export type ContainerState = "Starting" | "Running" | "Stopping" | "Stopped" | "Terminating" | "Terminated";
export const CONTAINER_STATES: ContainerState[] = [
  "Starting",
  "Running",
  "Stopping",
  "Stopped",
  "Terminating",
  "Terminated",
];

/** What an action is doing to a container now (null: none); only actions write it. */
export type ContainerPhase = "starting" | "redeploying" | "stopping" | "terminating";
export const CONTAINER_PHASES: ContainerPhase[] = ["starting", "redeploying", "stopping", "terminating"];

/**
 * What the container's engine last reported; only the runtime writes it. `none`: no engine
 * container was ever made for the record; `missing`: the engine no longer has one; `exited`:
 * it exists and does not run (created, exited, dead).
 */
export type ContainerObserved = "none" | "running" | "restarting" | "exited" | "missing";
export const CONTAINER_OBSERVED: ContainerObserved[] = ["none", "running", "restarting", "exited", "missing"];

const CONTAINER_PHASE_STATE: Record<ContainerPhase, ContainerState> = {
  starting: "Starting",
  redeploying: "Starting",
  stopping: "Stopping",
  terminating: "Terminating",
};
const CONTAINER_OBSERVED_STATE: Record<ContainerObserved, ContainerState> = {
  none: "Stopped",
  running: "Running",
  restarting: "Starting",
  exited: "Stopped",
  missing: "Stopped",
};

/**
 * The state the API shows for a container, derived from what actions decided and what its engine
 * reported: a removed record is Terminated; an action's phase shows while it holds one; otherwise
 * the engine's word. The store computes the stored `state` column with it on every write.
 */
export function containerState(c: {
  phase: ContainerPhase | null;
  observed: ContainerObserved;
  destroyed_at: number | null;
}): ContainerState {
  if (c.destroyed_at !== null) return "Terminated";
  if (c.phase !== null) return CONTAINER_PHASE_STATE[c.phase];
  return CONTAINER_OBSERVED_STATE[c.observed];
}

/** Container operations; redeploy is not in the spec's table, it is allowed where start or stop is. */
export const CONTAINER_OPERATIONS: Table<ContainerState> = {
  start: ["Stopped"],
  stop: ["Running"],
  terminate: ["Running", "Stopped"],
  redeploy: ["Running", "Stopped"],
};

/** A service's state once no operation is running, derived from its live containers. */
export function settledServiceState(containerStates: string[], targetNumContainers: number): ServiceState {
  const live = containerStates.filter((s) => s !== "Terminated");
  if (live.length === 0) return "Not running";
  const running = live.filter((s) => s === "Running").length;
  if (running === live.length && running >= targetNumContainers) return "Running";
  if (running > 0) return "Partly running";
  return "Stopped";
}

export type StackState =
  | "Not Running"
  | "Starting"
  | "Running"
  | "Partly running"
  | "Stopping"
  | "Stopped"
  | "Redeploying"
  | "Terminating"
  | "Terminated";

export type ActionState = "Pending" | "In progress" | "Canceling" | "Canceled" | "Success" | "Failed";
export const ACTION_STATES: ActionState[] = [
  "Pending",
  "In progress",
  "Canceling",
  "Canceled",
  "Success",
  "Failed",
];

/** The states an action ends in: none of them ever changes again (a retry is a new action). */
export const ACTION_ENDED_STATES: readonly string[] = ["Success", "Failed", "Canceled"];

/** Whether an action in this state has ended. */
export function actionEnded(state: string): boolean {
  return ACTION_ENDED_STATES.includes(state);
}
