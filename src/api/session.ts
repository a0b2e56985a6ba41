// The dashboard's browser session on the HTTP side: the cookie, and the CSRF defence that must
// accompany it. A cookie alone never authorizes a change: non-GET calls also carry the session's
// CSRF token in a header (a page of another site cannot read it), and a WebSocket upgrade (which
// can carry no header) must come from a page of this very host (Origin checked against Host).
import type { FastifyReply, FastifyRequest } from "fastify";
import { type SessionCheck, sameSecret } from "../accounts/sessions.ts";
import { ApiError } from "../domain/errors.ts";
import type { Principal } from "../identity/service.ts";

export const SESSION_COOKIE = "berth_session";
export const CSRF_HEADER = "x-csrf-token";
/** Sent by the dashboard on every call: a 401 then carries no Basic challenge (no browser dialog). */
export const DASHBOARD_HEADER = "x-requested-with";
export const DASHBOARD_CLIENT = "berth-dashboard";

export interface SessionVerifier {
  check(token: string): Promise<SessionCheck | undefined>;
}

export function isDashboardCall(request: FastifyRequest): boolean {
  return request.headers[DASHBOARD_HEADER] === DASHBOARD_CLIENT;
}

export function sessionTokenOf(request: FastifyRequest): string | undefined {
  const token = request.cookies?.[SESSION_COOKIE];
  return token && /^[A-Za-z0-9_-]{20,100}$/.test(token) ? token : undefined;
}

function csrfRefused(message: string): ApiError {
  return new ApiError("forbidden", "csrf_refused", message);
}

/** True when the request's Origin names the host it was sent to (same origin). */
export function sameOrigin(request: FastifyRequest): boolean {
  const origin = request.headers.origin;
  const host = request.headers.host;
  if (!origin || !host) return false;
  try {
    return new URL(origin).host === host;
  } catch {
    return false;
  }
}

/**
 * The principal of a session cookie, once the CSRF rules hold; undefined without a (valid) session.
 * Throws 403 when the session is valid but the call lacks its CSRF defence.
 */
export async function sessionPrincipal(
  request: FastifyRequest,
  sessions: SessionVerifier,
): Promise<Principal | undefined> {
  const token = sessionTokenOf(request);
  if (!token) return undefined;
  const session = await sessions.check(token);
  if (!session) return undefined;
  if (request.headers.upgrade?.toLowerCase() === "websocket") {
    if (!sameOrigin(request))
      throw csrfRefused(
        "A stream opened with the session cookie must come from a page of this server (Origin).",
      );
    return session.principal;
  }
  if (request.method === "GET" || request.method === "HEAD" || request.method === "OPTIONS")
    return session.principal;
  const sent = request.headers[CSRF_HEADER];
  if (typeof sent !== "string" || !sameSecret(sent, session.csrfToken))
    throw csrfRefused(
      `A change made with the session cookie needs the session's CSRF token in ${CSRF_HEADER}.`,
    );
  if (request.headers.origin && !sameOrigin(request))
    throw csrfRefused("A change made with the session cookie must come from a page of this server (Origin).");
  return session.principal;
}

export function setSessionCookie(
  reply: FastifyReply,
  token: string,
  opts: { maxAgeS: number; secure: boolean },
): void {
  reply.setCookie(SESSION_COOKIE, token, {
    path: "/",
    httpOnly: true,
    sameSite: "strict",
    secure: opts.secure,
    maxAge: opts.maxAgeS,
  });
}

export function clearSessionCookie(reply: FastifyReply, secure: boolean): void {
  reply.clearCookie(SESSION_COOKIE, { path: "/", httpOnly: true, sameSite: "strict", secure });
}
