// Authentication on every request, decided by the API area of the path (CONTRACT §2).
import type { FastifyInstance, FastifyRequest } from "fastify";
import { authorizeAccountsCall } from "../accounts/scopes.ts";
import { unauthorized } from "../domain/errors.ts";
import type { IdentityService, Principal } from "../identity/service.ts";
import { queryCredentials } from "./compat.ts";
import { areaOf } from "./context.ts";
import { type SessionVerifier, sessionPrincipal } from "./session.ts";

export interface BearerVerifier {
  verify(token: string): Promise<Principal | undefined>;
}

/** Failed sign-in limits around password checks (accounts/limiter.ts); throws 429 while locked out. */
export interface PasswordGuard {
  guard<T>(username: string, address: string, attempt: () => Promise<T | undefined>): Promise<T | undefined>;
}

export function parseBasic(header: string | undefined): { username: string; secret: string } | undefined {
  const m = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header ?? "");
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, "base64").toString("utf8");
  const i = decoded.indexOf(":");
  if (i <= 0) return undefined;
  return { username: decoded.slice(0, i), secret: decoded.slice(i + 1) };
}

export async function authenticate(
  request: FastifyRequest,
  identity: IdentityService,
  bearer?: BearerVerifier,
  passwords?: PasswordGuard,
): Promise<Principal | undefined> {
  const header = request.headers.authorization;
  const accounts = request.area === "accounts";
  const bearerMatch = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  if (bearerMatch) return accounts && bearer ? bearer.verify(bearerMatch[1]!) : undefined;
  const creds =
    parseBasic(header) ??
    (request.headers.upgrade?.toLowerCase() === "websocket"
      ? queryCredentials(request.query as Record<string, unknown>)
      : undefined);
  if (!creds) return undefined;
  if (!accounts || !passwords)
    return identity.authenticateBasic(creds.username, creds.secret, { allowPassword: accounts });
  // A valid API key is never limited: keys are random, and someone guessing the password must not
  // lock the key holder out. Anything else is a password attempt and counts against the limits.
  const byKey = await identity.authenticateBasic(creds.username, creds.secret, { allowPassword: false });
  if (byKey) return byKey;
  return passwords.guard(creds.username, request.ip, () =>
    identity.authenticateBasic(creds.username, creds.secret, { allowPassword: true }),
  );
}

/** Credentials a program sends: a header, or (streams) the query. */
function carriesCredentials(request: FastifyRequest): boolean {
  return (
    request.headers.authorization !== undefined ||
    (request.headers.upgrade?.toLowerCase() === "websocket" &&
      queryCredentials(request.query as Record<string, unknown>) !== undefined)
  );
}

export function installAuth(
  app: FastifyInstance,
  identity: IdentityService,
  bearer?: BearerVerifier,
  passwords?: PasswordGuard,
  sessions?: SessionVerifier,
): void {
  app.decorateRequest("principal", undefined);
  app.decorateRequest("area", "public");
  app.decorateRequest("actionUuid", undefined);
  app.decorateRequest("audit", null as never);
  app.addHook("onRequest", async (request) => {
    request.audit = {};
    request.area = areaOf(request.url.split("?")[0]!);
    if (request.area === "public" || request.routeOptions.config?.access === "public") return;
    // Programs authenticate with what they send; a browser without credentials, with its session
    // cookie (and the CSRF defence, api/session.ts).
    const principal =
      !carriesCredentials(request) && sessions
        ? await sessionPrincipal(request, sessions)
        : await authenticate(request, identity, bearer, passwords);
    if (!principal) throw unauthorized();
    request.principal = principal;
    // Scopes are checked on routes that exist; an unknown path or method keeps its 404 or 405.
    const config = request.routeOptions.config;
    if (request.area === "accounts" && !request.is404 && !config?.fallback)
      authorizeAccountsCall(principal, config?.scope);
  });
}
