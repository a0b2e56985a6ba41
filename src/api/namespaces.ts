// Namespace resolution for namespaced paths (CONTRACT §3).
import type { FastifyRequest } from "fastify";
import { unauthorized } from "../domain/errors.ts";
import type { IdentityService, Principal } from "../identity/service.ts";

export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw unauthorized();
  return request.principal;
}

/** The namespace a request addresses (the caller's own when the path has none); 404 when not the caller's. */
export async function namespaceOf(request: FastifyRequest, identity: IdentityService): Promise<string> {
  const p = principalOf(request);
  const requested = (request.params as { namespace?: string } | undefined)?.namespace;
  const ns = await identity.resolveNamespace(p, requested);
  request.audit.namespace = ns;
  return ns;
}
