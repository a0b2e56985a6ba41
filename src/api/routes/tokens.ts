// Node registration tokens (issue 15): `POST /api/infra/v1/[ns/]token/` is the historical CLI's
// `node byo` call; it answers `{token, command, …}` once. Listing shows the tokens still usable
// (never their secret); revoking deletes one.
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Type } from "typebox";
import { notFound } from "../../domain/errors.ts";
import { restTime } from "../../domain/time.ts";
import type { IdentityService } from "../../identity/service.ts";
import { type AgentNodes, tokenUri } from "../../nodes/agents.ts";
import type { RegistrationTokenRow } from "../../store/agents.ts";
import { envelope, listSchema, PAGE_QUERY, pageOf } from "../lists.ts";
import { namespaceOf, principalOf } from "../namespaces.ts";
import { uuidParam } from "../objects.ts";
import { nsPaths } from "../routing.ts";

interface Deps {
  identity: IdentityService;
  agents: AgentNodes;
}

const TokenSchema = Type.Object({
  uuid: Type.String(),
  resource_uri: Type.String(),
  created: Type.Union([Type.String(), Type.Null()]),
  expires: Type.Union([Type.String(), Type.Null()]),
  created_by: Type.String(),
});
const CreatedTokenSchema = Type.Object({
  ...TokenSchema.properties,
  token: Type.String({ description: "the registration token; shown only in this answer" }),
  command: Type.String({ description: "what to run on the server that becomes a node" }),
});
const UuidParams = Type.Object({ uuid: Type.String(), namespace: Type.Optional(Type.String()) });

function tokenView(t: RegistrationTokenRow) {
  return {
    uuid: t.uuid,
    resource_uri: tokenUri(t),
    created: restTime(t.created),
    expires: restTime(t.expires),
    created_by: t.created_by,
  };
}

export function tokenRoutes(app: FastifyInstance, deps: Deps): void {
  const { identity, agents } = deps;
  const tags = ["node clusters and nodes"];

  const tokenOf = async (req: FastifyRequest): Promise<RegistrationTokenRow> => {
    const ns = await namespaceOf(req, identity);
    const t = await agents.findUsableToken(ns, uuidParam(req));
    if (!t) throw notFound("registration token");
    req.audit.object = tokenUri(t);
    return t;
  };

  for (const url of nsPaths("/api/infra/v1/{ns}token/")) {
    app.post(
      url,
      {
        config: { action: "Token Create" },
        schema: {
          tags,
          summary:
            "Create a single-use, expiring token that registers a server as a node of this namespace (bring your own node); the answer holds the token and the command to run on the server, once",
          response: { 201: CreatedTokenSchema },
        },
      },
      async (req, reply) => {
        const ns = await namespaceOf(req, identity);
        const { row, token } = await agents.createToken(ns, principalOf(req).user.username);
        req.audit.object = tokenUri(row);
        return reply.status(201).send({ ...tokenView(row), token, command: agents.command(token) });
      },
    );
    app.get(
      url,
      {
        schema: {
          tags,
          summary: "List the registration tokens that can still be used (never their secret)",
          querystring: Type.Object({ ...PAGE_QUERY }),
          response: { 200: listSchema(TokenSchema) },
        },
      },
      async (req) => {
        const ns = await namespaceOf(req, identity);
        const page = pageOf(req.query as { limit?: number; offset?: number });
        const { rows, total } = await agents.listTokens(ns, page);
        return envelope(req, page, total, rows.map(tokenView));
      },
    );
  }

  for (const url of nsPaths("/api/infra/v1/{ns}token/:uuid/")) {
    app.get(
      url,
      {
        schema: {
          tags,
          summary: "Get an unused registration token (not its secret)",
          params: UuidParams,
          response: { 200: TokenSchema },
        },
      },
      async (req) => tokenView(await tokenOf(req)),
    );
    app.delete(
      url,
      {
        config: { action: "Token Revoke" },
        schema: { tags, summary: "Revoke an unused registration token", params: UuidParams },
      },
      async (req, reply) => {
        await agents.revokeToken(await tokenOf(req));
        return reply.status(204).send();
      },
    );
  }
}
