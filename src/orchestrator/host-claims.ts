// Host names belong to namespaces (issue 30): the first namespace whose service claims a host name
// holds it; a claim on a host name another namespace holds is refused (409 host_name_taken), unless
// that namespace no longer serves it and no administrator reserved it for that namespace (then the
// claim moves). Claims are written in the transaction that writes the definition asking for them,
// so two namespaces racing for one name end with one holder (the primary key) and one refusal.
import { ApiError } from "../domain/errors.ts";
import { hostsOfDefinition } from "../domain/router-config.ts";
import { serviceUri } from "../domain/uri.ts";
import { specOf } from "../store/codec.ts";
import { RouterStore } from "../store/router.ts";
import { type Store, UniqueViolation } from "../store/store.ts";

export function hostTaken(host: string, reserved: boolean): ApiError {
  const why = reserved
    ? "is reserved by an administrator for another namespace"
    : "belongs to another namespace";
  return new ApiError(
    "conflict",
    "host_name_taken",
    `The host name ${host} ${why}: choose another host name, or ask an administrator to reserve it for this namespace.`,
    [{ field: "domains", problem: `${host} ${why}` }],
  );
}

/**
 * Refuses (409 domain_taken) a definition whose `domains` serve a host name and path another live
 * service of the namespace serves already: a router can send a request to one of them only, so
 * the second would silently serve nothing.
 */
export async function refuseSharedDomains(
  tx: Store,
  namespace: string,
  serviceUuid: string,
  domains: readonly { host: string; path: string }[],
): Promise<void> {
  if (domains.length === 0) return;
  const wanted = new Set(domains.map((d) => `${d.host}${d.path}`));
  for (const other of await tx.services.liveServices({ namespace })) {
    if (other.uuid === serviceUuid) continue;
    for (const d of specOf(other).domains ?? []) {
      if (!wanted.has(`${d.host}${d.path}`)) continue;
      const where = d.path === "/" ? d.host : `${d.host}${d.path}`;
      throw new ApiError(
        "conflict",
        "domain_taken",
        `${where} is served by the service "${other.name}" (${serviceUri(other)}) of this namespace: remove it from that service's domains first, or choose another host name or path.`,
        [{ field: "domains", problem: `${where} is served by the service "${other.name}" (${other.uuid})` }],
      );
    }
  }
}

/** Whether a live service of the namespace asks for the host name now. */
async function servedBy(tx: Store, namespace: string, host: string): Promise<boolean> {
  for (const s of await tx.services.liveServices({ namespace })) {
    if (hostsOfDefinition(specOf(s)).includes(host)) return true;
  }
  return false;
}

/**
 * Claims for `namespace` every host name its new definition asks for (in the caller's
 * transaction); refuses with 409 a host name another namespace holds.
 */
export async function claimHosts(
  tx: Store,
  namespace: string,
  hosts: readonly string[],
  now: number,
): Promise<void> {
  const router = new RouterStore(tx);
  const held = new Map((await router.claimsOf(hosts)).map((c) => [c.host, c]));
  for (const host of [...hosts].sort()) {
    const claim = held.get(host);
    if (claim?.namespace === namespace) continue;
    if (claim === undefined) {
      try {
        await router.insertClaim({ host, namespace, reserved: 0, created: now });
      } catch (err) {
        if (err instanceof UniqueViolation) throw hostTaken(host, false);
        throw err;
      }
      continue;
    }
    if (claim.reserved === 1) throw hostTaken(host, true);
    if (await servedBy(tx, claim.namespace, host)) throw hostTaken(host, false);
    // The holder no longer serves it and nobody reserved it: the claim moves.
    if (!(await router.moveClaim(claim, { namespace, reserved: 0, created: now })))
      throw hostTaken(host, false);
  }
}
