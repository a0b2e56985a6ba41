// A service's `domains` as its view shows them (issue 30): the definition's domains, each with the
// certificate of its host name as the routers last reported it (or as uploaded). Certificate
// writes carry an event of the services serving the host (store/router.ts), so a cached answer
// never shows a stale certificate.
import type { CertificateView, DomainView } from "../contract/router.ts";
import type { Service } from "../contract/service.ts";
import type { ServiceSpec } from "../domain/service.ts";
import { restTime } from "../domain/time.ts";
import type { CertificateRow } from "../store/router.ts";
import { RouterStore } from "../store/router.ts";
import type { Store } from "../store/store.ts";

export function certificateView(c: CertificateRow): CertificateView {
  return { host: c.host, state: c.state, issuer: c.issuer, expires: restTime(c.expires_at), error: c.error };
}

/** The domains of a definition, without certificates (what a kept view holds). */
export function domainViews(spec: Pick<ServiceSpec, "domains">): DomainView[] {
  return (spec.domains ?? []).map((d) => ({ ...d, certificate: null }));
}

/**
 * The views with the certificates of their TLS domains (one query for the page); views of
 * services without such domains are answered as they are.
 */
export async function withCertificates(
  store: Store,
  views: Service[],
  namespaces: readonly string[],
): Promise<Service[]> {
  const hosts = new Set<string>();
  for (const v of views) for (const d of v.domains) if (d.tls !== "off") hosts.add(d.host);
  if (hosts.size === 0) return views;
  const certs = new Map((await new RouterStore(store).certificatesOf([...hosts])).map((c) => [c.host, c]));
  return views.map((v, i) => {
    if (!v.domains.some((d) => d.tls !== "off")) return v;
    return {
      ...v,
      domains: v.domains.map((d) => {
        const c = certs.get(d.host);
        const mine = c && c.namespace === namespaces[i] && d.tls !== "off";
        return { ...d, certificate: mine ? certificateView(c) : d.tls === "off" ? null : pending(d.host) };
      }),
    };
  });
}

function pending(host: string): CertificateView {
  return { host, state: "pending", issuer: "", expires: null, error: null };
}
