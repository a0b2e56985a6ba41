// Service triggers (issue 7): list, create, get and delete them like other objects, and call one
// without credentials: the trigger's URL carries its secret.
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Type } from "typebox";
import type { ActionEngine } from "../../actions/engine.ts";
import { notFound } from "../../domain/errors.ts";
import { actionUri, serviceUri } from "../../domain/uri.ts";
import type { IdentityService } from "../../identity/service.ts";
import type { ServiceRow } from "../../store/services.ts";
import type { Store } from "../../store/store.ts";
import { TRIGGER_OPERATIONS, type TriggerOperation, type TriggerService } from "../../triggers/service.ts";
import { ACTION_URI_HEADERS } from "../compat.ts";
import { envelope, listSchema, PAGE_QUERY, pageOf } from "../lists.ts";
import { principalOf } from "../namespaces.ts";
import { ownObject, uuidParam } from "../objects.ts";
import { nsPaths } from "../routing.ts";
import { ActionSchema, actionView } from "./actions.ts";

interface Deps {
  store: Store;
  identity: IdentityService;
  actions: ActionEngine;
  triggers: TriggerService;
}

const TriggerSchema = Type.Object({
  uuid: Type.String(),
  name: Type.String(),
  operation: Type.String(),
  url: Type.String({ description: "the call URL; it holds the trigger's secret" }),
  resource_uri: Type.String(),
});

const TriggerCreate = Type.Object({
  name: Type.Optional(Type.String({ maxLength: 100 })),
  operation: Type.Optional(
    Type.Union(
      TRIGGER_OPERATIONS.map((o) => Type.Literal(o)),
      { default: "REDEPLOY" },
    ),
  ),
});

const ServiceParams = Type.Object({ uuid: Type.String(), namespace: Type.Optional(Type.String()) });
const TriggerParams = Type.Object({
  uuid: Type.String(),
  trigger: Type.String(),
  namespace: Type.Optional(Type.String()),
});

export function triggerRoutes(app: FastifyInstance, deps: Deps): void {
  const { store, identity, actions, triggers } = deps;
  const tags = ["services and containers"];

  const serviceOf = async (req: FastifyRequest): Promise<ServiceRow> =>
    ownObject(req, identity, await store.services.findService(uuidParam(req)), "service", serviceUri);

  async function triggerOf(req: FastifyRequest) {
    const s = await serviceOf(req);
    const t = await triggers.find(s, (req.params as { trigger: string }).trigger);
    if (!t) throw notFound("trigger");
    req.audit.object = triggers.view(t).resource_uri;
    return t;
  }

  for (const url of nsPaths("/api/app/v1/{ns}service/:uuid/trigger/")) {
    app.get(
      url,
      {
        schema: {
          tags,
          summary: "List a service's triggers",
          params: ServiceParams,
          querystring: Type.Object({ ...PAGE_QUERY }),
          response: { 200: listSchema(TriggerSchema) },
        },
      },
      async (req) => {
        const s = await serviceOf(req);
        const page = pageOf(req.query as { limit?: number; offset?: number });
        const { rows, total } = await triggers.list(s, page);
        return envelope(
          req,
          page,
          total,
          rows.map((t) => triggers.view(t)),
        );
      },
    );
    app.post(
      url,
      {
        config: { action: "Trigger Create" },
        schema: {
          tags,
          summary: "Create a trigger: a secret URL that redeploys the service or scales it up by one",
          params: ServiceParams,
          body: TriggerCreate,
          response: { 201: TriggerSchema },
        },
      },
      async (req, reply) => {
        const s = await serviceOf(req);
        const body = (req.body ?? {}) as { name?: string; operation?: TriggerOperation };
        const t = await triggers.create(s, body, principalOf(req).user.username);
        const view = triggers.view(t);
        req.audit.object = view.resource_uri;
        return reply.status(201).send(view);
      },
    );
  }

  for (const url of nsPaths("/api/app/v1/{ns}service/:uuid/trigger/:trigger/")) {
    app.get(
      url,
      {
        schema: { tags, summary: "Get a trigger", params: TriggerParams, response: { 200: TriggerSchema } },
      },
      async (req) => triggers.view(await triggerOf(req)),
    );
    app.delete(
      url,
      {
        config: { action: "Trigger Delete" },
        schema: {
          tags,
          summary: "Delete a trigger; its URL answers 404 from now on",
          params: TriggerParams,
          response: { 200: TriggerSchema },
        },
      },
      async (req) => {
        const t = await triggerOf(req);
        await triggers.remove(t);
        return triggers.view(t);
      },
    );
  }

  for (const url of nsPaths("/api/app/v1/{ns}service/:uuid/trigger/:trigger/call/")) {
    app.post(
      url,
      {
        // The URL is the credential: no Authorization header is needed (or looked at).
        config: { auth: "none" },
        schema: {
          tags,
          summary: "Call a trigger (no authentication: the URL holds the secret); starts its operation",
          params: TriggerParams,
          querystring: Type.Object({ token: Type.Optional(Type.String({ maxLength: 200 })) }),
          security: [],
          response: { 202: ActionSchema },
        },
      },
      async (req, reply) => {
        const p = req.params as { uuid: string; trigger: string; namespace?: string };
        const a = await triggers.call({
          serviceUuid: p.uuid,
          triggerUuid: p.trigger,
          namespace: p.namespace,
          token: (req.query as { token?: string }).token,
          meta: {
            method: req.method,
            path: req.url.split("?")[0]!,
            userAgent: req.headers["user-agent"] ?? "",
            ip: req.ip,
          },
        });
        if (!a) throw notFound("trigger");
        for (const h of ACTION_URI_HEADERS) reply.header(h, actionUri(a.uuid));
        return reply.status(202).send(actionView(a, actions));
      },
    );
  }
}
