// Helpers every resource route shares: finding the object a namespaced path addresses, and
// recording an asynchronous operation on it under the call's action uuid.
import type { FastifyRequest } from "fastify";
import type { ActionEngine } from "../actions/engine.ts";
import { notFound } from "../domain/errors.ts";
import type { IdentityService } from "../identity/service.ts";
import type { ActionRow, Store } from "../store/store.ts";
import { namespaceOf } from "./namespaces.ts";
import { callMeta } from "./recorder.ts";

/** The `:uuid` of the path. */
export function uuidParam(req: FastifyRequest): string {
  return (req.params as { uuid: string }).uuid;
}

/**
 * The object of a namespaced path: 404 when it is missing or lives in another namespace (the same
 * answer, so nothing leaks). Notes it as the object of the call's action.
 */
export async function ownObject<T extends { namespace: string }>(
  req: FastifyRequest,
  identity: IdentityService,
  found: T | undefined,
  what: string,
  uri: (t: T) => string,
): Promise<T> {
  const ns = await namespaceOf(req, identity);
  if (!found || found.namespace !== ns) throw notFound(what);
  req.audit.object = uri(found);
  return found;
}

/** Queues an asynchronous operation as the call's action (written before the 202 is sent). */
export async function enqueueOperation(
  req: FastifyRequest,
  deps: { store: Store; actions: ActionEngine },
  op: { kind: string; params: unknown; namespace: string; object: string },
): Promise<ActionRow> {
  const a = await deps.store.transaction((tx) =>
    deps.actions.enqueue(tx, { uuid: req.actionUuid, ...op, meta: callMeta(req) }),
  );
  req.audit.recorded = true;
  return a;
}
