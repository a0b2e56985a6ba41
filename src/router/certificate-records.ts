// What routers report of certificates, written (issue 30, router/controller.ts reads the reports):
// a state that changed is written with an `update` event of each service serving the host name;
// a node's router serving another serial than it served before has renewed its certificate
// (serials.ts, kept in the database), so its expiry is written whatever the difference of expiries
// (two nodes' own certificates, a few seconds apart, are otherwise the same one: sameExpiry).
import { acmeProblem } from "../domain/domains.ts";
import type { RoutesOutput } from "../domain/router-config.ts";
import type { CertificateStatus, RouterConfig } from "../drivers/router/router.ts";
import { decodeSpec } from "../store/codec.ts";
import { RouterStore } from "../store/router.ts";
import type { Store } from "../store/store.ts";
import { overdue, sameExpiry } from "./certificate-state.ts";
import { ServedSerials } from "./serials.ts";

export class CertificateRecords {
  private readonly routerStore: RouterStore;
  private readonly serials: ServedSerials;

  constructor(
    private readonly d: {
      store: Store;
      now(): number;
      renewalWindowRatio?: number;
      /** The routes last built for a namespace (which services serve a host by VIRTUAL_HOST). */
      built(namespace: string): RoutesOutput | undefined;
    },
  ) {
    this.routerStore = new RouterStore(d.store);
    this.serials = new ServedSerials(d.store, d.now);
  }

  /** A node is gone: the serials its router served go. */
  forgetNode(nodeUuid: string): Promise<void> {
    return this.serials.forgetNode(nodeUuid);
  }

  /** Writes the states the node's router reported that changed, each with an event on the services serving the host. */
  async record(nodeUuid: string, namespace: string, statuses: CertificateStatus[]): Promise<void> {
    if (statuses.length === 0) return;
    const known = new Map(
      (await this.routerStore.certificatesOf(statuses.map((s) => s.host))).map((c) => [c.host, c]),
    );
    const services = await this.d.store.services.liveServices({ namespace });
    const served = await this.serials.before(
      nodeUuid,
      statuses.map((s) => s.host),
    );
    for (const reported of statuses) {
      const st = overdue(reported, this.d.now(), this.d.renewalWindowRatio);
      const cur = known.get(st.host);
      if (cur?.state === "uploaded" || st.state === "uploaded") continue;
      const before = served.get(st.host);
      const renewed = !!st.serial && before !== undefined && before !== st.serial;
      const seen = () => this.serials.seen(nodeUuid, st.host, st.serial);
      if (
        !renewed &&
        cur &&
        cur.namespace === namespace &&
        cur.state === st.state &&
        sameExpiry(cur.expires_at, st.expiresAt) &&
        cur.error === st.error &&
        cur.issuer === st.issuer
      ) {
        await seen();
        continue;
      }
      const serving = services.filter(
        (s) =>
          (decodeSpec(s.spec).domains ?? []).some((d) => d.host === st.host) ||
          this.servesVirtualHost(namespace, s.uuid, st.host),
      );
      await this.routerStore.putCertificate(
        {
          host: st.host,
          namespace,
          state: st.state,
          issuer: st.issuer,
          expires_at: st.expiresAt,
          error: st.error,
          sealed_cert: null,
          sealed_key: null,
          updated: this.d.now(),
        },
        serving,
      );
      await seen();
    }
  }

  private servesVirtualHost(namespace: string, service: string, host: string): boolean {
    return (this.d.built(namespace)?.routes ?? []).some((r) => r.service === service && r.host === host);
  }
}

/** A host the ACME server cannot issue for (a wildcard) is an error, whatever the router says of it. */
export function withAcmeProblems(config: RouterConfig, statuses: CertificateStatus[]): CertificateStatus[] {
  const problems = new Map<string, string>();
  for (const r of config.routes) {
    const problem = r.tls === "acme" ? acmeProblem(r.host) : undefined;
    if (problem) problems.set(r.host, problem);
  }
  if (problems.size === 0) return statuses;
  const out = statuses.filter((s) => !problems.has(s.host));
  for (const [host, error] of problems)
    out.push({ host, state: "error", issuer: "", expiresAt: null, error });
  return out;
}
