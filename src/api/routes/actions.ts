// Audit API (spec "Actions"): list, get, cancel, retry.
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Type } from "typebox";
import { ACTION_STATES, type ActionEngine } from "../../actions/engine.ts";
import type { Relations } from "../../actions/relations.ts";
import { type Action, ActionView } from "../../contract/action.ts";
import { StateFilter } from "../../contract/common.ts";
import { badRequest, invalidField, notFound } from "../../domain/errors.ts";
import { parseDateFilter, restTime } from "../../domain/time.ts";
import { actionUri, canonicalUri, parseObjectUri } from "../../domain/uri.ts";
import type { IdentityService } from "../../identity/service.ts";
import type { ActionRow, Store } from "../../store/store.ts";
import { envelope, listSchema, PAGE_QUERY, pageOf } from "../lists.ts";
import { namespaceOf, principalOf } from "../namespaces.ts";
import { NsParams, UuidParams } from "../objects.ts";
import { callMeta } from "../recorder.ts";
import { nsPaths } from "../routing.ts";

export function actionView(a: ActionRow, engine: ActionEngine): Action {
  return {
    resource_uri: actionUri(a.uuid),
    uuid: a.uuid,
    object: a.object,
    action: a.action,
    method: a.method,
    path: a.path,
    user: a.user,
    user_agent: a.user_agent,
    start_date: restTime(a.start_date),
    end_date: restTime(a.end_date),
    state: a.state,
    ip: a.ip,
    location: a.location,
    is_user_action: a.is_user_action === 1,
    can_be_canceled: engine.canBeCanceled(a),
    can_be_retried: engine.canBeRetried(a),
  };
}

const ListQuery = Type.Object({
  ...PAGE_QUERY,
  uuid: Type.Optional(Type.String()),
  uuid__startswith: Type.Optional(Type.String()),
  state: StateFilter(ACTION_STATES, "actions"),
  start_date__gte: Type.Optional(Type.String()),
  start_date__lte: Type.Optional(Type.String()),
  end_date__gte: Type.Optional(Type.String()),
  end_date__lte: Type.Optional(Type.String()),
  object: Type.Optional(Type.String({ description: "resource URI, with or without namespace" })),
  include_related: Type.Optional(Type.Boolean()),
  order_by: Type.Optional(Type.Union([Type.Literal("start_date"), Type.Literal("-start_date")])),
});

function dateFilter(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ms = parseDateFilter(value);
  if (ms === undefined) throw invalidField(name, "must be a date (for example 2026-11-22T03:17:08Z)");
  // Bounds are inclusive, and actions show their dates to the second: an upper bound given without
  // fractional seconds covers that whole second, so an action's own shown date includes it.
  if (name.endsWith("__lte") && !/:\d{2}[.,]\d/.test(value)) return ms + 999;
  return ms;
}

interface Deps {
  store: Store;
  identity: IdentityService;
  actions: ActionEngine;
  relations: Relations;
}

const tags = ["actions"];

export function actionRoutes(untyped: FastifyInstance, deps: Deps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { store, identity, actions, relations } = deps;

  /**
   * An action visible to the caller (its namespace is one the caller may read), or 404. Without a
   * namespace in the path that is any namespace the caller reads, not only its own: these routes
   * declare caller access and this is the object's rule.
   */
  async function visibleAction(
    req: FastifyRequest,
    { uuid, namespace }: { uuid: string; namespace?: string },
  ): Promise<ActionRow> {
    const a = await store.actions.findAction(uuid);
    const readable = await identity.namespacesOf(principalOf(req));
    if (!a || !readable.includes(a.namespace) || (namespace !== undefined && namespace !== a.namespace)) {
      throw notFound("action");
    }
    req.audit.namespace = a.namespace;
    return a;
  }

  for (const url of nsPaths("/api/audit/v1/{ns}action/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary: "List actions, oldest first",
          params: NsParams,
          querystring: ListQuery,
          response: { 200: listSchema(ActionView) },
        },
      },
      async (req) => {
        const ns = namespaceOf(req);
        const q = req.query;
        let objects: string[] | undefined;
        if (q.object !== undefined) {
          const parsed = parseObjectUri(q.object);
          if (!parsed && !q.object.startsWith("/api/"))
            throw invalidField("object", "must be a resource URI");
          const given = canonicalUri(q.object);
          // Without a namespace segment the URI is either a namespaced object in the path's namespace,
          // or an object that has no namespace (an action, a catalogue entry): look for both.
          const candidates =
            parsed && parsed.namespace === undefined
              ? [`/api/${parsed.subsystem}/v1/${ns}/${parsed.resource}/${parsed.id}/`, given]
              : [given];
          objects = q.include_related
            ? [...new Set((await Promise.all(candidates.map((c) => relations.related(store, c)))).flat())]
            : candidates;
        }
        const page = pageOf(q);
        const { rows, total } = await store.actions.listActions({
          namespaces: [ns],
          uuid: q.uuid,
          uuidPrefix: q.uuid__startswith,
          states: q.state ? [q.state] : undefined,
          objects,
          startGte: dateFilter("start_date__gte", q.start_date__gte),
          startLte: dateFilter("start_date__lte", q.start_date__lte),
          endGte: dateFilter("end_date__gte", q.end_date__gte),
          endLte: dateFilter("end_date__lte", q.end_date__lte),
          newestFirst: q.order_by === "-start_date",
          ...page,
        });
        return envelope(
          req,
          page,
          total,
          rows.map((a) => actionView(a, actions)),
        );
      },
    );
  }

  for (const url of nsPaths("/api/audit/v1/{ns}action/:uuid/")) {
    app.get(
      url,
      {
        config: { access: "caller" },
        schema: { tags, summary: "Get an action", params: UuidParams, response: { 200: ActionView } },
      },
      async (req) => actionView(await visibleAction(req, req.params), actions),
    );
  }

  for (const url of nsPaths("/api/audit/v1/{ns}action/:uuid/cancel/")) {
    app.post(
      url,
      {
        config: { action: "Action Cancel", access: "caller" },
        schema: {
          tags,
          summary: "Cancel a Pending or In progress action",
          params: UuidParams,
          response: { 200: ActionView },
        },
      },
      async (req) => {
        const a = await visibleAction(req, req.params);
        req.audit.object = actionUri(a.uuid);
        return actionView(await actions.cancel(a.uuid), actions);
      },
    );
  }

  for (const url of nsPaths("/api/audit/v1/{ns}action/:uuid/retry/")) {
    app.post(
      url,
      {
        config: { action: "Action Retry", access: "caller" },
        schema: {
          tags,
          summary: "Retry a finished action as a new action",
          params: UuidParams,
          response: { 202: ActionView },
        },
      },
      async (req, reply) => {
        const a = await visibleAction(req, req.params);
        req.audit.object = actionUri(a.uuid);
        if (!req.actionUuid) throw badRequest("retry needs an authenticated call");
        const created = await actions.retry(a.uuid, callMeta(req), req.actionUuid);
        req.audit.recorded = true;
        return reply.status(202).send(actionView(created, actions));
      },
    );
  }
}
