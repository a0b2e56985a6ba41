// A router configuration as Caddy 2's JSON (the whole document POSTed to its admin API's /load,
// which swaps it in without a restart; requests under way finish on the old one, but Caddy 2.6
// closes the WebSockets it proxies, so caddy.ts loads a configuration only when its shape changed). Two
// servers: :443 for the routes with TLS (certificates from the ACME issuer, or loaded when
// uploaded), :80 for plain routes and the per-domain redirects to HTTPS (Caddy's own automatic
// redirects are off: redirects are a domain's choice). Caddy answers ACME HTTP-01 challenges on :80
// and TLS-ALPN-01 on :443 itself. A route without an upstream answers 502 saying so, never a
// fallback. Requests are retried on another upstream for a short while when one refuses
// (try_duration), and every request is logged to the access log (request figures).
//
// With a route resolver (dns.ts), a route's upstreams come from it (`dynamic_upstreams`, looked up
// again every second): a change of upstreams alone is no new configuration and Caddy keeps every
// open connection (caddy.ts loads only a new routingShape). The upstreams written in the
// configuration are those of its load, used only while the resolver does not answer (Berth
// restarting): routing goes on to the containers it had rather than failing.
import { acmeProblem } from "../../domain/domains.ts";
import type { Route } from "../../domain/router-config.ts";
import { routeDnsName } from "./dns.ts";
import type { RouterConfig } from "./router.ts";

export interface CaddyPaths {
  /** `unix/<path>`: the admin API's socket (never a TCP port a container could reach). */
  adminListen: string;
  /** Certificates, ACME accounts, locks. */
  storageDir: string;
  /** Caddy's own log (certificate errors are read from it). */
  logFile: string;
  /** One JSON line per request. */
  accessLogFile: string;
}

/** Where routes' upstreams are looked up (dns.ts). */
export interface CaddyDns {
  /** `udp/<ip>:<port>`. */
  resolver: string;
  refreshMs: number;
}

/** The name of the access logger of both servers. */
export const ACCESS_LOGGER = "berth";
/** Cookie of sticky routes. */
export const STICKY_COOKIE = "berth_route";

function matcher(r: Route): Record<string, string[]> {
  const m: Record<string, string[]> = { host: [r.host] };
  if (r.path !== "/") m.path = [r.path, `${r.path}/*`];
  return m;
}

function proxy(r: Route, dns: CaddyDns | undefined): Record<string, unknown> {
  if (r.upstreams.length === 0) {
    return {
      handler: "static_response",
      status_code: 502,
      body: `No container of ${r.service_name} is ready to answer ${r.host}${r.path === "/" ? "" : r.path}.\n`,
    };
  }
  return {
    handler: "reverse_proxy",
    upstreams: r.upstreams.map((u) => ({ dial: u.address })),
    load_balancing: {
      selection_policy: r.sticky ? { policy: "cookie", name: STICKY_COOKIE } : { policy: "round_robin" },
      try_duration: "5s",
      try_interval: "100ms",
    },
    health_checks: { passive: { fail_duration: "5s" } },
    ...(dns
      ? {
          dynamic_upstreams: {
            source: "a",
            name: `${routeDnsName(r.id)}.`,
            port: String(r.port),
            refresh: `${dns.refreshMs}ms`,
            resolver: { addresses: [dns.resolver] },
            dial_timeout: "1s",
          },
        }
      : {}),
  };
}

function route(r: Route, handle: Record<string, unknown>): Record<string, unknown> {
  return { match: [matcher(r)], handle: [handle], terminal: true };
}

function redirect(): Record<string, unknown> {
  return {
    handler: "static_response",
    status_code: 308,
    headers: { Location: ["https://{http.request.host}{http.request.uri}"] },
  };
}

/** The whole Caddy configuration of a router. */
export function caddyConfig(
  config: RouterConfig,
  paths: CaddyPaths,
  dns?: CaddyDns,
): Record<string, unknown> {
  const secure = config.routes.filter((r) => r.tls !== "off");
  const plain = config.routes.filter((r) => r.tls === "off" || !r.redirect_https);
  const redirects = config.routes.filter((r) => r.tls !== "off" && r.redirect_https);
  const uploaded = new Set(config.certificates.map((c) => c.host));
  // A wildcard cannot be issued by HTTP-01 or TLS-ALPN-01: never ordered (the ACME server would
  // refuse every retry); its handshake fails and its error is on the service (domains.ts acmeProblem).
  const acmeHosts = [
    ...new Set(secure.filter((r) => r.tls === "acme" && !acmeProblem(r.host)).map((r) => r.host)),
  ];
  const logs = { default_logger_name: ACCESS_LOGGER };
  const servers: Record<string, unknown> = {
    http: {
      listen: [":80"],
      routes: [
        // Redirects before plain routes: a domain's path that redirects wins over a plain one.
        ...redirects.map((r) => route(r, redirect())),
        ...plain.map((r) => route(r, proxy(r, dns))),
      ],
      automatic_https: { disable: true },
      logs,
    },
  };
  if (secure.length > 0) {
    servers.https = {
      listen: [":443"],
      routes: secure.map((r) => route(r, proxy(r, dns))),
      // Caddy would order what no policy covers from its default (public) issuers: never.
      automatic_https: {
        disable_redirects: true,
        skip_certificates: [
          ...uploaded,
          ...new Set(secure.filter((r) => r.tls === "acme" && acmeProblem(r.host)).map((r) => r.host)),
        ],
      },
      // No default certificate: a host name without its own fails the handshake (no silent fallback).
      tls_connection_policies: [{}],
      logs,
    };
  }
  const issuer: Record<string, unknown> = { module: "acme", ca: config.acme.directory };
  if (config.acme.email) issuer.email = config.acme.email;
  if (config.acme.caRootFile) issuer.trusted_roots_pem_files = [config.acme.caRootFile];
  const tls: Record<string, unknown> = {
    automation: {
      policies:
        acmeHosts.length > 0
          ? [
              {
                subjects: acmeHosts,
                issuers: [issuer],
                disable_ocsp_stapling: true,
                ...(config.acme.renewalWindowRatio
                  ? { renewal_window_ratio: config.acme.renewalWindowRatio }
                  : {}),
              },
            ]
          : [],
      // Caddy durations as strings; how often certificates are checked for renewal.
      ...(config.acme.renewIntervalMs ? { renew_interval: `${config.acme.renewIntervalMs}ms` } : {}),
    },
  };
  if (config.certificates.length > 0) {
    tls.certificates = {
      load_pem: config.certificates.map((c) => ({
        certificate: c.certPem,
        key: c.keyPem,
        tags: ["berth-uploaded"],
      })),
    };
  }
  return {
    // Requests over the socket name the host localhost (the only origin the admin API takes).
    admin: { listen: paths.adminListen, origins: ["localhost"], config: { persist: false } },
    storage: { module: "file_system", root: paths.storageDir },
    logging: {
      logs: {
        default: {
          writer: { output: "file", filename: paths.logFile, roll_size_mb: 10, roll_keep: 2 },
          encoder: { format: "json" },
          exclude: [`http.log.access.${ACCESS_LOGGER}`],
        },
        access: {
          writer: { output: "file", filename: paths.accessLogFile, roll_size_mb: 50, roll_keep: 1 },
          encoder: { format: "json" },
          include: [`http.log.access.${ACCESS_LOGGER}`],
        },
      },
    },
    apps: { http: { servers }, tls },
  };
}
