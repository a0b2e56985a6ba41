// Records every non-GET call of an authenticated user on the platform API as an action
// (CONTRACT §7). The action's uuid is chosen before the handler runs, so that asynchronous
// handlers can write the action under that uuid and every response carries the headers.
import { randomUUID } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { ActionEngine, SyncCall } from "../actions/engine.ts";
import { actionUri } from "../domain/uri.ts";
import type { IdentityService } from "../identity/service.ts";
import type { Store } from "../store/store.ts";
import { parseBasic } from "./auth.ts";
import { ACTION_URI_HEADERS } from "./compat.ts";
import { areaOf } from "./context.ts";

export function callMeta(request: FastifyRequest) {
  return {
    method: request.method,
    path: request.url.split("?")[0]!,
    user: request.principal?.user.username ?? "",
    userAgent: request.headers["user-agent"] ?? "",
    ip: request.ip,
  };
}

/** The call's action as the recorder writes it, in the state the call ended in. */
function callAction(
  request: FastifyRequest,
  state: SyncCall["state"],
  logLine: string | undefined,
): SyncCall {
  const principal = request.principal!;
  const path = request.url.split("?")[0]!.replace(/\/{2,}/g, "/");
  return {
    uuid: request.actionUuid!,
    namespace: request.audit.namespace ?? principal.namespaceLimit ?? principal.user.username,
    object: request.audit.object ?? path.replace(/\/?$/, "/"),
    name: request.audit.name ?? request.routeOptions.config?.action ?? "API Call",
    meta: callMeta(request),
    state,
    logLine,
  };
}

/**
 * The call's action, to record in the transaction of the write the call makes (one commit for
 * both): a handler passes it to the write, which runs it in its transaction once the write has
 * succeeded. The action is recorded as a success, and the recorder writes none after the answer;
 * a write that fails rolls it back with itself, and the recorder then records the failure as for
 * any call. Should the call fail after that commit, the recorded action is marked failed.
 * Undefined when the call records no action.
 */
export function recordWithWrite(
  request: FastifyRequest,
  actions: ActionEngine,
): ((tx: Store) => Promise<void>) | undefined {
  if (!request.actionUuid || !request.principal || request.audit.recorded) return undefined;
  return async (tx) => {
    await actions.recordSyncIn(tx, callAction(request, "Success", request.audit.note));
    tx.whenCommitted(() => {
      request.audit.recorded = true;
      request.audit.recordedAsSuccess = true;
    });
  };
}

export function installRecorder(app: FastifyInstance, actions: ActionEngine): void {
  app.addHook("onRequest", async (request, reply) => {
    // Platform calls (CONTRACT §7), and the calls of other routes that name their action (the
    // settings administrators give a namespace: recorded in its audit log).
    if (!request.principal) return;
    if (request.area !== "platform" && request.routeOptions.config?.action === undefined) return;
    if (request.method === "GET" || request.method === "HEAD" || request.method === "OPTIONS") return;
    request.actionUuid = randomUUID();
    for (const h of ACTION_URI_HEADERS) reply.header(h, actionUri(request.actionUuid));
  });

  app.addHook("onSend", async (request, reply, payload) => {
    if (!request.actionUuid || !request.principal) return payload;
    const failed = reply.statusCode >= 400;
    const failure = `${reply.statusCode}: ${request.audit.failure ?? "request refused"}`;
    try {
      if (request.audit.recorded) {
        // Recorded with the call's write (recordWithWrite), and what followed failed.
        if (failed && request.audit.recordedAsSuccess) {
          request.audit.recordedAsSuccess = false;
          await actions.failRecordedCall(request.actionUuid, failure);
        }
        return payload;
      }
      await actions.recordSync(
        callAction(request, failed ? "Failed" : "Success", failed ? failure : request.audit.note),
      );
      request.audit.recorded = true;
    } catch (err) {
      request.log.error({ err }, "could not record the action of this call");
    }
    return payload;
  });
}

/**
 * Records the action of a call the HTTP layer refused before any route ran (a bad percent-escape,
 * an unknown method), when it was an authenticated non-GET platform call; returns the action
 * headers to answer with (none when nothing was recorded).
 */
export async function recordEarlyRefusal(
  deps: { identity: IdentityService; actions: ActionEngine },
  call: {
    method: string;
    path: string;
    authorization: string | undefined;
    meta: ReturnType<typeof callMeta>;
    refusal: { status: number; error: string };
  },
): Promise<Record<string, string>> {
  if (areaOf(call.path) !== "platform" || ["GET", "HEAD", "OPTIONS"].includes(call.method)) return {};
  const creds = parseBasic(call.authorization);
  if (!creds) return {};
  const principal = await deps.identity.authenticateBasic(creds.username, creds.secret, {
    allowPassword: false,
  });
  if (!principal) return {};
  const uuid = randomUUID();
  await deps.actions.recordSync({
    uuid,
    namespace: principal.namespaceLimit ?? principal.user.username,
    object: call.path.replace(/\/{2,}/g, "/").replace(/\/?$/, "/"),
    name: "API Call",
    meta: { ...call.meta, user: principal.user.username },
    state: "Failed",
    logLine: `${call.refusal.status}: ${call.refusal.error}`,
  });
  return Object.fromEntries(ACTION_URI_HEADERS.map((h) => [h, actionUri(uuid)]));
}
