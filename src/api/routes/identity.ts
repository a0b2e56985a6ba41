// Users, API keys and organizations (CONTRACT §3, Berth extensions under the accounts prefix),
// and `GET /auth/` (CONTRACT §2).
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import {
  ApiKeyView,
  AuthView,
  CreatedApiKeyView,
  InvitationList,
  InvitationView,
  OrganizationView,
  ProfileView,
} from "../../contract/account.ts";
import { NoContent } from "../../contract/common.ts";
import { notFound } from "../../domain/errors.ts";
import { accountsTime } from "../../domain/time.ts";
import type { IdentityService } from "../../identity/service.ts";
import type { ApiKeyRow, InvitationRow, Store, UserRow } from "../../store/store.ts";
import { answerOfWritten } from "../errors.ts";
import { envelope, listSchema, PAGE_QUERY, pageOf } from "../lists.ts";
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

function invitationView(i: InvitationRow, state: "pending" | "accepted") {
  return {
    org: i.org,
    username: i.username,
    role: i.role,
    state,
    invited_by: i.invited_by,
    created: accountsTime(i.created),
  };
}

interface Deps {
  store: Store;
  identity: IdentityService;
  publicUrl: string;
}

export function identityRoutes(untyped: FastifyInstance, deps: Deps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { store, identity, publicUrl } = deps;

  app.get(
    "/auth/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "Check credentials",
        response: { 200: AuthView },
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
      config: { access: { admin: "Only administrators can create users." } },
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
        response: { 201: ProfileView },
      },
    },
    async (req, reply) => {
      const user = await identity.createUser(req.body);
      return reply.status(201).send(profileView(user, publicUrl));
    },
  );

  app.get(
    "/api/v1.1/users/",
    {
      config: { access: { admin: "Only administrators can list users." } },
      schema: {
        tags,
        summary: "List users (admins), in the order they joined",
        querystring: Type.Object({
          ...PAGE_QUERY,
          username__icontains: Type.Optional(
            Type.String({ minLength: 1, maxLength: 200, description: "usernames containing this, any case" }),
          ),
        }),
        response: { 200: listSchema(Type.Object({ ...ProfileView.properties, is_admin: Type.Boolean() })) },
      },
    },
    async (req) => {
      const page = pageOf(req.query);
      const { rows, total } = await store.identity.listUsers({
        nameContains: req.query.username__icontains,
        ...page,
      });
      return envelope(
        req,
        page,
        total,
        rows.map((u) => ({ ...profileView(u, publicUrl), is_admin: u.is_admin === 1 })),
      );
    },
  );

  const UserParams = Type.Object({ username: Type.String() });

  app.get(
    "/api/v1.1/users/:username/apikeys/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "List a user's API keys (never their secrets)",
        params: UserParams,
        response: { 200: Type.Object({ objects: Type.Array(ApiKeyView) }) },
      },
    },
    async (req) => {
      const user = await identity.userForCaller(principalOf(req), req.params.username);
      const keys = await store.identity.listApiKeys(user.id);
      return { objects: keys.filter((k) => k.service_uuid === null).map(keyView) };
    },
  );

  app.post(
    "/api/v1.1/users/:username/apikeys/",
    {
      config: { access: "caller" },
      // The body is optional (`{label?}`): a bare POST creates an unlabelled key.
      preValidation: async (req) => {
        if (req.body === undefined || req.body === null) req.body = {};
      },
      schema: {
        tags,
        summary: "Create an API key; the key is shown only in this response",
        params: UserParams,
        body: Type.Optional(Type.Object({ label: Type.Optional(Type.String({ maxLength: 200 })) })),
        response: { 201: CreatedApiKeyView },
      },
    },
    async (req, reply) => {
      const user = await identity.userForCaller(principalOf(req), req.params.username);
      const label = req.body?.label;
      const { row, key } = await identity.createApiKey(user, { label });
      return reply.status(201).send({ ...keyView(row), key });
    },
  );

  app.delete(
    "/api/v1.1/users/:username/apikeys/:id/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "Revoke an API key",
        params: Type.Object({ username: Type.String(), id: Type.Integer() }),
        response: { 204: NoContent },
      },
    },
    async (req, reply) => {
      const { username, id } = req.params;
      const user = await identity.userForCaller(principalOf(req), username);
      if (!(await identity.revokeApiKey(user, id))) throw notFound("API key");
      return reply.status(204).send();
    },
  );

  app.post(
    "/api/v1.1/orgs/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "Create an organization; the caller becomes its owner",
        body: Type.Object({ name: Type.String() }),
        response: { 201: OrganizationView },
      },
    },
    async (req, reply) => {
      const p = principalOf(req);
      const { name } = req.body;
      await identity.createOrg(p, name);
      return reply.status(201).send(await answerOfWritten(() => identity.getOrg(p, name)));
    },
  );

  const OrgParams = Type.Object({ org: Type.String() });
  app.get(
    "/api/v1.1/orgs/:org/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "Get an organization",
        params: OrgParams,
        response: { 200: OrganizationView },
      },
    },
    async (req) => identity.getOrg(principalOf(req), req.params.org),
  );

  const Role = Type.Union([Type.Literal("owner"), Type.Literal("member")], { default: "member" });
  app.post(
    "/api/v1.1/orgs/:org/members/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "Invite a user (owners); the user becomes a member on accepting",
        description:
          "Answers 201 with a pending invitation, the same for every username (a name that is no user gets an invitation nobody can accept). " +
          "A member's role is changed at once (state accepted). Administrators may add a member at once with `direct: true`.",
        params: OrgParams,
        body: Type.Object({
          username: Type.String({ maxLength: 200 }),
          role: Type.Optional(Role),
          direct: Type.Optional(Type.Boolean({ description: "administrators only: add at once" })),
        }),
        response: { 201: InvitationView },
      },
    },
    async (req, reply) => {
      const { org } = req.params;
      const body = req.body;
      const { invitation, state } = await identity.invite(principalOf(req), org, {
        username: body.username,
        role: body.role ?? "member",
        direct: body.direct,
      });
      return reply.status(201).send(invitationView(invitation, state));
    },
  );

  app.get(
    "/api/v1.1/orgs/:org/invitations/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "List an organization's pending invitations (owners)",
        params: OrgParams,
        response: { 200: InvitationList },
      },
    },
    async (req) => {
      const rows = await identity.orgInvitations(principalOf(req), req.params.org);
      return { objects: rows.map((i) => invitationView(i, "pending")) };
    },
  );

  app.delete(
    "/api/v1.1/orgs/:org/invitations/:username/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "Withdraw a pending invitation (owners)",
        params: Type.Object({ org: Type.String(), username: Type.String() }),
        response: { 204: NoContent },
      },
    },
    async (req, reply) => {
      const { org, username } = req.params;
      if (!(await identity.revokeInvitation(principalOf(req), org, username))) throw notFound("invitation");
      return reply.status(204).send();
    },
  );

  app.get(
    "/api/v1.1/users/:username/invitations/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "List the invitations a user may accept",
        params: UserParams,
        response: { 200: InvitationList },
      },
    },
    async (req) => {
      const user = await identity.userForCaller(principalOf(req), req.params.username);
      const rows = await identity.invitationsOf(user);
      return { objects: rows.map((i) => invitationView(i, "pending")) };
    },
  );

  const InvitationParams = Type.Object({ username: Type.String(), org: Type.String() });
  app.post(
    "/api/v1.1/users/:username/invitations/:org/accept/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "Accept an invitation: the user becomes a member with the invitation's role",
        params: InvitationParams,
        response: { 200: OrganizationView },
      },
    },
    async (req) => {
      const p = principalOf(req);
      const user = await identity.userForCaller(p, req.params.username);
      await identity.acceptInvitation(user, req.params.org);
      return identity.getOrg({ ...p, user }, req.params.org);
    },
  );

  for (const [method, url] of [
    ["POST", "/api/v1.1/users/:username/invitations/:org/decline/"],
    ["DELETE", "/api/v1.1/users/:username/invitations/:org/"],
  ] as const) {
    app.route({
      method,
      url,
      config: { access: "caller" },
      schema: {
        tags,
        summary: "Decline an invitation",
        params: InvitationParams,
        response: { 204: NoContent },
      },
      handler: async (req, reply) => {
        const user = await identity.userForCaller(principalOf(req), req.params.username);
        await identity.declineInvitation(user, req.params.org);
        return reply.status(204).send();
      },
    });
  }

  app.delete(
    "/api/v1.1/orgs/:org/members/:username/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "Remove a member (owners), or leave (the member itself)",
        params: Type.Object({ org: Type.String(), username: Type.String() }),
        response: { 204: NoContent },
      },
    },
    async (req, reply) => {
      const { org, username } = req.params;
      await identity.removeMember(principalOf(req), org, username);
      return reply.status(204).send();
    },
  );
}
