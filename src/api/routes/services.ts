// Services and containers (spec "Services", "Containers").
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Type } from "typebox";
import type { ActionEngine } from "../../actions/engine.ts";
import { StateFilter, StateNotFilter } from "../../contract/common.ts";
import { ContainerView } from "../../contract/container.ts";
import { RevisionView, RollbackBody } from "../../contract/revisions.ts";
import {
  ServiceCreateBody,
  ServicePlanView,
  ServiceUpdateBody,
  ServiceView,
} from "../../contract/service.ts";
import { CONTAINER_STATES, SERVICE_STATES } from "../../domain/states.ts";
import { containerUri, lastSegment, serviceUri } from "../../domain/uri.ts";
import type { ServiceManager } from "../../orchestrator/manager.ts";
import { revisionViews } from "../../orchestrator/revision-views.ts";
import type { Views } from "../../orchestrator/views.ts";
import type { ContainerRow, ServiceRow } from "../../store/services.ts";
import type { Store } from "../../store/store.ts";
import type { AnswerCache } from "../answer-cache.ts";
import { answerOfWritten } from "../errors.ts";
import { contractValidator } from "../input.ts";
import { envelope, listSchema, PAGE_QUERY, pageOf, SEARCH_QUERY } from "../lists.ts";
import { namespaceOf, principalOf } from "../namespaces.ts";
import { enqueueOperation, NsParams, operationRoutes, ownObject, UuidParams } from "../objects.ts";
import { recordWithWrite } from "../recorder.ts";
import { nsPaths } from "../routing.ts";

interface Deps {
  store: Store;
  actions: ActionEngine;
  services: ServiceManager;
  views: Views;
  /** GET answers, kept while the change feed has not moved in their namespaces. */
  answers: AnswerCache;
}

/** The uuid inside a resource URI filter (with or without namespace), or the value itself. */
function uuidOf(uri: string): string {
  return lastSegment(uri) ?? uri;
}

