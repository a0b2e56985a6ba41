// Authentication on every request, decided by the API area of the path (CONTRACT §2).
import type { FastifyInstance, FastifyRequest } from "fastify";
import { unauthorized } from "../domain/errors.ts";
import type { IdentityService, Principal } from "../identity/service.ts";
import { queryCredentials } from "./compat.ts";
import { areaOf } from "./context.ts";

export interface BearerVerifier {
  verify(token: string): Promise<Principal | undefined>;
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
  return identity.authenticateBasic(creds.username, creds.secret, { allowPassword: accounts });
}

export function installAuth(app: FastifyInstance, identity: IdentityService, bearer?: BearerVerifier): void {
  app.decorateRequest("principal", undefined);
  app.decorateRequest("area", "public");
  app.decorateRequest("actionUuid", undefined);
  app.decorateRequest("audit", null as never);
  app.addHook("onRequest", async (request) => {
    request.audit = {};
    request.area = areaOf(request.url.split("?")[0]!);
    if (request.area === "public" || request.routeOptions.config?.auth === "none") return;
    const principal = await authenticate(request, identity, bearer);
    if (!principal) throw unauthorized();
    request.principal = principal;
  });
}
