// Compatibility rules for the historical clients (CONTRACT rules marked "compat"): the Python
// SDK and CLI, the Go SDK and the HAProxy load balancer driven by the events stream. They live
// here, in one place, rather than sprinkled through handlers.
import type { FastifyInstance } from "fastify";

/** Both action headers carry the same value (CONTRACT §7). */
export const ACTION_URI_HEADERS = ["X-Platform-Action-URI", "X-DockerCloud-Action-URI"] as const;

/** Injected environment variables exist under both prefixes (CONTRACT §10). */
export const ENV_PREFIXES = ["PLATFORM_", "DOCKERCLOUD_"] as const;

/** Registries are also described with the historical flag name. */
export function withRegistryAliases<T extends { is_native_registry: boolean }>(
  r: T,
): T & { is_tutum_registry: boolean } {
  return { ...r, is_tutum_registry: r.is_native_registry };
}

/**
 * Paths: the trailing slash is optional and repeated slashes collapse, without redirects.
 * Fastify's router options do most of it; this normalizes what the router does not see
 * (an encoded slash in a repository name is the same as a raw one).
 */
export function normalizeUrl(url: string): string {
  const q = url.indexOf("?");
  const path = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? "" : url.slice(q);
  return path.replace(/%2f/gi, "/").replace(/\/{2,}/g, "/") + query;
}

/**
 * Bodies of DELETE requests are ignored (CONTRACT §1), except on the accounts route that names
 * its target in the body: `DELETE /api/v1.1/users/<username>/emails/ {email}` (accounts spec).
 */
export function keepsDeleteBody(url: string): boolean {
  return /^\/api\/v1\.1\/users\/[^/?]+\/emails\/?(\?|$)/.test(url);
}

/** Streams accept credentials in the query, for clients that send no header there (CONTRACT §2). */
export function queryCredentials(
  query: Record<string, unknown>,
): { username: string; secret: string } | undefined {
  const user = query.user;
  const token = query.token;
  return typeof user === "string" && typeof token === "string"
    ? { username: user, secret: token }
    : undefined;
}

/** The events stream is also served at the historical path (CONTRACT §8). */
export const LEGACY_EVENTS_PATH = "/v1/events/";

/**
 * A 204 answer has an empty body and says so with `Content-Length: 0` (CONTRACT §6, accounts spec
 * "204, empty body, Content-Length 0"). Fastify leaves the header out of 204s unless it is set
 * and the payload is empty, so this sets both for every 204.
 */
export function installNoContentLength(app: FastifyInstance): void {
  app.addHook("onSend", async (_request, reply, payload) => {
    if (reply.statusCode !== 204) return payload;
    reply.header("content-length", "0");
    return null;
  });
}
