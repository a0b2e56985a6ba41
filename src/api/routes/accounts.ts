// Accounts API (spec accounts-api.md, CONTRACT §11): profile, email addresses and their
// verification, and the token endpoint. Each route declares its scope in `config.scope`; the auth
// hook checks it. Avatars (the profile's avatar_url) are served here too.
import { createHash } from "node:crypto";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import { MailDeliveryError } from "../../accounts/outbox.ts";
import type { Scope } from "../../accounts/scopes.ts";
import { type AccountsService, emailView, OAuthError } from "../../accounts/service.ts";
import { EmailView, ProfileView } from "../../contract/account.ts";
import { NoContent } from "../../contract/common.ts";
import { ApiError, invalidField } from "../../domain/errors.ts";
import { principalOf } from "../namespaces.ts";
import { profileView } from "./identity.ts";

const tags = ["accounts"];

const UserParams = Type.Object({ username: Type.String() });

const Address = Type.Object({ email: Type.String({ maxLength: 320 }) });

const OAuthErrorBody = Type.Object({
  error: Type.String({ description: "RFC 6749 §5.2 error code" }),
  error_description: Type.Optional(Type.String()),
  code: Type.Optional(Type.String()),
});

/** OpenAPI: Basic credentials, or a token holding `scope`. */
const security = (scope: Scope): Record<string, string[]>[] => [{ basic: [] }, { oauth2: [scope] }];

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

export interface AccountsRouteDeps {
  accounts: AccountsService;
  publicUrl: string;
}

function oauthError(reply: FastifyReply, error: OAuthError["error"], description: string) {
  return reply
    .status(400)
    .header("Cache-Control", "no-store")
    .header("Pragma", "no-cache")
    .send({ error, error_description: description, code: error });
}

/** A mail server that cannot take the message is a server-side failure: 503, and the log says why. */
async function withMailErrors<T>(request: FastifyRequest, reply: FastifyReply, fn: () => Promise<T>) {
  try {
    return await fn();
  } catch (err) {
    if (!(err instanceof MailDeliveryError)) throw err;
    request.log.error({ err }, "could not send a confirmation message");
    request.audit.failure = err.message;
    return reply.status(503).send({
      error: `The confirmation message could not be sent (${err.message}); try again later.`,
      code: "mail_unavailable",
    });
  }
}

