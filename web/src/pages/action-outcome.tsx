// An action's outcome told as it is: a cancel shows at once what it does (stopping after the
// current step) and then how it ended; Retry is offered only when the object's state now allows
// the operation again (the state tables say so), with the reason when it does not.
import { STACK_OPERATIONS } from "../../../src/domain/stack.ts";
import {
  actionEnded,
  CLUSTER_OPERATIONS,
  CONTAINER_OPERATIONS,
  NODE_OPERATIONS,
  SERVICE_OPERATIONS,
} from "../../../src/domain/states.ts";
import { useObject } from "../live.ts";
import { kindOf } from "../names.tsx";
import { gate } from "../ui.tsx";

const TABLES: Record<string, Record<string, string[]>> = {
  service: SERVICE_OPERATIONS,
  container: CONTAINER_OPERATIONS,
  stack: STACK_OPERATIONS,
  nodecluster: CLUSTER_OPERATIONS,
  node: NODE_OPERATIONS,
};

/** The state-table operation of an action's name ("Service Start" → "start"), if it is one. */
export function operationOf(action: string, table: Record<string, string[]>): string | undefined {
  const words = action.toLowerCase().split(/\s+/);
  for (let n = 1; n <= 2 && n < words.length; n++) {
    const op = words.slice(-n).join("-");
    if (op in table) return op;
  }
  return undefined;
}

interface Retryable {
  action: string;
  object: string;
  state: string;
  can_be_retried: boolean;
}

/** Whether a retry of `a` can succeed now, and why not. */
export function useRetry(a: Retryable | undefined): { allowed: boolean; reason: string } {
  const kind = a ? kindOf(a.object) : "";
  const table = TABLES[kind];
  const op = a && table ? operationOf(a.action, table) : undefined;
  const object = useObject<{ resource_uri: string; state?: string; name?: string }>(
    a && table && actionEnded(a.state) && a.can_be_retried ? a.object : undefined,
  );
  if (!a) return { allowed: false, reason: "" };
  if (!actionEnded(a.state))
    return { allowed: false, reason: `action is ${a.state}; retry is allowed in Success, Failed, Canceled` };
  if (!a.can_be_retried) return { allowed: false, reason: "only asynchronous actions can be retried" };
  if (!table) return { allowed: true, reason: "" };
  if (object.error) return { allowed: false, reason: `its ${kind} is gone` };
  if (!object.data) return { allowed: false, reason: `reading the ${kind}'s state…` };
  const what = `${kind} ${object.data.name ?? ""}`.trim();
  if (object.data.state === "Terminated") return { allowed: false, reason: `${what} is Terminated` };
  return op ? gate(table, op, object.data.state, what) : { allowed: true, reason: "" };
}

/** What the action is doing or how it ended, in a sentence, when its state alone does not say. */
export function Outcome({ state, requested }: { state: string; requested: boolean }) {
  if (state === "Canceling")
    return (
      <p class="outcome busy" role="status">
        Cancel requested: the action stops after its current step and then shows how it ended.
      </p>
    );
  if (requested && state === "Success")
    return (
      <p class="outcome" role="status">
        The cancel came too late: the work was done.
      </p>
    );
  if (requested && state === "Canceled")
    return (
      <p class="outcome" role="status">
        Canceled: the log says which steps ran.
      </p>
    );
  return null;
}