export function serviceRoutes(untyped: FastifyInstance, deps: Deps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { store, actions, services, views, answers } = deps;
  const tags = ["services and containers"];

  const serviceOf = async (req: FastifyRequest, uuid: string): Promise<ServiceRow> =>
    ownObject(req, await store.services.findService(uuid), "service", serviceUri);
  const containerOf = async (req: FastifyRequest, uuid: string): Promise<ContainerRow> =>
    ownObject(req, await store.services.findContainer(uuid), "container", containerUri);
  const answer = answers.forRequest.bind(answers);
  const enqueue = (req: FastifyRequest, kind: string, params: unknown, namespace: string, object: string) =>
    enqueueOperation(req, { store, actions }, { kind, params, namespace, object });

  // ---- services -----------------------------------------------------------------------------------

  for (const url of nsPaths("/api/app/v1/{ns}service/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          params: NsParams,
          summary: "List services (current and recently terminated)",
          querystring: Type.Object({
            ...PAGE_QUERY,
            ...SEARCH_QUERY,
            uuid: Type.Optional(Type.String()),
            uuid__startswith: Type.Optional(Type.String()),
            state: StateFilter(SERVICE_STATES, "services"),
            state__not: StateNotFilter(SERVICE_STATES, "services"),
            name: Type.Optional(Type.String()),
            stack: Type.Optional(Type.String({ description: "stack resource URI" })),
            stack__name: Type.Optional(Type.String()),
            failing: Type.Optional(
              Type.Boolean({
                description: "only services that fail (a container crashed or unhealthy, or partly running)",
              }),
            ),
          }),
          response: { 200: listSchema(ServiceView) },
        },
      },
      async (req) =>
        answer(req, req.url, async (read) => {
          const ns = namespaceOf(req);
          const q = req.query;
          const page = pageOf(q);
          const { rows, total } = await store.services.listServices({
            namespace: ns,
            uuid: q.uuid,
            uuidPrefix: q.uuid__startswith,
            state: q.state,
            stateNot: q.state__not,
            nameContains: q.name__icontains,
            orderBy: q.order_by,
            name: q.name,
            stack: q.stack ? uuidOf(q.stack) : undefined,
            stackName: q.stack__name,
            failing: q.failing,
            ...page,
          });
          return envelope(req, page, total, await views.serviceViews(rows, read));
        }),
    );
    app.post(
      url,
      {
        config: { action: "Service Create", access: "namespace" },
        // The body's check is the one stack items go through (contract/check.ts).
        validatorCompiler: contractValidator,
        schema: {
          tags,
          summary: "Create a service (not started)",
          params: NsParams,
          body: ServiceCreateBody,
          response: { 201: ServiceView },
        },
      },
      async (req, reply) => {
        const ns = namespaceOf(req);
        const record = recordWithWrite(req, actions);
        const s = await services.create(ns, principalOf(req), req.body, {
          actionUuid: req.actionUuid,
          record: (tx, row) => {
            req.audit.object = serviceUri(row);
            return record?.(tx) ?? Promise.resolve();
          },
        });
        req.audit.object = serviceUri(s);
        return reply.status(201).send(await answerOfWritten(() => views.serviceView(s)));
      },
    );
  }

  for (const url of nsPaths("/api/app/v1/{ns}service/:uuid/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: { tags, summary: "Get a service", params: UuidParams, response: { 200: ServiceView } },
      },
      async (req) =>
        answer(req, `service ${req.params.uuid}`, async (read) =>
          views.serviceView(await serviceOf(req, req.params.uuid), read),
        ),
    );
    app.patch(
      url,
      {
        config: { action: "Service Update", access: "namespace" },
        validatorCompiler: contractValidator,
        schema: {
          tags,
          summary: "Update a service's definition",
          params: UuidParams,
          body: ServiceUpdateBody,
          response: { 200: ServiceView },
        },
      },
      async (req) => {
        const s = await serviceOf(req, req.params.uuid);
        // The caller's principal: adding role global makes the service's PLATFORM_AUTH key from it.
        const written = await services.update(s, req.body, principalOf(req), {
          actionUuid: req.actionUuid,
          record: recordWithWrite(req, actions),
        });
        return answerOfWritten(() => views.serviceView(written));
      },
    );
    app.delete(
      url,
      {
        config: { action: "Service Terminate", access: "namespace" },
        schema: {
          tags,
          summary: "Terminate a service and its containers",
          params: UuidParams,
          response: { 202: ServiceView },
        },
      },
      async (req, reply) => {
        const s = await serviceOf(req, req.params.uuid);
        await enqueue(req, "service.terminate", { service: s.uuid }, s.namespace, serviceUri(s));
        return reply
          .status(202)
          .send(
            await answerOfWritten(async () => views.serviceView((await store.services.findService(s.uuid))!)),
          );
      },
    );
  }

  // ---- revisions and rollback (issue 29) -------------------------------------------------------------

  for (const url of nsPaths("/api/app/v1/{ns}service/:uuid/revisions/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary: "List the service's kept definitions (revisions), newest first",
          params: UuidParams,
          querystring: Type.Object({ ...PAGE_QUERY }),
          response: { 200: listSchema(RevisionView) },
        },
      },
      async (req) => {
        const s = await serviceOf(req, req.params.uuid);
        const page = pageOf(req.query);
        const { rows, total } = await store.services.revisions.list(s.uuid, page);
        return envelope(req, page, total, await revisionViews(store, s, rows));
      },
    );
  }

  for (const url of nsPaths("/api/app/v1/{ns}service/:uuid/rollback/")) {
    app.post(
      url,
      {
        config: { action: "Service Rollback", access: "namespace" },
        // The body is optional: a bare POST goes back to the revision before the current one.
        preValidation: async (req) => {
          if (req.body === undefined || req.body === null) req.body = {};
        },
        schema: {
          tags,
          summary:
            "Redeploy the service with a kept revision's definition (default: the one before the current)",
          params: UuidParams,
          querystring: Type.Object({ reuse_volumes: Type.Optional(Type.Boolean({ default: true })) }),
          body: RollbackBody,
          response: { 202: ServiceView },
        },
      },
      async (req, reply) => {
        const s = await serviceOf(req, req.params.uuid);
        const rev = await services.rollbackTarget(s, req.body?.revision);
        await enqueue(
          req,
          "service.rollback",
          { service: s.uuid, revision: rev.number, reuse_volumes: req.query.reuse_volumes !== false },
          s.namespace,
          serviceUri(s),
        );
        return reply
          .status(202)
          .send(
            await answerOfWritten(async () => views.serviceView((await store.services.findService(s.uuid))!)),
          );
      },
    );
  }

  operationRoutes<ServiceRow>(app, {
    path: "/api/app/v1/{ns}service/:uuid/",
    name: "Service",
    param: "service",
    tags,
    store,
    actions,
    find: serviceOf,
    uri: (s) => serviceUri(s),
    view: async (s, written) => views.serviceView(written ? s : (await store.services.findService(s.uuid))!),
    response: ServiceView,
    dryRun: {
      operations: ["start", "scale"],
      response: ServicePlanView,
      plan: (s, op, target) => services.planDryRun(s, op, target ?? s.target_num_containers),
    },
    operations: [
      { op: "start", kind: "service.start", summary: "Start all containers (deploys them if needed)" },
      { op: "stop", kind: "service.stop", summary: "Stop all containers" },
      { op: "scale", kind: "service.scale", summary: "Scale to target_num_containers" },
      {
        op: "redeploy",
        kind: "service.redeploy",
        summary: "Redeploy all containers with the current definition",
      },
    ],
  });

  // ---- containers -----------------------------------------------------------------------------------

  for (const url of nsPaths("/api/app/v1/{ns}container/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          params: NsParams,
          summary: "List containers (current and recently terminated)",
          querystring: Type.Object({
            ...PAGE_QUERY,
            ...SEARCH_QUERY,
            uuid: Type.Optional(Type.String()),
            uuid__startswith: Type.Optional(Type.String()),
            state: StateFilter(CONTAINER_STATES, "containers"),
            state__not: StateNotFilter(CONTAINER_STATES, "containers"),
            name: Type.Optional(Type.String()),
            service: Type.Optional(Type.String({ description: "service resource URI" })),
            node: Type.Optional(Type.String({ description: "node resource URI" })),
            service__stack__name: Type.Optional(Type.String()),
            failing: Type.Optional(
              Type.Boolean({ description: "only containers that fail: crashed, or running unhealthy" }),
            ),
          }),
          response: { 200: listSchema(ContainerView) },
        },
      },
      async (req) =>
        answer(req, req.url, async (read) => {
          const ns = namespaceOf(req);
          const q = req.query;
          const page = pageOf(q);
          const { rows, total } = await store.services.listContainers({
            namespace: ns,
            uuid: q.uuid,
            uuidPrefix: q.uuid__startswith,
            state: q.state,
            stateNot: q.state__not,
            nameContains: q.name__icontains,
            orderBy: q.order_by,
            name: q.name,
            service: q.service ? uuidOf(q.service) : undefined,
            node: q.node ? uuidOf(q.node) : undefined,
            serviceStackName: q.service__stack__name,
            failing: q.failing,
            ...page,
          });
          return envelope(req, page, total, await views.containerViews(rows, read));
        }),
    );
  }

  for (const url of nsPaths("/api/app/v1/{ns}container/:uuid/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: { tags, summary: "Get a container", params: UuidParams, response: { 200: ContainerView } },
      },
      async (req) =>
        answer(req, `container ${req.params.uuid}`, async (read) =>
          views.containerView(await containerOf(req, req.params.uuid), read),
        ),
    );
    app.delete(
      url,
      {
        config: { action: "Container Terminate", access: "namespace" },
        schema: {
          tags,
          summary: "Terminate a container",
          params: UuidParams,
          response: { 202: ContainerView },
        },
      },
      async (req, reply) => {
        const c = await containerOf(req, req.params.uuid);
        await enqueue(req, "container.terminate", { container: c.uuid }, c.namespace, containerUri(c));
        return reply
          .status(202)
          .send(await views.containerView((await store.services.findContainer(c.uuid))!));
      },
    );
  }

  operationRoutes(app, {
    path: "/api/app/v1/{ns}container/:uuid/",
    name: "Container",
    param: "container",
    tags,
    store,
    actions,
    find: containerOf,
    uri: containerUri,
    response: ContainerView,
    view: async (c) => views.containerView((await store.services.findContainer(c.uuid))!),
    operations: [
      { op: "start", kind: "container.start", summary: "Start a stopped container" },
      { op: "stop", kind: "container.stop", summary: "Stop a running container" },
      {
        op: "redeploy",
        kind: "container.redeploy",
        summary: "Redeploy the container with its service's current definition",
      },
    ],
  });
}
