// What every controller is given, and the question each asks before it acts: does an action hold
// the object? Objects an action works on are left to it (the action leaves them in a truthful
// state when it ends); a controller acts only on what is free.
import type { ActionEngine } from "../../actions/engine.ts";
import type { Duties } from "../../domain/duties.ts";
import type { Clock } from "../../domain/time.ts";
import { serviceUri, stackUri } from "../../domain/uri.ts";
import type { Store } from "../../store/store.ts";

export interface ControllerContext {
  store: Store;
  clock: Clock;
  duties: Duties;
  /**
   * The action engine's public face: whether an action of this process holds an object (no read),
   * and how a controller asks for work that an action carries out.
   */
  actions: Pick<ActionEngine, "runsOnAny" | "enqueue">;
  onError(err: unknown): void;
}

/** The keys of the controllers' queues: the object to look at again. */
export interface ContainerKey {
  container: string;
}
export interface ServiceKey {
  service: string;
}
export interface NodeKey {
  node: string;
}

/** Who a controller's actions are recorded as. */
export const SYSTEM = {
  method: "POST",
  path: "",
  user: "berth",
  userAgent: "berth-reconciler",
  ip: "",
  isUserAction: false,
};

/** A service's own object and its stack's: an action on either works on the service. */
export function serviceObjects(s: { namespace: string; uuid: string; stack_uuid: string | null }): string[] {
  return [serviceUri(s), ...(s.stack_uuid !== null ? [stackUri(s.namespace, s.stack_uuid)] : [])];
}

/** Whether an action (of any replica) holds one of the objects. */
export async function held(store: Store, objects: readonly string[]): Promise<boolean> {
  return (await store.actions.objectsWithActiveActions(objects)).size > 0;
}

/** Default work-queue back-off of the controllers: a failed key is looked at again soon, a few times. */
export const CONTROLLER_BACKOFF = { baseMs: 200, maxMs: 10_000, maxFailures: 5 };
