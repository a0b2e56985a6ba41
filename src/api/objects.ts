// Helpers every resource route shares: finding the object a namespaced path addresses, and
// recording an asynchronous operation on it under the call's action uuid.
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { type TSchema, Type } from "typebox";
import type { ActionEngine } from "../actions/engine.ts";
import { notFound } from "../domain/errors.ts";
import type { ActionRow, Store } from "../store/store.ts";
import { answerOfWritten } from "./errors.ts";
import { namespaceOf } from "./namespaces.ts";
import { callMeta } from "./recorder.ts";
import { nsPaths } from "./routing.ts";

/** Path parameters of a list or create route in both forms (`/…/` and `/:namespace/…/`). */
export const NsParams = Type.Object({ namespace: Type.Optional(Type.String()) });
/** Path parameters of one object in both forms. */
export const UuidParams = Type.Object({ uuid: Type.String(), namespace: Type.Optional(Type.String()) });

/**
 * The object of a namespaced path (a route with namespace access): 404 when it is missing or
 * lives in another namespace (the same answer, so nothing leaks). Notes it as the object of the
 * call's action.
 */
export function ownObject<T extends { namespace: string }>(
  req: FastifyRequest,
  found: T | undefined,
  what: string,
  uri: (t: T) => string,
): T {
  if (!found || found.namespace !== namespaceOf(req)) throw notFound(what);
  req.audit.object = uri(found);
  return found;
}

/** Queues an asynchronous operation as the call's action (written before the 202 is sent). */
export async function enqueueOperation(
  req: FastifyRequest,
  deps: { store: Store; actions: ActionEngine },
  op: {
    kind: string;
    params: unknown;
    namespace: string;
    object: string;
    /** The object as the route just read it: the first attempt starts from it. */
    read?: unknown;
    /** Told the object as the kind's prepare wrote it (what the answer shows). */
    prepared?: (object: unknown) => void;
  },
): Promise<ActionRow> {
  // The kind's prepare checks and moves the object's state under its version: when another
  // writer (a settling action, the reconciler) changed the object meanwhile, it is decided again,
  // from a fresh read.
  let read = op.read;
  // A kind's prepare runs only statements: the call may share its commit with concurrent ones.
  const a = await deps.store.retrying(
    (tx) => {
      const known = read;
      read = undefined;
      return deps.actions.enqueue(tx, { uuid: req.actionUuid, ...op, read: known, meta: callMeta(req) });
    },
    undefined,
    { group: true },
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

/**
 * Registers the operation routes of a resource (start, stop, redeploy…), in both path forms.
 * Each queues its kind with `{<param>: uuid}` (plus `reuse_volumes` for redeploy, CONTRACT:
 * default true) and answers 202 with the object in its new transitional state.
 */
export function operationRoutes<T extends { uuid: string; namespace: string }>(
  untyped: FastifyInstance,
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
    /** The object of the path (`ownObject`): 404 when the caller's namespace does not hold it. */
    find(req: FastifyRequest, uuid: string): Promise<T>;
    uri(t: T): string;
    /** The object as it reads after the call (`written`: t is the row as the operation wrote it). */
    view(t: T, written: boolean): Promise<unknown>;
    /** Schema of the object's answer (202). */
    response?: TSchema;
    /**
     * Operations that take `?dry_run=true`: the plan is answered (200) and nothing is queued or
     * changed. `target` is `?target_num_containers=` when given.
     */
    dryRun?: {
      operations: string[];
      plan(t: T, op: string, target: number | undefined): Promise<unknown>;
      response?: TSchema;
    };
  },
): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const answers = (r: Record<number, TSchema | undefined>) => {
    const given = Object.entries(r).filter((e): e is [string, TSchema] => e[1] !== undefined);
    return given.length ? { response: Object.fromEntries(given) } : {};
  };
  const config = (op: string) => ({
    action: `${opts.name} ${op[0]!.toUpperCase()}${op.slice(1)}`,
    access: "namespace" as const,
  });
  const enqueue = async (req: FastifyRequest, t: T, kind: string, params: Record<string, unknown>) => {
    let written: T | undefined;
    await enqueueOperation(req, opts, {
      kind,
      params,
      namespace: t.namespace,
      object: opts.uri(t),
      read: t,
      prepared: (o) => {
        written = o as T;
      },
    });
    return answerOfWritten(() => opts.view(written ?? t, written !== undefined));
  };
  for (const { op, kind, summary } of opts.operations) {
    const dryRun = opts.dryRun?.operations.includes(op) ? opts.dryRun : undefined;
    for (const url of nsPaths(`${opts.path}${op}/`)) {
      const schema = { tags: opts.tags, summary, params: UuidParams };
      if (dryRun) {
        app.post(
          url,
          {
            config: config(op),
            schema: {
              ...schema,
              querystring: DryRunQuery,
              ...answers({ 200: dryRun.response, 202: opts.response }),
            },
          },
          async (req, reply) => {
            const t = await opts.find(req, req.params.uuid);
            if (req.query.dry_run === true)
              return reply.status(200).send(await dryRun.plan(t, op, req.query.target_num_containers));
            return reply.status(202).send(await enqueue(req, t, kind, { [opts.param]: t.uuid }));
          },
        );
      } else if (op === "redeploy") {
        app.post(
          url,
          {
            config: config(op),
            schema: { ...schema, querystring: ReuseQuery, ...answers({ 202: opts.response }) },
          },
          async (req, reply) => {
            const t = await opts.find(req, req.params.uuid);
            const params = { [opts.param]: t.uuid, reuse_volumes: req.query.reuse_volumes !== false };
            return reply.status(202).send(await enqueue(req, t, kind, params));
          },
        );
      } else {
        app.post(
          url,
          { config: config(op), schema: { ...schema, ...answers({ 202: opts.response }) } },
          async (req, reply) => {
            const t = await opts.find(req, req.params.uuid);
            return reply.status(202).send(await enqueue(req, t, kind, { [opts.param]: t.uuid }));
          },
        );
      }
    }
  }
}
