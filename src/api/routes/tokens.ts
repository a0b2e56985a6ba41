// Node registration tokens (issue 15): `POST /api/infra/v1/[ns/]token/` is the historical CLI's
// `node byo` call; it answers `{token, command, …}` once. Listing shows the tokens still usable
// (never their secret); revoking deletes one.
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Type } from "typebox";
import { NoContent } from "../../contract/common.ts";
import {
  CreatedRegistrationTokenView,
  type RegistrationToken,
  RegistrationTokenView,
} from "../../contract/token.ts";
import { notFound } from "../../domain/errors.ts";
import { restTime } from "../../domain/time.ts";
import { type AgentNodes, tokenUri } from "../../nodes/agents.ts";
import type { RegistrationTokenRow } from "../../store/agents.ts";
import { envelope, listSchema, PAGE_QUERY, pageOf } from "../lists.ts";
import { namespaceOf, principalOf } from "../namespaces.ts";
import { NsParams, UuidParams } from "../objects.ts";
import { nsPaths } from "../routing.ts";

interface Deps {
  agents: AgentNodes;
}

function tokenView(t: RegistrationTokenRow): RegistrationToken {
  return {
    uuid: t.uuid,
    resource_uri: tokenUri(t),
    created: restTime(t.created),
    expires: restTime(t.expires),
    created_by: t.created_by,
  };
}

export function tokenRoutes(untyped: FastifyInstance, deps: Deps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { agents } = deps;
  const tags = ["node clusters and nodes"];

  const tokenOf = async (req: FastifyRequest, uuid: string): Promise<RegistrationTokenRow> => {
    const t = await agents.findUsableToken(namespaceOf(req), uuid);
    if (!t) throw notFound("registration token");
    req.audit.object = tokenUri(t);
    return t;
  };

  for (const url of nsPaths("/api/infra/v1/{ns}token/")) {
    app.post(
      url,
      {
        config: { action: "Token Create", access: "namespace" },
        schema: {
          tags,
          summary:
            "Create a single-use, expiring token that registers a server as a node of this namespace (bring your own node); the answer holds the token and the command to run on the server, once",
          params: NsParams,
          response: { 201: CreatedRegistrationTokenView },
        },
      },
      async (req, reply) => {
        const ns = namespaceOf(req);
        const { row, token } = await agents.createToken(ns, principalOf(req).user);
        req.audit.object = tokenUri(row);
        return reply.status(201).send({ ...tokenView(row), token, command: agents.command(token) });
      },
    );
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          params: NsParams,
          summary: "List the registration tokens that can still be used (never their secret)",
          querystring: Type.Object({ ...PAGE_QUERY }),
          response: { 200: listSchema(RegistrationTokenView) },
        },
      },
      async (req) => {
        const ns = namespaceOf(req);
        const page = pageOf(req.query);
        const { rows, total } = await agents.listTokens(ns, page);
        return envelope(req, page, total, rows.map(tokenView));
      },
    );
  }

  for (const url of nsPaths("/api/infra/v1/{ns}token/:uuid/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary: "Get an unused registration token (not its secret)",
          params: UuidParams,
          response: { 200: RegistrationTokenView },
        },
      },
      async (req) => tokenView(await tokenOf(req, req.params.uuid)),
    );
    app.delete(
      url,
      {
        config: { action: "Token Revoke", access: "namespace" },
        schema: {
          tags,
          summary: "Revoke an unused registration token",
          params: UuidParams,
          response: { 204: NoContent },
        },
      },
      async (req, reply) => {
        await agents.revokeToken(await tokenOf(req, req.params.uuid));
        return reply.status(204).send();
      },
    );
  }
}
