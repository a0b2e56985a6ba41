// Registries and external repositories (spec "Registries and external repositories", repo
// subsystem), and the webhook Berth's own registry posts its notifications to.
//
// Repository names contain slashes and are sent raw (CONTRACT §1): `/repository/<host>/<path>/`
// is a wildcard route, in both the bare and the namespaced form. The 405 fallbacks of
// routing.ts skip wildcard paths, so this file answers 405 for the methods they lack itself.
import { timingSafeEqual } from "node:crypto";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import { NoContent, View } from "../../contract/common.ts";
import {
  RegistryView,
  RepositoryCreateBody,
  RepositoryUpdateBody,
  RepositoryView,
} from "../../contract/registry.ts";
import { ApiError, notFound, unauthorized } from "../../domain/errors.ts";
import { parseObjectUri } from "../../domain/uri.ts";
import type { RegistryService } from "../../registry/service.ts";
import type { RepositoryRow } from "../../store/registries.ts";
import type { Store } from "../../store/store.ts";
import { withRegistryAliases } from "../compat.ts";
import { sendError } from "../errors.ts";
import { envelope, listSchema, PAGE_QUERY, pageOf, SEARCH_QUERY } from "../lists.ts";
import { namespaceOf } from "../namespaces.ts";
import { NsParams } from "../objects.ts";
import { nsPaths } from "../routing.ts";

interface Deps {
  store: Store;
  registries: RegistryService;
  /** The token Berth's registry sends with its notifications; absent when Berth runs no registry. */
  webhookToken?: string;
}

/** Where Berth's own registry posts its notifications (not part of the public API). */
export const REGISTRY_WEBHOOK_PATH = "/hooks/registry/";

const HostParams = Type.Object({ host: Type.String(), namespace: Type.Optional(Type.String()) });
const NameParams = Type.Object({
  "*": Type.String({ description: "repository name: <registry host>/<path>" }),
  namespace: Type.Optional(Type.String()),
});

/** A registry filter is its resource URI (with or without namespace) or its host. */
function hostOfFilter(value: string): string {
  const uri = value.startsWith("/") ? parseObjectUri(value) : undefined;
  return uri?.subsystem === "repo" && uri.resource === "registry" ? uri.id : value;
}

