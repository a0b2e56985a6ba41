// Users, API keys and organizations (CONTRACT §3, Berth extensions under the accounts prefix),
// and `GET /auth/` (CONTRACT §2).
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { forbidden, notFound } from "../../domain/errors.ts";
import { accountsTime } from "../../domain/time.ts";
import type { IdentityService } from "../../identity/service.ts";
import type { ApiKeyRow, Store, UserRow } from "../../store/store.ts";
import { principalOf } from "../namespaces.ts";

const tags = ["users and organizations"];

export function profileView(u: UserRow, publicUrl: string) {
  return {
    id: u.id,
    username: u.username,
    url: `${publicUrl}/api/v1.1/users/${u.username}/`,
    date_joined: accountsTime(u.date_joined),
    type: "User",
    full_name: u.full_name,
    location: u.location,
    company: u.company,
    profile_url: u.profile_url,
    avatar_url: `${publicUrl}/avatars/${u.username}.svg`,
    email: u.email,
    is_active: u.is_active === 1,
  };
}

function keyView(k: ApiKeyRow) {
  return { id: k.id, label: k.label, created: accountsTime(k.created) };
}

interface Deps {
  store: Store;
  identity: IdentityService;
  publicUrl: string;
}

export function identityRoutes(app: FastifyInstance, deps: Deps): void {
  const { store, identity, publicUrl } = deps;

  app.get(
    "/auth/",
    {
      schema: {
        tags,
        summary: "Check credentials",
        response: { 200: Type.Object({ username: Type.String(), namespaces: Type.Array(Type.String()) }) },
      },
    },
    async (req) => {
      const p = principalOf(req);
      return { username: p.user.username, namespaces: await identity.namespacesOf(p) };
    },
  );

  app.post(
    "/api/v1.1/users/",
    {
      schema: {
        tags,
        summary: "Create a user (admins)",
        body: Type.Object({
          username: Type.String(),
          email: Type.String(),
          password: Type.String(),
          full_name: Type.Optional(Type.String()),
          is_admin: Type.Optional(Type.Boolean()),
        }),
      },
    },
    async (req, reply) => {
      const p = principalOf(req);
      if (!p.user.is_admin || p.namespaceLimit)
        throw forbidden("Only administrators can create users.", "admin_only");
      const body = req.body as {
        username: string;
        email: string;
        password: string;
        full_name?: string;
        is_admin?: boolean;
      };
      const user = await identity.createUser(body);
      return reply.status(201).send(profileView(user, publicUrl));
    },
  );

  const UserParams = Type.Object({ username: Type.String() });

  app.get(
    "/api/v1.1/users/:username/apikeys/",
    { schema: { tags, summary: "List a user's API keys (never their secrets)", params: UserParams } },
    async (req) => {
      const user = await identity.userForCaller(
        principalOf(req),
        (req.params as { username: string }).username,
      );
      const keys = await store.listApiKeys(user.id);
      return { objects: keys.filter((k) => k.service_uuid === null).map(keyView) };
    },
  );

  app.post(
    "/api/v1.1/users/:username/apikeys/",
    {
      // The body is optional (`{label?}`): a bare POST creates an unlabelled key.
      preValidation: async (req) => {
        if (req.body === undefined || req.body === null) req.body = {};
      },
      schema: {
        tags,
        summary: "Create an API key; the key is shown only in this response",
        params: UserParams,
        body: Type.Optional(Type.Object({ label: Type.Optional(Type.String({ maxLength: 200 })) })),
      },
    },
    async (req, reply) => {
      const user = await identity.userForCaller(
        principalOf(req),
        (req.params as { username: string }).username,
      );
      const label = (req.body as { label?: string } | undefined)?.label;
      const { row, key } = await identity.createApiKey(user, { label });
      return reply.status(201).send({ ...keyView(row), key });
    },
  );

  app.delete(
    "/api/v1.1/users/:username/apikeys/:id/",
    {
      schema: {
        tags,
        summary: "Revoke an API key",
        params: Type.Object({ username: Type.String(), id: Type.Integer() }),
      },
    },
    async (req, reply) => {
      const { username, id } = req.params as { username: string; id: number };
      const user = await identity.userForCaller(principalOf(req), username);
      if (!(await identity.revokeApiKey(user, id))) throw notFound("API key");
      return reply.status(204).send();
    },
  );

  app.post(
    "/api/v1.1/orgs/",
    {
      schema: {
        tags,
        summary: "Create an organization; the caller becomes its owner",
        body: Type.Object({ name: Type.String() }),
      },
    },
    async (req, reply) => {
      const p = principalOf(req);
      const { name } = req.body as { name: string };
      await identity.createOrg(p, name);
      return reply.status(201).send(await identity.getOrg(p, name));
    },
  );

  const OrgParams = Type.Object({ org: Type.String() });
  app.get(
    "/api/v1.1/orgs/:org/",
    { schema: { tags, summary: "Get an organization", params: OrgParams } },
    async (req) => identity.getOrg(principalOf(req), (req.params as { org: string }).org),
  );

  app.post(
    "/api/v1.1/orgs/:org/members/",
    {
      schema: {
        tags,
        summary: "Add a member or change a member's role (owners)",
        params: OrgParams,
        body: Type.Object({
          username: Type.String(),
          role: Type.Optional(
            Type.Union([Type.Literal("owner"), Type.Literal("member")], { default: "member" }),
          ),
        }),
      },
    },
    async (req, reply) => {
      const p = principalOf(req);
      const { org } = req.params as { org: string };
      const body = req.body as { username: string; role?: "owner" | "member" };
      await identity.addMember(p, org, body.username, body.role ?? "member");
      return reply.status(201).send(await identity.getOrg(p, org));
    },
  );

  app.delete(
    "/api/v1.1/orgs/:org/members/:username/",
    {
      schema: {
        tags,
        summary: "Remove a member (owners)",
        params: Type.Object({ org: Type.String(), username: Type.String() }),
      },
    },
    async (req, reply) => {
      const { org, username } = req.params as { org: string; username: string };
      await identity.removeMember(principalOf(req), org, username);
      return reply.status(204).send();
    },
  );
}
