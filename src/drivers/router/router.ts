// The router driver interface (issue 30): what Berth asks of the proxy that serves a node's
// domains. A router takes a whole configuration at once and swaps it in without a restart and
// without dropping open connections (a configuration whose routingShape is the one it runs changes
// only upstreams: Caddy takes those from its route resolver, dns.ts, without a load, which would
// close its WebSockets); it reports its certificates and per-route request figures.
// Implementations: fake-router.ts (simulated nodes, observable in tests) and caddy.ts (Caddy 2's
// admin API; the local provider starts Caddy in the node's namespace, local-router.ts).
import type { Route } from "../../domain/router-config.ts";

export type { Route };

export interface AcmeSettings {
  /** The ACME directory URL (Let's Encrypt's by default). */
  directory: string;
  /** Account e-mail given to the ACME server; "" for none. */
  email: string;
  /** PEM file of the root that signs the directory's own HTTPS certificate (a private ACME server); "" for the system's. */
  caRootFile: string;
  /** How often the router checks its certificates for renewal (ms); the router's default when absent. */
  renewIntervalMs?: number;
  /** The part of a certificate's lifetime before expiry in which it is renewed; the router's default when absent. */
  renewalWindowRatio?: number;
}

export interface UploadedCertificate {
  host: string;
  /** PEM certificate chain and key, unsealed for the router only. */
  certPem: string;
  keyPem: string;
}

export interface RouterConfig {
  routes: Route[];
  certificates: UploadedCertificate[];
  acme: AcmeSettings;
}

/**
 * `expiring`: issued, but within RENEWAL_OVERDUE_MS of its expiry (or half its renewal window, when
 * shorter), so the router's renewal (a third of its lifetime before by default, Caddy's rule) has been
 * failing for weeks; Berth says so (router/controller.ts).
 */
export type CertificateState = "pending" | "issued" | "error" | "uploaded" | "expiring";

/** An ACME certificate this close to its expiry was not renewed when it should have been. */
export const RENEWAL_OVERDUE_MS = 14 * 86_400_000;

export interface CertificateStatus {
  host: string;
  state: CertificateState;
  issuer: string;
  /** Epoch ms; null while none is held. */
  expiresAt: number | null;
  /** The last error obtaining it (the ACME server's words), null when none. */
  error: string | null;
  /** The serial number (hex) of the certificate served, when one is: a new one is a renewal. */
  serial?: string;
  /** Epoch ms the certificate served is valid from, when one is (its lifetime: when renewal is overdue). */
  issuedAt?: number;
}

/** Counters of one route since the router started (a rate is the difference of two readings). */
export interface RouteCounters {
  route: string;
  requests: number;
  /** Answers 5xx (the router's own 502s included). */
  errors: number;
  /** Seconds, summed; and counts at or under each LATENCY_BUCKETS bound (cumulative). */
  latencySum: number;
  buckets: number[];
}

/** Latency bucket bounds in seconds (as Prometheus histograms count them). */
export const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface Router {
  /** Replaces the whole configuration; resolves once requests are routed by it. */
  apply(config: RouterConfig): Promise<void>;
  /** The certificates of the TLS routes of the configuration last applied. */
  certificates(): Promise<CertificateStatus[]>;
  /** Request figures per route id. */
  counters(): Promise<RouteCounters[]>;
  /** Starts the router when it does not run; true when it was (re)started and has lost its configuration. */
  restarted?(): Promise<boolean>;
  /** Stops the router and removes what it kept (its node is gone). */
  remove?(): Promise<void>;
  /**
   * Epoch ms until which an upstream the last configuration removed may still be chosen (a router
   * that looks its upstreams up periodically, Caddy with its route resolver); 0 or past: none. A
   * drain waits for it before its container stops (router/controller.ts push).
   */
  settlesAt?(): number;
}

/**
 * What a router must load a configuration for: everything but the routes' upstream addresses (a
 * route with none answers 502 saying so, so whether it has any is part of it). Two configurations
 * of the same shape differ only in their upstreams, which a router takes without a load (Caddy:
 * from its route resolver, dns.ts), so open connections through it, WebSockets included, stay.
 */
export function routingShape(config: RouterConfig): string {
  return JSON.stringify({
    ...config,
    routes: config.routes.map(({ upstreams, ...r }) => ({ ...r, serving: upstreams.length > 0 })),
  });
}

/** How a router took the configurations it was given (tests and the router's own record). */
export interface ApplyCounts {
  /** Configurations loaded (a new shape: hosts, paths, TLS, certificates, a route with or without upstreams). */
  loads: number;
  /** Configurations that changed only upstreams, taken without a load. */
  upstreamUpdates: number;
}

/**
 * A router that cannot run on its node (Caddy is not installed there): not a passing failure but
 * something its owner must fix, so it is shown on the services it would serve (router/controller.ts).
 */
export class RouterUnavailable extends Error {
  readonly code = "router_unavailable";
}

/** Latency buckets of one observation (cumulative counts to add). */
export function bucketsOf(seconds: number): number[] {
  return LATENCY_BUCKETS.map((b) => (seconds <= b ? 1 : 0));
}
