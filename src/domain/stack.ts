// Stacks (spec "Stack", "Stack states"): the state table, the state a stack has from its
// services, stack names, and the order its services start in. Pure functions.
import { invalidField } from "./errors.ts";
import type { StackState } from "./states.ts";

export const STACK_STATES: StackState[] = [
  "Not Running",
  "Starting",
  "Running",
  "Partly running",
  "Stopping",
  "Stopped",
  "Redeploying",
  "Terminating",
  "Terminated",
];

/** States that only a stack action sets, and that it leaves when it ends. */
export const STACK_TRANSITIONAL: StackState[] = ["Starting", "Stopping", "Redeploying", "Terminating"];

/**
 * Stack operations: operation → states that allow it. The spec's table lists no state for stop
 * although the Stacks endpoints define it; stop is allowed where it is for a service (Running,
 * Partly running). Start is allowed in Partly running too, as for services: a stack is Partly
 * running exactly when some of its services do not run (one added by an update, one stopped by
 * hand), and start is how they are brought up without redeploying the others. `update` (PATCH)
 * is not in the table; it is allowed wherever no operation runs.
 */
export const STACK_OPERATIONS: Record<string, StackState[]> = {
  start: ["Not Running", "Stopped", "Partly running"],
  stop: ["Running", "Partly running"],
  redeploy: ["Running", "Partly running", "Stopped"],
  terminate: ["Not Running", "Running", "Partly running", "Stopped"],
  update: ["Not Running", "Running", "Partly running", "Stopped"],
};

/**
 * A stack's state from its services' states, when no stack operation runs (the state table's
 * meanings: Running = every service running, Stopped = every service stopped, …). Terminated
 * services (terminated one by one) no longer count; a stack without live services is Not Running.
 */
export function settledStackState(serviceStates: readonly string[]): StackState {
  const live = serviceStates.filter((s) => s !== "Terminated");
  const all = (...states: string[]) => live.every((s) => states.includes(s));
  const any = (...states: string[]) => live.some((s) => states.includes(s));
  if (live.length === 0 || all("Not running")) return "Not Running";
  if (all("Running")) return "Running";
  if (all("Terminating")) return "Terminating";
  if (all("Starting", "Running")) return "Starting";
  if (all("Stopping", "Stopped", "Not running")) return any("Stopping") ? "Stopping" : "Stopped";
  if (any("Redeploying")) return "Redeploying";
  if (any("Running", "Partly running", "Scaling", "Starting")) return "Partly running";
  return "Stopped";
}

/**
 * Stack names are lower-case DNS labels like service names: a service of another stack is
 * referred to as `<service>.<stack>`, so a stack name holds no '.', ':' or '/'.
 */
const STACK_NAME_RE = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

export function assertStackName(name: string): void {
  if (!STACK_NAME_RE.test(name)) {
    throw invalidField(
      "name",
      "must be a lower-case DNS label of at most 63 characters (a-z, 0-9 and '-', not starting or ending with '-'): services of other stacks refer to it as <service>.<stack>",
    );
  }
}

export interface OrderNode {
  id: string;
  /** Ids this one must come after (its links and volumes_from); ids outside the set are ignored. */
  after: string[];
}

/**
 * The order services start in: each after the services it links to (or mounts the volumes of);
 * among those ready at once, the input order. A cycle has no such order: it is returned instead,
 * as a path that ends where it starts.
 */
export function startOrder(nodes: readonly OrderNode[]): { order: string[] } | { cycle: string[] } {
  const ids = new Set(nodes.map((n) => n.id));
  const deps = new Map(nodes.map((n) => [n.id, [...new Set(n.after.filter((d) => ids.has(d)))]]));
  const order: string[] = [];
  const placed = new Set<string>();
  while (order.length < nodes.length) {
    const next = nodes.find((n) => !placed.has(n.id) && deps.get(n.id)!.every((d) => placed.has(d)));
    if (!next)
      return {
        cycle: findCycle(
          nodes.filter((n) => !placed.has(n.id)),
          deps,
        ),
      };
    order.push(next.id);
    placed.add(next.id);
  }
  return { order };
}

function findCycle(remaining: readonly OrderNode[], deps: Map<string, string[]>): string[] {
  const left = new Set(remaining.map((n) => n.id));
  // Every remaining node waits on another remaining one, so walking dependencies must revisit one.
  const path: string[] = [];
  let at = remaining[0]!.id;
  while (!path.includes(at)) {
    path.push(at);
    at = deps.get(at)!.find((d) => left.has(d))!;
  }
  return [...path.slice(path.indexOf(at)), at];
}
