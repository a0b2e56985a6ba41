// Service triggers (issue 7): list, create, get and delete them like other objects, and call one
// without credentials: the trigger's URL carries its secret.
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Type } from "typebox";
import type { ActionEngine } from "../../actions/engine.ts";
import { ActionView } from "../../contract/action.ts";
import { TriggerCreateBody, TriggerView } from "../../contract/trigger.ts";
import { notFound } from "../../domain/errors.ts";
import { actionUri, serviceUri } from "../../domain/uri.ts";
import type { ServiceRow } from "../../store/services.ts";
import type { Store } from "../../store/store.ts";
import type { TriggerService } from "../../triggers/service.ts";
import { ACTION_URI_HEADERS } from "../compat.ts";
import { envelope, listSchema, PAGE_QUERY, pageOf } from "../lists.ts";
import { principalOf } from "../namespaces.ts";
import { ownObject } from "../objects.ts";
import { nsPaths } from "../routing.ts";
import { actionView } from "./actions.ts";

interface Deps {
  store: Store;
  actions: ActionEngine;
  triggers: TriggerService;
}

const ServiceParams = Type.Object({ uuid: Type.String(), namespace: Type.Optional(Type.String()) });
const TriggerParams = Type.Object({
  uuid: Type.String(),
  trigger: Type.String(),
  namespace: Type.Optional(Type.String()),
});

export function triggerRoutes(untyped: FastifyInstance, deps: Deps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { store, actions, triggers } = deps;
  const tags = ["services and containers"];

  const serviceOf = async (req: FastifyRequest, uuid: string): Promise<ServiceRow> =>
    ownObject(req, await store.services.findService(uuid), "service", serviceUri);

  async function triggerOf(req: FastifyRequest, p: { uuid: string; trigger: string }) {
    const s = await serviceOf(req, p.uuid);
    const t = await triggers.find(s, p.trigger);
    if (!t) throw notFound("trigger");
    req.audit.object = triggers.view(t).resource_uri;
    return t;
  }

  for (const url of nsPaths("/api/app/v1/{ns}service/:uuid/trigger/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary: "List a service's triggers",
          params: ServiceParams,
          querystring: Type.Object({ ...PAGE_QUERY }),
          response: { 200: listSchema(TriggerView) },
        },
      },
      async (req) => {
        const s = await serviceOf(req, req.params.uuid);
        const page = pageOf(req.query);
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
        config: { action: "Trigger Create", access: "namespace" },
        schema: {
          tags,
          summary: "Create a trigger: a secret URL that redeploys the service or scales it up by one",
          params: ServiceParams,
          body: TriggerCreateBody,
          response: { 201: TriggerView },
        },
      },
      async (req, reply) => {
        const s = await serviceOf(req, req.params.uuid);
        const t = await triggers.create(s, req.body, principalOf(req).user);
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
        config: { access: "namespace" },
        schema: { tags, summary: "Get a trigger", params: TriggerParams, response: { 200: TriggerView } },
      },
      async (req) => triggers.view(await triggerOf(req, req.params)),
    );
    app.delete(
      url,
      {
        config: { action: "Trigger Delete", access: "namespace" },
        schema: {
          tags,
          summary: "Delete a trigger; its URL answers 404 from now on",
          params: TriggerParams,
          response: { 200: TriggerView },
        },
      },
      async (req) => {
        const t = await triggerOf(req, req.params);
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
        config: { access: "public" },
        schema: {
          tags,
          summary: "Call a trigger (no authentication: the URL holds the secret); starts its operation",
          params: TriggerParams,
          querystring: Type.Object({ token: Type.Optional(Type.String({ maxLength: 200 })) }),
          security: [],
          response: { 202: ActionView },
        },
      },
      async (req, reply) => {
        const p = req.params;
        const a = await triggers.call({
          serviceUuid: p.uuid,
          triggerUuid: p.trigger,
          namespace: p.namespace,
          token: req.query.token,
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
