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
  /** Set when the action was recorded as a success with the call's write (recorder.ts, recordWithWrite). */
  recordedAsSuccess?: boolean;
  failure?: string;
  /** A line for the log of a call that succeeded (what a health check found, for one). */
  note?: string;
}

/**
 * Who may call a route; every route declares it (`config.access`) and one hook checks it
 * (api/access.ts), so handlers hold no permission checks of their own.
 * - "public": no credentials; the route is public or checks its own secret (trigger calls, the
 *   token endpoint, sign-in, the agent's token and node key).
 * - "caller": any authenticated caller; which objects it may see is the object's own rule
 *   (a profile, an organization's members, an action of a namespace it reads).
 * - "namespace": the path's namespace (the caller's own without one) must be one the caller may
 *   use, else 404 like a missing object (CONTRACT §3); handlers read it with `namespaceOf(req)`.
 * - `{ admin }`: administrators only (a key limited to a namespace is not one): 403 `admin_only`
 *   with `admin` as the sentence; with `namespace: true` the namespace is resolved first.
 */
export type Access = "public" | "caller" | "namespace" | { admin: string; namespace?: boolean };

declare module "fastify" {
  interface FastifyRequest {
    principal?: Principal;
    /** The namespace of a route declaring namespace access, set by the access hook. */
    namespace?: string;
    area: Area;
    actionUuid?: string;
    audit: AuditNote;
  }
  interface FastifyContextConfig {
    /** Readable action name recorded for non-GET calls, e.g. "Action Cancel". */
    action?: string;
    /** Who may call the route (see `Access`); test/api/routes.test.ts fails on a route without one. */
    access?: Access;
    /** The 405 answers of api/routing.ts (not resources: no access or schemas of their own). */
    fallback?: boolean;
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
