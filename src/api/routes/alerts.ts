// Alert rules (issue 32): `/api/app/v1/[ns/]alert/` lists and creates a namespace's rules,
// `…/alert/<uuid>/` reads, changes (name, enabled) and removes one, `…/incidents/` and
// `…/deliveries/` read when its condition held and the log of every notification sent.
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Type } from "typebox";
import { type AlertService, alertUri, deliveryView, incidentView } from "../../alerts/service.ts";
import {
  AlertCreateBody,
  AlertPatchBody,
  AlertView,
  DeliveryView,
  IncidentView,
} from "../../contract/alert.ts";
import { NoContent } from "../../contract/common.ts";
import type { AlertRuleRow } from "../../store/alerts.ts";
import { alertsOf } from "../../store/alerts.ts";
import type { Store } from "../../store/store.ts";
import { answerOfWritten } from "../errors.ts";
import { envelope, listSchema, PAGE_QUERY, pageOf } from "../lists.ts";
import { namespaceOf, principalOf } from "../namespaces.ts";
import { NsParams, ownObject, UuidParams } from "../objects.ts";
import { nsPaths } from "../routing.ts";

interface Deps {
  store: Store;
  alerts: AlertService;
}

export function alertRoutes(untyped: FastifyInstance, deps: Deps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { store, alerts } = deps;
  const tags = ["alerts"];
  const ruleOf = async (req: FastifyRequest, uuid: string): Promise<AlertRuleRow> =>
    ownObject(req, await alertsOf(store).findRule(uuid), "alert", alertUri);

  for (const url of nsPaths("/api/app/v1/{ns}alert/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary: "List the namespace's alert rules",
          params: NsParams,
          querystring: Type.Object({ ...PAGE_QUERY }),
          response: { 200: listSchema(AlertView) },
        },
      },
      async (req) => {
        const page = pageOf(req.query);
        const { rows, total } = await alertsOf(store).listRules(namespaceOf(req), page);
        return envelope(req, page, total, await Promise.all(rows.map((r) => alerts.view(r))));
      },
    );
    app.post(
      url,
      {
        config: { action: "Alert Create", access: "namespace" },
        schema: {
          tags,
          summary:
            "Create an alert rule: container exited or crash-looping, unhealthy, memory above a share of its limit, node unreachable, action failed, certificate expiring",
          params: NsParams,
          body: AlertCreateBody,
          response: { 201: AlertView },
        },
      },
      async (req, reply) => {
        const rule = await alerts.create(namespaceOf(req), req.body, principalOf(req).user.username);
        req.audit.object = alertUri(rule);
        return reply.status(201).send(await answerOfWritten(() => alerts.view(rule)));
      },
    );
  }

  for (const url of nsPaths("/api/app/v1/{ns}alert/:uuid/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: { tags, summary: "Get an alert rule", params: UuidParams, response: { 200: AlertView } },
      },
      async (req) => alerts.view(await ruleOf(req, req.params.uuid)),
    );
    app.patch(
      url,
      {
        config: { action: "Alert Update", access: "namespace" },
        schema: {
          tags,
          summary: "Rename an alert rule, or turn it off and on",
          params: UuidParams,
          body: AlertPatchBody,
          response: { 200: AlertView },
        },
      },
      async (req) => alerts.view(await alerts.update(await ruleOf(req, req.params.uuid), req.body)),
    );
    app.delete(
      url,
      {
        config: { action: "Alert Delete", access: "namespace" },
        schema: {
          tags,
          summary: "Delete an alert rule with its incidents and delivery log",
          params: UuidParams,
          response: { 204: NoContent },
        },
      },
      async (req, reply) => {
        const rule = await ruleOf(req, req.params.uuid);
        await alertsOf(store).deleteRule(rule.uuid);
        return reply.status(204).send();
      },
    );
  }

  for (const url of nsPaths("/api/app/v1/{ns}alert/:uuid/incidents/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary: "The times an alert's condition held, newest first, with when each resolved",
          params: UuidParams,
          querystring: Type.Object({ ...PAGE_QUERY }),
          response: { 200: listSchema(IncidentView) },
        },
      },
      async (req) => {
        const rule = await ruleOf(req, req.params.uuid);
        const page = pageOf(req.query);
        const { rows, total } = await alertsOf(store).listIncidents(rule.uuid, page);
        return envelope(req, page, total, rows.map(incidentView));
      },
    );
  }

  for (const url of nsPaths("/api/app/v1/{ns}alert/:uuid/deliveries/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary:
            "The delivery log: every notification of the alert, its attempts and outcome, newest first",
          params: UuidParams,
          querystring: Type.Object({ ...PAGE_QUERY }),
          response: { 200: listSchema(DeliveryView) },
        },
      },
      async (req) => {
        const rule = await ruleOf(req, req.params.uuid);
        const page = pageOf(req.query);
        const { rows, total } = await alertsOf(store).listDeliveries(rule.uuid, page);
        return envelope(req, page, total, rows.map(deliveryView));
      },
    );
  }
}
