// Where access ends on a user's or an administrator's request (issue 26): a password change (the
// old password required for one's own), sign-out everywhere, and deactivation and activation of
// users by administrators. Accounts-API calls (CONTRACT §3 style, under /api/v1.1/users/); like the
// API-key routes they need Basic credentials or the dashboard session (no Bearer token, no service
// key). What each ends: accounts/access-ends.ts.
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { AccessEnds } from "../../accounts/access-ends.ts";
import { PasswordChangedView } from "../../contract/access.ts";
import { ProfileView } from "../../contract/account.ts";
import { NoContent } from "../../contract/common.ts";
import { principalOf } from "../namespaces.ts";
import { profileView } from "./identity.ts";

const tags = ["users and organizations"];
const UserParams = Type.Object({ username: Type.String() });

export interface AccessRouteDeps {
  access: AccessEnds;
  publicUrl: string;
}

export function accessRoutes(untyped: FastifyInstance, deps: AccessRouteDeps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { access, publicUrl } = deps;

  app.post(
    "/api/v1.1/users/:username/password/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "Change a password; every other session and access token of the user ends",
        description:
          "A user changing its own password gives `old_password` (a wrong one is 403 `wrong_password` and counts as a failed sign-in); administrators reset another user's without it. Every session (but the dashboard session the change is made from) and every Bearer access token of the user ends at once, their streams too; API keys stay.",
        params: UserParams,
        body: Type.Object({
          old_password: Type.Optional(Type.String({ maxLength: 1024 })),
          new_password: Type.String({ minLength: 1, maxLength: 1024 }),
        }),
        response: { 200: PasswordChangedView },
      },
    },
    async (req) => access.changePassword(principalOf(req), req.params.username, req.body, req.ip),
  );

  app.delete(
    "/api/v1.1/users/:username/sessions/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "Sign out everywhere: every dashboard session and access token of the user ends",
        description:
          "The sessions' open streams close with 1008 at once, on every replica. API keys stay. The user itself or an administrator.",
        params: UserParams,
        response: { 204: NoContent },
      },
    },
    async (req, reply) => {
      await access.signOutEverywhere(principalOf(req), req.params.username);
      return reply.status(204).send();
    },
  );

  for (const [verb, active] of [
    ["deactivate", false],
    ["activate", true],
  ] as const) {
    app.post(
      `/api/v1.1/users/:username/${verb}/`,
      {
        config: { access: { admin: `Only administrators can ${verb} users.` } },
        schema: {
          tags,
          summary: active
            ? "Activate a user again (administrators): its API keys work again; it signs in anew"
            : "Deactivate a user (administrators): its keys, sessions, tokens and streams refuse at once",
          description: active
            ? "Sessions and access tokens ended by the deactivation stay ended."
            : "Sessions and access tokens are deleted; API keys stay but are refused (401) while the user is inactive; open streams close with 1008; sign-in answers as for a wrong password; registration tokens and triggers the user made refuse; the service keys of the user's organizations are rotated. An administrator cannot deactivate itself (409).",
          params: UserParams,
          response: { 200: ProfileView },
        },
      },
      async (req) =>
        profileView(await access.setActive(principalOf(req), req.params.username, active), publicUrl),
    );
  }
}
