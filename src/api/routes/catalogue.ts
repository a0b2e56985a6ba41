// Infrastructure catalogue routes (read only): providers, regions, zones, node types.
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { Catalogue } from "../../catalogue/catalogue.ts";
import { Az, NodeType, Provider, Region } from "../../contract/catalogue.ts";
import { notFound } from "../../domain/errors.ts";
import { canonicalUri } from "../../domain/uri.ts";
import { envelope, listSchema, PAGE_QUERY, pageOf } from "../lists.ts";

export { canonicalUri };

const tags = ["infrastructure catalogue"];

export function catalogueRoutes(untyped: FastifyInstance, catalogue: Catalogue): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const paged = <T>(
    req: Parameters<typeof envelope>[0],
    q: { limit?: number; offset?: number },
    all: T[],
  ) => {
    const page = pageOf(q);
    return envelope(req, page, all.length, all.slice(page.offset, page.offset + page.limit));
  };

  app.get(
    "/api/infra/v1/provider/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "List providers",
        querystring: Type.Object({ ...PAGE_QUERY, name: Type.Optional(Type.String()) }),
        response: { 200: listSchema(Provider) },
      },
    },
    async (req) => {
      const q = req.query;
      return paged(
        req,
        q,
        catalogue.listProviders().filter((p) => q.name === undefined || p.name === q.name),
      );
    },
  );
  app.get(
    "/api/infra/v1/provider/:name/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "Get a provider",
        params: Type.Object({ name: Type.String() }),
        response: { 200: Provider },
      },
    },
    async (req) => {
      const { name } = req.params;
      const p = catalogue.listProviders().find((x) => x.name === name);
      if (!p) throw notFound("provider");
      return p;
    },
  );

  app.get(
    "/api/infra/v1/region/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "List regions",
        querystring: Type.Object({
          ...PAGE_QUERY,
          name: Type.Optional(Type.String()),
          provider: Type.Optional(Type.String({ description: "provider resource URI" })),
        }),
        response: { 200: listSchema(Region) },
      },
    },
    async (req) => {
      const q = req.query;
      const list = catalogue
        .listRegions()
        .filter((r) => q.name === undefined || r.name === q.name)
        .filter((r) => q.provider === undefined || r.provider === canonicalUri(q.provider));
      return paged(req, q, list);
    },
  );
  app.get(
    "/api/infra/v1/region/:provider/:name/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "Get a region",
        params: Type.Object({ provider: Type.String(), name: Type.String() }),
        response: { 200: Region },
      },
    },
    async (req) => {
      const { provider, name } = req.params;
      const r = catalogue
        .listRegions()
        .find((x) => x.resource_uri === `/api/infra/v1/region/${provider}/${name}/`);
      if (!r) throw notFound("region");
      return r;
    },
  );

  app.get(
    "/api/infra/v1/az/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "List availability zones",
        querystring: Type.Object({
          ...PAGE_QUERY,
          name: Type.Optional(Type.String()),
          region: Type.Optional(Type.String({ description: "region resource URI" })),
        }),
        response: { 200: listSchema(Az) },
      },
    },
    async (req) => {
      const q = req.query;
      const list = catalogue
        .listAzs()
        .filter((z) => q.name === undefined || z.name === q.name)
        .filter((z) => q.region === undefined || z.region === canonicalUri(q.region));
      return paged(req, q, list);
    },
  );
  app.get(
    "/api/infra/v1/az/:provider/:region/:name/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "Get an availability zone",
        params: Type.Object({ provider: Type.String(), region: Type.String(), name: Type.String() }),
        response: { 200: Az },
      },
    },
    async (req) => {
      const { provider, region, name } = req.params;
      const z = catalogue
        .listAzs()
        .find((x) => x.resource_uri === `/api/infra/v1/az/${provider}/${region}/${name}/`);
      if (!z) throw notFound("availability zone");
      return z;
    },
  );

  app.get(
    "/api/infra/v1/nodetype/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "List node types",
        querystring: Type.Object({
          ...PAGE_QUERY,
          name: Type.Optional(Type.String()),
          regions: Type.Optional(Type.String({ description: "region resource URI" })),
          availability_zones: Type.Optional(Type.String({ description: "availability zone resource URI" })),
        }),
        response: { 200: listSchema(NodeType) },
      },
    },
    async (req) => {
      const q = req.query;
      const list = catalogue
        .listNodeTypes()
        .filter((n) => q.name === undefined || n.name === q.name)
        .filter((n) => q.regions === undefined || n.regions.includes(canonicalUri(q.regions)))
        .filter(
          (n) =>
            q.availability_zones === undefined ||
            n.availability_zones.includes(canonicalUri(q.availability_zones)),
        );
      return paged(req, q, list);
    },
  );
  app.get(
    "/api/infra/v1/nodetype/:provider/:name/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "Get a node type",
        params: Type.Object({ provider: Type.String(), name: Type.String() }),
        response: { 200: NodeType },
      },
    },
    async (req) => {
      const { provider, name } = req.params;
      const n = catalogue
        .listNodeTypes()
        .find((x) => x.resource_uri === `/api/infra/v1/nodetype/${provider}/${name}/`);
      if (!n) throw notFound("node type");
      return n;
    },
  );
}
