// Dashboard sign-in (issue 12): POST signs in with username and password and sets the session
// cookie; GET tells the page who is signed in and the session's CSRF token; DELETE signs out.
// Programs keep using API keys; these routes exist for browsers.
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { SessionCheck, SessionService } from "../../accounts/sessions.ts";
import { NoContent } from "../../contract/common.ts";
import { SessionView } from "../../contract/session.ts";
import { ApiError } from "../../domain/errors.ts";
import type { IdentityService, Principal } from "../../identity/service.ts";
import {
  clearSessionCookie,
  type SessionVerifier,
  sameOrigin,
  sessionPrincipal,
  sessionTokenOf,
  setSessionCookie,
} from "../session.ts";

const tags = ["dashboard session"];

const NoSession = Type.Object({ error: Type.String(), code: Type.String() });
const SignedOut = Type.Object(
  { signed_in: Type.Literal(false) },
  { description: "no session, or it ended (a page asks before it knows; not an error)" },
);

export interface SessionRouteDeps {
  sessions: SessionService & SessionVerifier;
  identity: IdentityService;
  /** Cookies are Secure when Berth is reached over HTTPS. */
  secureCookies: boolean;
  ttlS: number;
}

export const SESSION_PATH = "/api/session/";

export function sessionRoutes(untyped: FastifyInstance, deps: SessionRouteDeps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const view = async (p: Principal, s: { csrfToken: string; expiresMs: number }) => ({
    signed_in: true as const,
    username: p.user.username,
    is_admin: p.user.is_admin === 1,
    namespaces: await deps.identity.namespacesOf(p),
    csrf_token: s.csrfToken,
    expires: new Date(s.expiresMs).toISOString(),
  });

  app.post(
    SESSION_PATH,
    {
      config: { access: "public" },
      schema: {
        tags,
        summary: "Sign in to the dashboard",
        description:
          "Username and password (not an API key). Sets an HttpOnly, SameSite=Strict cookie. Failed attempts are limited like every password sign-in (429 with Retry-After).",
        security: [],
        body: Type.Object({
          username: Type.String({ minLength: 1, maxLength: 150 }),
          password: Type.String({ minLength: 1, maxLength: 1024 }),
        }),
        response: { 200: SessionView, 401: NoSession, 429: NoSession },
      },
    },
    async (req, reply) => {
      // A page of another site may not sign a browser into an account (login CSRF).
      if (req.headers.origin && !sameOrigin(req))
        throw new ApiError("forbidden", "csrf_refused", "Sign in from a page of this server.");
      const body = req.body;
      const signed = await deps.sessions.signIn({
        username: body.username,
        password: body.password,
        address: req.ip,
        userAgent: req.headers["user-agent"] ?? "",
      });
      setSessionCookie(reply, signed.token, { maxAgeS: deps.ttlS, secure: deps.secureCookies });
      reply.header("Cache-Control", "no-store");
      return view(signed.principal, signed);
    },
  );

  app.get(
    SESSION_PATH,
    {
      config: { access: "public" },
      schema: {
        tags,
        summary: "The signed-in user of this browser and the session's CSRF token",
        security: [],
        response: { 200: Type.Union([SessionView, SignedOut]) },
      },
    },
    async (req, reply) => {
      const token = sessionTokenOf(req);
      const s: SessionCheck | undefined = token ? await deps.sessions.check(token) : undefined;
      reply.header("Cache-Control", "no-store");
      if (!s) return { signed_in: false as const };
      return view(s.principal, s);
    },
  );

  app.delete(
    SESSION_PATH,
    {
      config: { access: "public" },
      schema: {
        tags,
        summary: "Sign out: the session ends at once, on the API and on every stream",
        description: "Needs X-CSRF-Token like every change made with the cookie. 204, the cookie is cleared.",
        security: [],
        response: { 204: NoContent },
      },
    },
    async (req, reply) => {
      const token = sessionTokenOf(req);
      // Refuses (403) a sign-out without the CSRF token: another site may not end a session.
      if (token && (await sessionPrincipal(req, deps.sessions))) await deps.sessions.signOut(token);
      clearSessionCookie(reply, deps.secureCookies);
      return reply.status(204).send();
    },
  );
}
