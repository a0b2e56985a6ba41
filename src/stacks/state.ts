// A stack's state and what its definitions and operations both need to know of it: its live
// services, the order they start in, and whether an operation is allowed now (spec "Stack states").

import { conflict } from "../domain/errors.ts";
import type { ServiceSpec } from "../domain/service.ts";
import { STACK_OPERATIONS, STACK_TRANSITIONAL, settledStackState } from "../domain/stack.ts";
import { assertAllowed, SERVICE_TRANSITIONAL, type ServiceState, type StackState } from "../domain/states.ts";
import type { ServiceRow } from "../store/services.ts";
import type { StackRow } from "../store/stacks.ts";
import type { Store } from "../store/store.ts";

export { specOf } from "../store/codec.ts";
export const live = (s: { state: string }) => s.state !== "Terminated";

/** The services a service must start after: those it links to and those whose volumes it mounts. */
export function dependencies(spec: ServiceSpec): string[] {
  return [
    ...spec.linked_to_service.map((l) => l.to_service),
    ...spec.bindings.flatMap((b) => (b.volumes_from ? [b.volumes_from] : [])),
  ];
}

/** The stack's services that are not terminated. */
export async function servicesOf(store: Store, stackUuid: string): Promise<ServiceRow[]> {
  return (await store.services.servicesOfStack(stackUuid)).filter(live);
}

/** The stored state while an operation runs (or once terminated); otherwise what the services say. */
export function stateOf(st: StackRow, services: ServiceRow[]): StackState {
  const stored = st.state as StackState;
  if (stored === "Terminated" || STACK_TRANSITIONAL.includes(stored)) return stored;
  return settledStackState(services.map((s) => s.state));
}

/** A 409 unless the stack's state allows `operation` and none of its services is mid-operation. */
export function assertStackAllowed(st: StackRow, services: ServiceRow[], operation: string): void {
  assertAllowed(STACK_OPERATIONS, `stack ${st.name}`, stateOf(st, services), operation);
  const busy = services.find((s) => SERVICE_TRANSITIONAL.includes(s.state as ServiceState));
  if (busy) {
    throw conflict(
      `service ${busy.name} of stack ${st.name} is ${busy.state}; wait until it settles to ${operation} the stack`,
      "invalid_state",
    );
  }
}
