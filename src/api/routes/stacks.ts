// Stacks (spec "Stacks"; CONTRACT §12 stack files).
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Type } from "typebox";
import type { ActionEngine } from "../../actions/engine.ts";
import { StateFilter, StateNotFilter } from "../../contract/common.ts";
import { StackCreateBody, StackFileView, StackUpdateBody, StackView } from "../../contract/stack.ts";
import { STACK_STATES } from "../../domain/stack.ts";
import { stackUri } from "../../domain/uri.ts";
import type { StackService } from "../../stacks/service.ts";
import type { StackRow } from "../../store/stacks.ts";
import type { Store } from "../../store/store.ts";
import type { AnswerCache } from "../answer-cache.ts";
import { answerOfWritten } from "../errors.ts";
import { envelope, listSchema, PAGE_QUERY, pageOf, SEARCH_QUERY } from "../lists.ts";
import { namespaceOf, principalOf } from "../namespaces.ts";
import { enqueueOperation, NsParams, operationRoutes, ownObject, UuidParams } from "../objects.ts";
import { nsPaths } from "../routing.ts";

interface Deps {
  store: Store;
  actions: ActionEngine;
  stacks: StackService;
  /** GET answers, kept while the change feed has not moved in their namespaces. */
  answers: AnswerCache;
}

export function stackRoutes(untyped: FastifyInstance, deps: Deps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { store, actions, stacks, answers } = deps;
  const answer = answers.forRequest.bind(answers);
  const tags = ["stacks"];
  // The top of a stack body is checked before its schema: a compose file's `version` or its
  // `services` mapping get a message saying what Berth takes instead.
  const checkBody = async (req: FastifyRequest) => stacks.checkBody(req.body);

  const stackOf = async (req: FastifyRequest, uuid: string): Promise<StackRow> =>
    ownObject(req, await store.stacks.findStack(uuid), "stack", (st) => stackUri(st.namespace, st.uuid));
  const enqueue = (req: FastifyRequest, kind: string, params: unknown, st: StackRow) =>
    enqueueOperation(
      req,
      { store, actions },
      { kind, params, namespace: st.namespace, object: stackUri(st.namespace, st.uuid) },
    );
  const fresh = async (st: StackRow) => stacks.view((await store.stacks.findStack(st.uuid))!);

  for (const url of nsPaths("/api/app/v1/{ns}stack/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          params: NsParams,
          summary: "List stacks (current and terminated)",
          querystring: Type.Object({
            ...PAGE_QUERY,
            ...SEARCH_QUERY,
            uuid: Type.Optional(Type.String()),
            uuid__startswith: Type.Optional(Type.String()),
            name: Type.Optional(Type.String()),
            state: StateFilter(STACK_STATES, "stacks"),
            state__not: StateNotFilter(STACK_STATES, "stacks"),
            failing: Type.Optional(
              Type.Boolean({
                description:
                  "only stacks that fail (a service crashed, unhealthy or partly running, or the stack partly running)",
              }),
            ),
          }),
          response: { 200: listSchema(StackView) },
        },
      },
      async (req) => {
        const ns = namespaceOf(req);
        const q = req.query;
        return answer(req, req.url, async (read) => {
          const page = pageOf(q);
          const { rows, total } = await store.stacks.listStacks({
            namespace: ns,
            uuid: q.uuid,
            uuidPrefix: q.uuid__startswith,
            name: q.name,
            state: q.state,
            stateNot: q.state__not,
            nameContains: q.name__icontains,
            failing: q.failing,
            orderBy: q.order_by,
            ...page,
          });
          return envelope(req, page, total, await stacks.views(rows, read));
        });
      },
    );
    app.post(
      url,
      {
        config: { action: "Stack Create", access: "namespace" },
        preValidation: checkBody,
        schema: {
          tags,
          summary: "Create a stack and its services (not started); services in either dialect",
          params: NsParams,
          body: StackCreateBody,
          response: { 201: StackView },
        },
      },
      async (req, reply) => {
        const ns = namespaceOf(req);
        const st = await stacks.create(ns, principalOf(req), req.body);
        req.audit.object = stackUri(st.namespace, st.uuid);
        return reply.status(201).send(await answerOfWritten(() => stacks.view(st)));
      },
    );
  }

  for (const url of nsPaths("/api/app/v1/{ns}stack/:uuid/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: { tags, summary: "Get a stack", params: UuidParams, response: { 200: StackView } },
      },
      async (req) =>
        answer(req, `stack ${req.params.uuid}`, async (read) =>
          stacks.view(await stackOf(req, req.params.uuid), read),
        ),
    );
    app.patch(
      url,
      {
        config: { action: "Stack Update", access: "namespace" },
        preValidation: checkBody,
        schema: {
          tags,
          summary: "Update the listed services of a stack (matched by name) and add new ones",
          params: UuidParams,
          body: StackUpdateBody,
          response: { 200: StackView },
        },
      },
      async (req) => {
        const st = await stackOf(req, req.params.uuid);
        return stacks.view(await stacks.update(st, principalOf(req), req.body));
      },
    );
    app.delete(
      url,
      {
        config: { action: "Stack Terminate", access: "namespace" },
        schema: {
          tags,
          summary: "Terminate every service of the stack, and the stack",
          params: UuidParams,
          response: { 202: StackView },
        },
      },
      async (req, reply) => {
        const st = await stackOf(req, req.params.uuid);
        await enqueue(req, "stack.terminate", { stack: st.uuid }, st);
        return reply.status(202).send(await answerOfWritten(() => fresh(st)));
      },
    );
  }

  for (const url of nsPaths("/api/app/v1/{ns}stack/:uuid/export/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary: "The stack as a stack file: {<service name>: {<stack-file keys>}}",
          params: UuidParams,
          response: { 200: StackFileView },
        },
      },
      async (req) => stacks.exportStack(await stackOf(req, req.params.uuid)),
    );
  }

  operationRoutes(app, {
    path: "/api/app/v1/{ns}stack/:uuid/",
    name: "Stack",
    param: "stack",
    tags,
    store,
    actions,
    find: stackOf,
    uri: (st) => stackUri(st.namespace, st.uuid),
    view: fresh,
    response: StackView,
    operations: [
      {
        op: "start",
        kind: "stack.start",
        summary: "Start the stack's services, each after the services it links to",
      },
      { op: "stop", kind: "stack.stop", summary: "Stop the stack's services" },
      {
        op: "redeploy",
        kind: "stack.redeploy",
        summary: "Redeploy the stack's services with their current definitions",
      },
    ],
  });
}
