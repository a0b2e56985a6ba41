// The caller and the namespace of a request (CONTRACT §3); both are set by hooks (auth.ts, access.ts).
import type { FastifyRequest } from "fastify";
import { unauthorized } from "../domain/errors.ts";
import type { Principal } from "../identity/service.ts";

export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw unauthorized();
  return request.principal;
}

/**
 * The namespace a request addresses (the caller's own when the path has none), resolved by the
 * access hook for routes declaring namespace access; a route that did not declare it is a bug.
 */
export function namespaceOf(request: FastifyRequest): string {
  if (request.namespace === undefined)
    throw new Error(`${request.routeOptions.url} reads a namespace but does not declare namespace access`);
  return request.namespace;
}
