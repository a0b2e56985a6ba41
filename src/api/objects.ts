// Helpers every resource route shares: finding the object a namespaced path addresses, and
// recording an asynchronous operation on it under the call's action uuid.
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Type } from "typebox";
import type { ActionEngine } from "../actions/engine.ts";
import { notFound } from "../domain/errors.ts";
import type { IdentityService } from "../identity/service.ts";
import type { ActionRow, Store } from "../store/store.ts";
import { namespaceOf } from "./namespaces.ts";
import { callMeta } from "./recorder.ts";
import { nsPaths } from "./routing.ts";

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

/** One `POST …/<resource>/<uuid>/<op>/` operation that queues an action kind. */
export interface Operation {
  op: string;
  kind: string;
  summary: string;
}

/**
 * Registers the operation routes of a resource (start, stop, redeploy…), in both path forms.
 * Each queues its kind with `{<param>: uuid}` (plus `reuse_volumes` for redeploy, CONTRACT:
 * default true) and answers 202 with the object in its new transitional state.
 */
export function operationRoutes<T extends { uuid: string; namespace: string }>(
  app: FastifyInstance,
  opts: {
    /** e.g. "/api/app/v1/{ns}service/:uuid/" */
    path: string;
    /** Readable action name prefix, e.g. "Service". */
    name: string;
    /** Parameter name of the object's uuid in the kind's params, e.g. "service". */
    param: string;
    tags: string[];
    operations: Operation[];
    store: Store;
    actions: ActionEngine;
    find(req: FastifyRequest): Promise<T>;
    uri(t: T): string;
    /** The object as it reads after the call. */
    view(t: T): Promise<unknown>;
    /**
     * Operations that take `?dry_run=true`: the plan is answered (200) and nothing is queued or
     * changed. `target` is `?target_num_containers=` when given.
     */
    dryRun?: { operations: string[]; plan(t: T, op: string, target: number | undefined): Promise<unknown> };
  },
): void {
  const UuidParams = Type.Object({ uuid: Type.String(), namespace: Type.Optional(Type.String()) });
  const ReuseQuery = Type.Object({ reuse_volumes: Type.Optional(Type.Boolean({ default: true })) });
  const DryRunQuery = Type.Object({
    dry_run: Type.Optional(
      Type.Boolean({
        default: false,
        description: "answer the placement plan and its explanations (200) without changing anything",
      }),
    ),
    target_num_containers: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 100,
        description: "with dry_run: plan for this target instead of the service's own",
      }),
    ),
  });
  for (const { op, kind, summary } of opts.operations) {
    for (const url of nsPaths(`${opts.path}${op}/`)) {
      app.post(
        url,
        {
          config: { action: `${opts.name} ${op[0]!.toUpperCase()}${op.slice(1)}` },
          schema: {
            tags: opts.tags,
            summary,
            params: UuidParams,
            ...(op === "redeploy" ? { querystring: ReuseQuery } : {}),
            ...(opts.dryRun?.operations.includes(op) ? { querystring: DryRunQuery } : {}),
          },
        },
        async (req, reply) => {
          const t = await opts.find(req);
          const q = req.query as { dry_run?: boolean; target_num_containers?: number } | undefined;
          if (opts.dryRun?.operations.includes(op) && q?.dry_run === true) {
            req.audit.object = opts.uri(t);
            return reply.status(200).send(await opts.dryRun.plan(t, op, q.target_num_containers));
          }
          const params: Record<string, unknown> = { [opts.param]: t.uuid };
          if (op === "redeploy") {
            params.reuse_volumes = (req.query as { reuse_volumes?: boolean }).reuse_volumes !== false;
          }
          await enqueueOperation(req, opts, { kind, params, namespace: t.namespace, object: opts.uri(t) });
          return reply.status(202).send(await opts.view(t));
        },
      );
    }
  }
}