export function registryRoutes(untyped: FastifyInstance, deps: Deps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { store, registries } = deps;
  const tags = ["registries and repositories"];

  /** The repository of the path; its name (`*`) is sent with raw slashes. */
  async function repositoryOf(req: FastifyRequest, path: string): Promise<RepositoryRow> {
    const row = await store.registries.findRepository(namespaceOf(req), path.replace(/\/+$/, ""));
    if (!row) throw notFound("repository");
    req.audit.object = (await registries.view(row)).resource_uri;
    return row;
  }

  // ---- registries -------------------------------------------------------------------------------

  for (const url of nsPaths("/api/repo/v1/{ns}registry/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary: "List registries: Berth's own and those of the namespace's repositories",
          params: NsParams,
          querystring: Type.Object({
            ...PAGE_QUERY,
            uuid: Type.Optional(Type.String()),
            uuid__startswith: Type.Optional(Type.String()),
            name: Type.Optional(Type.String()),
            host: Type.Optional(Type.String()),
            is_native_registry: Type.Optional(Type.Boolean()),
          }),
          response: { 200: listSchema(RegistryView) },
        },
      },
      async (req) => {
        const ns = namespaceOf(req);
        const q = req.query;
        const page = pageOf(q);
        const all = (await registries.registries(ns)).filter(
          (r) =>
            (q.uuid === undefined || r.uuid === q.uuid) &&
            (q.uuid__startswith === undefined || r.uuid.startsWith(q.uuid__startswith)) &&
            (q.name === undefined || r.name === q.name) &&
            (q.host === undefined || r.host === q.host) &&
            (q.is_native_registry === undefined || r.is_native_registry === q.is_native_registry),
        );
        const objects = all.slice(page.offset, page.offset + page.limit).map(withRegistryAliases);
        return envelope(req, page, all.length, objects);
      },
    );
  }

  for (const url of nsPaths("/api/repo/v1/{ns}registry/:host/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary: "Get a registry by host (the host may include a port)",
          params: HostParams,
          response: { 200: RegistryView },
        },
      },
      async (req) => {
        const ns = namespaceOf(req);
        const r = await registries.findRegistry(ns, req.params.host);
        if (!r) throw notFound("registry");
        return withRegistryAliases(r);
      },
    );
  }

  // ---- external repositories ---------------------------------------------------------------------

  for (const url of nsPaths("/api/repo/v1/{ns}repository/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary: "List external repositories",
          params: NsParams,
          querystring: Type.Object({
            ...PAGE_QUERY,
            name: Type.Optional(Type.String()),
            registry: Type.Optional(Type.String({ description: "registry resource URI (or host)" })),
            name__icontains: SEARCH_QUERY.name__icontains,
          }),
          response: { 200: listSchema(RepositoryView) },
        },
      },
      async (req) => {
        const ns = namespaceOf(req);
        const q = req.query;
        const page = pageOf(q);
        const { rows, total } = await store.registries.listRepositories({
          namespace: ns,
          name: q.name,
          registryHost: q.registry === undefined ? undefined : hostOfFilter(q.registry),
          nameContains: q.name__icontains,
          ...page,
        });
        return envelope(req, page, total, await registries.views(rows));
      },
    );
    app.post(
      url,
      {
        config: { action: "Repository Create", access: "namespace" },
        schema: {
          tags,
          summary: "Add a repository of a third-party registry; the credentials are checked against it",
          params: NsParams,
          body: RepositoryCreateBody,
          response: { 201: RepositoryView },
        },
      },
      async (req, reply) => {
        const ns = namespaceOf(req);
        const row = await registries.create(ns, req.body);
        const view = await registries.view(row);
        req.audit.object = view.resource_uri;
        return reply.status(201).send(view);
      },
    );
  }

  for (const url of nsPaths("/api/repo/v1/{ns}repository/*")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary: "Get an external repository; its name (host and path) is sent with raw slashes",
          params: NameParams,
          response: { 200: RepositoryView },
        },
      },
      async (req) => registries.view(await repositoryOf(req, req.params["*"])),
    );
    app.patch(
      url,
      {
        config: { action: "Repository Update", access: "namespace" },
        schema: {
          tags,
          summary: "Update a repository's credentials; they are checked against the registry",
          params: NameParams,
          body: RepositoryUpdateBody,
          response: { 200: RepositoryView },
        },
      },
      async (req) => {
        const row = await repositoryOf(req, req.params["*"]);
        return registries.view(await registries.update(row, req.body));
      },
    );
    app.delete(
      url,
      {
        config: { action: "Repository Delete", access: "namespace" },
        schema: {
          tags,
          summary: "Remove a repository from Berth (it stays on its registry)",
          params: NameParams,
          response: { 204: NoContent },
        },
      },
      async (req, reply) => {
        await registries.remove(await repositoryOf(req, req.params["*"]));
        return reply.status(204).send();
      },
    );
    for (const method of ["POST", "PUT"] as const) {
      app.route({
        method,
        url,
        config: { fallback: true },
        schema: { hide: true },
        handler: (request: FastifyRequest, reply: FastifyReply) => {
          reply.header("Allow", "GET, PATCH, DELETE");
          return sendError(
            request,
            reply,
            new ApiError(
              "method_not_allowed",
              "method_not_allowed",
              `${method} is not allowed here; use GET, PATCH, DELETE.`,
            ),
          );
        },
      });
    }
  }

  // ---- webhook of Berth's registry -------------------------------------------------------------------

  const token = deps.webhookToken;
  if (token === undefined) return;
  const expected = Buffer.from(`Bearer ${token}`);
  // The registry's token is the credential (checked here, in constant time).
  app.post(
    REGISTRY_WEBHOOK_PATH,
    {
      config: { access: "public" },
      schema: { hide: true, response: { 200: View({ redeploys: Type.Integer() }) } },
    },
    async (req) => {
      const given = Buffer.from(req.headers.authorization ?? "");
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw unauthorized();
      const actions = await registries.onRegistryNotification(req.body);
      if (actions.length) req.log.info(`registry push: started ${actions.length} autoredeploy action(s)`);
      return { redeploys: actions.length };
    },
  );
}
