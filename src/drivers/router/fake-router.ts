// A router for simulated nodes (issue 30): the same interface as the real one, keeping what it was
// given so tests can look, and answering requests the way a proxy would route them (host, longest
// path prefix, weight order, round robin or sticky over the upstreams), without sockets. It counts
// what the real one does: a configuration of a new shape (router.ts routingShape) is a load, one
// that changes only upstreams is an upstream update (Caddy's route resolver, dns.ts), so tests
// can say which changes would close the WebSockets a real router proxies.
import { matchRoute, type Route } from "../../domain/router-config.ts";
import {
  type ApplyCounts,
  bucketsOf,
  type CertificateStatus,
  LATENCY_BUCKETS,
  type RouteCounters,
  type Router,
  type RouterConfig,
  RouterUnavailable,
  routingShape,
} from "./router.ts";

export interface FakeAnswer {
  status: number;
  /** The container the request went to, when one did. */
  container?: string;
  route?: string;
  redirect?: string;
}

/**
 * What an ACME server answers for a name under `.invalid` (RFC 2606: never a real name), so a
 * simulated node shows a certificate error the way a real one does, without a test reaching in.
 */
function invalidNameError(host: string): string | undefined {
  if (!host.endsWith(".invalid")) return undefined;
  return `obtaining certificate: urn:ietf:params:acme:error:rejectedIdentifier: ${host} is not a name on the public Internet (.invalid)`;
}

export class FakeRouter implements Router {
  /** Every configuration applied, oldest first. */
  readonly applied: RouterConfig[] = [];
  /** Hosts whose ACME order fails, and the error the ACME server gives. */
  readonly failingOrders = new Map<string, string>();
  private readonly counts = new Map<string, RouteCounters>();
  /** How long a certificate it issues is valid (90 days, as Let's Encrypt's; tests shorten it to see renewals due). */
  lifetimeMs = 90 * 86_400_000;
  /** When each host's certificate was issued (it keeps its expiry until the host leaves). */
  private readonly issued = new Map<string, number>();
  /** The serial of each host's certificate (a renewal gives it a new one). */
  private readonly serials = new Map<string, string>();
  private nextSerial = 1;
  private turn = 0;
  /** Loads and upstream-only updates, as the real router takes them. */
  readonly applyCounts: ApplyCounts = { loads: 0, upstreamUpdates: 0 };
  private loaded: string | undefined;

  constructor(readonly node: string) {}

  get current(): RouterConfig | undefined {
    return this.applied.at(-1);
  }

  /** Set: the router cannot run, as a node without Caddy (this is why); every apply fails so. */
  unavailable: string | undefined;

  async apply(config: RouterConfig): Promise<void> {
    if (this.unavailable !== undefined) throw new RouterUnavailable(this.unavailable);
    const shape = routingShape(config);
    if (shape === this.loaded) this.applyCounts.upstreamUpdates += 1;
    else this.applyCounts.loads += 1;
    this.loaded = shape;
    this.applied.push(structuredClone(config));
  }

  async certificates(): Promise<CertificateStatus[]> {
    const config = this.current;
    if (!config) return [];
    const hosts = new Set(config.routes.filter((r) => r.tls !== "off").map((r) => r.host));
    const uploaded = new Set(config.certificates.map((c) => c.host));
    return [...hosts].map((host) => {
      if (uploaded.has(host))
        return { host, state: "uploaded", issuer: "uploaded", expiresAt: null, error: null };
      const error = this.failingOrders.get(host) ?? invalidNameError(host);
      if (error !== undefined) return { host, state: "error", issuer: "", expiresAt: null, error };
      if (!this.issued.has(host)) this.renew(host, Date.now());
      return {
        host,
        state: "issued",
        issuer: "fake ACME",
        expiresAt: this.issued.get(host)! + this.lifetimeMs,
        error: null,
        serial: this.serials.get(host)!,
      };
    });
  }

  /** Renews a host's certificate as issued at `at` (epoch ms): a new serial and expiry, as a router's renewal. */
  renew(host: string, at: number): void {
    this.issued.set(host, at);
    this.serials.set(host, (this.nextSerial++).toString(16).toUpperCase().padStart(2, "0"));
  }

  async counters(): Promise<RouteCounters[]> {
    return [...this.counts.values()].map((c) => ({ ...c, buckets: [...c.buckets] }));
  }

  /** The route a request would match, as a proxy matches them (the configuration's order). */
  match(host: string, path: string): Route | undefined {
    return matchRoute(this.current?.routes ?? [], host, path);
  }

  /** Routes a request: 404 without a route, a redirect for plain HTTP where asked, 502 without an upstream. */
  request(
    host: string,
    path = "/",
    opts: { https?: boolean; cookie?: string; latencyS?: number } = {},
  ): FakeAnswer {
    const route = this.match(host, path);
    if (!route) return { status: 404 };
    if (!opts.https && route.redirect_https)
      return { status: 308, route: route.id, redirect: `https://${host}${path}` };
    let upstream =
      route.sticky && opts.cookie ? route.upstreams.find((u) => u.container === opts.cookie) : undefined;
    if (!upstream && route.upstreams.length > 0)
      upstream = route.upstreams[this.turn++ % route.upstreams.length];
    const status = upstream ? 200 : 502;
    const c = this.counts.get(route.id) ?? {
      route: route.id,
      requests: 0,
      errors: 0,
      latencySum: 0,
      buckets: LATENCY_BUCKETS.map(() => 0),
    };
    const latency = opts.latencyS ?? 0.001;
    c.requests += 1;
    if (status >= 500) c.errors += 1;
    c.latencySum += latency;
    c.buckets = c.buckets.map((n, i) => n + bucketsOf(latency)[i]!);
    this.counts.set(route.id, c);
    return { status, route: route.id, ...(upstream ? { container: upstream.container } : {}) };
  }
}