export function accountsRoutes(untyped: FastifyInstance, deps: AccountsRouteDeps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { accounts, publicUrl } = deps;

  // ---- profile -------------------------------------------------------------------------------

  app.get(
    "/api/v1.1/users/:username/",
    {
      config: { access: "caller", scope: "profile_read" },
      schema: {
        tags,
        summary: "Get a user profile",
        security: security("profile_read"),
        params: UserParams,
        response: { 200: ProfileView },
      },
    },
    async (req) => profileView(await accounts.getProfile(principalOf(req), req.params.username), publicUrl),
  );

  app.patch(
    "/api/v1.1/users/:username/",
    {
      config: { access: "caller", scope: "profile_write" },
      schema: {
        tags,
        summary: "Update a profile: location, profile_url and company only",
        description: "Any other field is refused with 400 naming it, and nothing changes.",
        security: security("profile_write"),
        params: UserParams,
        body: Type.Object({
          location: Type.Optional(Type.String({ maxLength: 255 })),
          profile_url: Type.Optional(Type.String({ maxLength: 2048, description: "http(s) URL, or empty" })),
          company: Type.Optional(Type.String({ maxLength: 255 })),
        }),
        response: { 200: ProfileView },
      },
    },
    async (req) => {
      return profileView(
        await accounts.updateProfile(principalOf(req), req.params.username, req.body),
        publicUrl,
      );
    },
  );

  // ---- email addresses -----------------------------------------------------------------------

  app.get(
    "/api/v1.1/users/:username/emails/",
    {
      config: { access: "caller", scope: "email_read" },
      schema: {
        tags,
        summary: "List a user's email addresses (a bare array, primary first)",
        security: security("email_read"),
        params: UserParams,
        response: { 200: Type.Array(EmailView) },
      },
    },
    async (req) => (await accounts.listEmails(principalOf(req), req.params.username)).map(emailView),
  );

  app.post(
    "/api/v1.1/users/:username/emails/",
    {
      config: { access: "caller", scope: "email_write" },
      schema: {
        tags,
        summary: "Add an email address (unverified, not primary; no message is sent)",
        description:
          "A user holds at most BERTH_EMAIL_MAX_UNVERIFIED unverified addresses; one more is refused with 403 too_many_unverified_emails.",
        security: security("email_write"),
        params: UserParams,
        body: Address,
        response: { 201: EmailView },
      },
    },
    async (req, reply) => {
      const { email } = req.body;
      const row = await accounts.addEmail(principalOf(req), req.params.username, email);
      return reply.status(201).send(emailView(row));
    },
  );

  app.patch(
    "/api/v1.1/users/:username/emails/",
    {
      config: { access: "caller", scope: "email_write" },
      schema: {
        tags,
        summary: "Make a verified address the primary one (the profile's email follows)",
        security: security("email_write"),
        params: UserParams,
        body: Type.Object(
          { email: Type.String({ maxLength: 320 }), primary: Type.Boolean() },
          { additionalProperties: false },
        ),
        response: { 200: EmailView },
      },
    },
    async (req) => {
      const { email, primary } = req.body;
      if (!primary)
        throw invalidField("primary", "can only be true; make another address primary to change it");
      return emailView(await accounts.makePrimary(principalOf(req), req.params.username, email));
    },
  );

  app.delete(
    "/api/v1.1/users/:username/emails/",
    {
      config: { access: "caller", scope: "email_write" },
      // The address travels in the JSON body (accounts spec; see compat.keepsDeleteBody), or in
      // `?email=` for clients that cannot send a body with DELETE.
      preValidation: async (req) => {
        if (req.body === undefined || req.body === null) req.body = {};
      },
      schema: {
        tags,
        summary: "Delete a non-primary email address",
        description:
          "The address is given as a JSON body {email} (or ?email=). The primary address is refused with 409.",
        security: security("email_write"),
        params: UserParams,
        querystring: Type.Object({ email: Type.Optional(Type.String()) }),
        body: Type.Object({ email: Type.Optional(Type.String({ maxLength: 320 })) }),
        response: { 204: NoContent },
      },
    },
    async (req, reply) => {
      const email = req.body.email ?? req.query.email;
      if (email === undefined) throw invalidField("email", "is required");
      await accounts.deleteEmail(principalOf(req), req.params.username, email);
      return reply.status(204).send();
    },
  );

  app.post(
    "/api/v1.1/users/:username/emails/verify/",
    {
      config: { access: "caller", scope: "email_write" },
      schema: {
        tags,
        summary: "Send a one-time confirmation token to an unverified address",
        description:
          "The token goes out through the mail outbox (SMTP when BERTH_SMTP_URL is set, otherwise the server log). " +
          "One message per address per BERTH_EMAIL_VERIFY_INTERVAL_S, and per hour at most BERTH_EMAIL_VERIFY_MAX_PER_USER " +
          "per user and BERTH_EMAIL_VERIFY_MAX_PER_ADDRESS per receiving mailbox (429 with Retry-After); " +
          "a new token replaces the previous one.",
        security: security("email_write"),
        params: UserParams,
        body: Address,
        response: { 200: EmailView },
      },
    },
    async (req, reply) =>
      withMailErrors(req, reply, async () => {
        const { email } = req.body;
        return emailView(await accounts.sendVerification(principalOf(req), req.params.username, email));
      }),
  );

  app.post(
    "/api/v1.1/emails/confirm/",
    {
      // The token itself is the credential: whoever reads the mailbox may confirm it.
      config: { access: "public" },
      schema: {
        tags,
        summary: "Confirm an address with the token it received (single use)",
        security: [],
        body: Type.Object({ token: Type.String({ minLength: 1, maxLength: 200 }) }),
        response: { 200: EmailView },
      },
    },
    async (req) => emailView(await accounts.confirmEmail(req.body.token)),
  );

  // ---- token endpoint ------------------------------------------------------------------------

  app.post(
    "/oauth/token",
    {
      config: { access: "public" },
      // Token endpoint errors have the RFC 6749 §5.2 shape, including malformed bodies.
      errorHandler: (error: FastifyError, _req, reply) => {
        if (error instanceof OAuthError) return oauthError(reply, error.error, error.description);
        // A parameter of the wrong type (input.ts): still an RFC 6749 invalid_request.
        if (error instanceof ApiError && error.kind === "bad_request")
          return oauthError(reply, "invalid_request", error.message);
        if (error instanceof SyntaxError || error.code === "FST_ERR_CTP_INVALID_JSON_BODY")
          return oauthError(reply, "invalid_request", "The body is neither valid JSON nor a form.");
        throw error;
      },
      // The handler checks the parameters itself, to answer in the RFC's terms.
      attachValidation: true,
      schema: {
        tags,
        summary: "Get an access token (password grant)",
        description:
          "Form (application/x-www-form-urlencoded) or JSON body. Errors as RFC 6749 §5.2: " +
          "invalid_request, invalid_grant, invalid_scope, unsupported_grant_type (400). " +
          "Failed sign-ins are limited per user and per address (429 with Retry-After).",
        security: [],
        body: Type.Object({
          grant_type: Type.Optional(Type.String({ description: "password" })),
          username: Type.Optional(Type.String()),
          password: Type.Optional(Type.String()),
          scope: Type.Optional(Type.String({ description: "space-separated scopes" })),
        }),
        response: {
          200: Type.Object({
            access_token: Type.String(),
            token_type: Type.Literal("Bearer"),
            expires_in: Type.Integer({ description: "seconds" }),
            scope: Type.String(),
          }),
          400: OAuthErrorBody,
        },
      },
    },
    async (req, reply) => {
      // attachValidation: the body may be anything here, whatever its declared type says.
      const body: unknown = req.body;
      if (!isRecord(body))
        throw new OAuthError("invalid_request", "The body must be a form or a JSON object.");
      const token = await accounts.issueToken(body, req.ip);
      return reply.header("Cache-Control", "no-store").header("Pragma", "no-cache").send(token);
    },
  );

  // ---- avatars -------------------------------------------------------------------------------

  app.get(
    "/avatars/:file",
    {
      config: { access: "public" },
      schema: {
        tags,
        summary: "A user's avatar (an SVG with the initial); public",
        security: [],
        params: Type.Object({ file: Type.String() }),
        response: { 200: Type.String({ description: "image/svg+xml" }) },
      },
    },
    async (req, reply) => {
      const m = /^(.+)\.svg$/.exec(req.params.file);
      if (!m) throw new ApiError("not_found", "not_found", "No such avatar.");
      // Drawn from the name alone, for any name, so the URL says nothing about who exists.
      const name = m[1]!;
      const hue = createHash("sha256").update(name).digest()[0]! * (360 / 256);
      const initial = (name.match(/[a-z0-9]/i)?.[0] ?? "?").toUpperCase();
      const svg =
        `<svg xmlns="http://www.w3.org/2000/svg" width="96" height="96" viewBox="0 0 96 96">` +
        `<rect width="96" height="96" rx="48" fill="hsl(${Math.round(hue)},55%,45%)"/>` +
        `<text x="48" y="62" font-family="sans-serif" font-size="44" text-anchor="middle" fill="#fff">${initial}</text></svg>`;
      return reply
        .header("Content-Type", "image/svg+xml")
        .header("Cache-Control", "public, max-age=86400")
        .send(svg);
    },
  );
}
