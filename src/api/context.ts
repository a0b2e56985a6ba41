// What the HTTP layer knows about a request beyond Fastify's own fields.
import type { Scope } from "../accounts/scopes.ts";
import type { Principal } from "../identity/service.ts";
import { isUnprefixedPlatformPath } from "./compat.ts";

export type Area = "platform" | "accounts" | "auth" | "public";

/** Filled by the auth hook and by handlers; read by the action recorder. */
export interface AuditNote {
  namespace?: string;
  object?: string;
  name?: string;
  /** Set when the handler recorded the action itself (asynchronous operations, retry). */
  recorded?: boolean;
  failure?: string;
}

declare module "fastify" {
  interface FastifyRequest {
    principal?: Principal;
    area: Area;
    actionUuid?: string;
    audit: AuditNote;
  }
  interface FastifyContextConfig {
    /** Readable action name recorded for non-GET calls, e.g. "Action Cancel". */
    action?: string;
    /** "none": the route checks its own secret (trigger calls, token endpoint). */
    auth?: "none";
    /** Accounts API: the scope a call needs (CONTRACT §11); accounts routes without one need Basic. */
    scope?: Scope;
    /** A route outside api/streams that accepts WebSocket upgrades (the agent's tunnel). */
    websocket?: boolean;
  }
}

/** Which API a path belongs to: it decides how callers authenticate and whether calls are audited. */
export function areaOf(path: string): Area {
  if (
    /^\/api\/(app|audit|infra|repo)\/v1(\/|$)/.test(path) ||
    path.startsWith("/v1/events") ||
    isUnprefixedPlatformPath(path)
  )
    return "platform";
  if (path.startsWith("/api/v1.1/") || path.startsWith("/oauth/")) return "accounts";
  if (path === "/auth" || path.startsWith("/auth/")) return "auth";
  return "public";
}
