// Domains of services (issue 30): the host names and paths a service serves through the router on
// its namespace's nodes, and the historical `VIRTUAL_HOST` variables that dockercloud/haproxy read
// from the services linked to a load balancer. Pure: parsing and checking only; who may claim a
// host name is the store's (store/router.ts), what the routers are given is router-config.ts.

/** How a domain's certificate is obtained: from the ACME server, uploaded by the user, or none (plain HTTP). */
export type TlsMode = "acme" | "uploaded" | "off";
export const TLS_MODES: readonly TlsMode[] = ["acme", "uploaded", "off"];

/** A host name (and path prefix) a service serves, as the definition stores it. */
export interface ServiceDomain {
  /** Lower-case host name; `*.` as its first label for every sub-domain. */
  host: string;
  /** Path prefix, `/` for every path; requests keep their whole path. */
  path: string;
  /** The containers' port the requests go to; null: the service's first TCP port, else 80. */
  port: number | null;
  tls: TlsMode;
  /** Plain-HTTP requests are redirected to HTTPS (only with TLS). */
  redirect_https: boolean;
  /** Requests carrying the router's cookie go back to the same container. */
  sticky: boolean;
  /** Routes of higher weight are matched first where host names and paths overlap. */
  weight: number;
}

/** The body form: everything but the host may be left out. */
export interface DomainInput {
  host: string;
  path?: string | null;
  port?: number | null;
  tls?: TlsMode;
  redirect_https?: boolean;
  sticky?: boolean;
  weight?: number;
}

export interface DomainProblem {
  field: string;
  problem: string;
}

/** At most this many domains per service. */
export const MAX_DOMAINS = 20;

const LABEL = "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?";
const HOST_RE = new RegExp(`^(\\*\\.)?(${LABEL}\\.)*${LABEL}$`);
const PATH_RE = /^\/[A-Za-z0-9._~!$&'()+,;=:@%/-]*$/;

export const HOST_PROBLEM =
  "must be a host name such as app.example.com (letters, digits, '-' and '.', at most 253 characters; '*.' first for every sub-domain)";

/** Whether a host name is one a domain may name (lower case; callers lower-case first). */
export function isHostName(host: string): boolean {
  return host.length <= 253 && HOST_RE.test(host);
}

/**
 * Why a host name cannot get a certificate from the ACME server, when it cannot: a wildcard is
 * issued only against a DNS-01 challenge (RFC 8555 §7.1.3: a TXT record in the zone), and the
 * routers answer HTTP-01 and TLS-ALPN-01 only. Shown on the definition (400), on a route and as
 * the host's certificate error (VIRTUAL_HOST), never left pending.
 */
export function acmeProblem(host: string): string | undefined {
  if (!host.startsWith("*.")) return undefined;
  return `${host} is a wildcard: an ACME server issues wildcard certificates only against a DNS-01 challenge, which Berth's routers do not answer (they answer HTTP-01 and TLS-ALPN-01). Upload a certificate for it (tls: uploaded), or set tls to off`;
}

/** Checks and completes the domains of a body; problems are named `domains[i].<field>`. */
export function parseDomains(
  input: readonly DomainInput[] | undefined,
  add: (field: string, problem: string) => void,
): ServiceDomain[] {
  const out: ServiceDomain[] = [];
  const seen = new Set<string>();
  (input ?? []).forEach((d, i) => {
    const field = (f: string) => `domains[${i}].${f}`;
    const host = d.host.trim().toLowerCase().replace(/\.$/, "");
    if (!isHostName(host)) add(field("host"), HOST_PROBLEM);
    const path = d.path === undefined || d.path === null || d.path === "" ? "/" : d.path;
    if (!PATH_RE.test(path) || path.includes("//"))
      add(field("path"), "must be a path prefix starting with '/', such as /api");
    const tls = d.tls ?? "acme";
    const wildcard = tls === "acme" ? acmeProblem(host) : undefined;
    if (wildcard) add(field("tls"), wildcard);
    const redirect = d.redirect_https ?? tls !== "off";
    if (redirect && tls === "off")
      add(
        field("redirect_https"),
        "needs a certificate: set tls to acme or uploaded, or redirect_https to false",
      );
    const key = `${host}${normalPath(path)}`;
    if (seen.has(key)) add(field("host"), `${host}${path} is listed twice`);
    seen.add(key);
    out.push({
      host,
      path: normalPath(path),
      port: d.port ?? null,
      tls,
      redirect_https: redirect,
      sticky: d.sticky ?? false,
      weight: d.weight ?? 0,
    });
  });
  return out;
}

/** `/api/` and `/api` are the same prefix; `/` stays. */
function normalPath(path: string): string {
  return path.length > 1 ? path.replace(/\/+$/, "") : path;
}

/** The container port a domain's requests go to. */
export function domainPort(
  d: Pick<ServiceDomain, "port">,
  ports: readonly { protocol: string; inner_port: number }[],
): number {
  return d.port ?? ports.find((p) => p.protocol === "tcp")?.inner_port ?? 80;
}

// ---- dockercloud/haproxy's variables ------------------------------------------------------------

/** Images whose services are load balancers in dockercloud/haproxy's sense. */
const LOAD_BALANCER_IMAGE_RE = /^(docker\.io\/)?(dockercloud|tutum)\/haproxy(:|$)/;

/** Whether a service (by its image) is a dockercloud/haproxy load balancer: Berth's router stands in for it. */
export function isLoadBalancerImage(image: string): boolean {
  return LOAD_BALANCER_IMAGE_RE.test(image);
}

/** One entry of `VIRTUAL_HOST`: `[scheme://]host[:port][/path]`. */
export interface VirtualHost {
  scheme: "http" | "https" | "ws" | "wss";
  host: string;
  /** The port the load balancer listened on; Berth's router listens on 80 and 443 only. */
  port: number | null;
  path: string;
}

/**
 * Parses `VIRTUAL_HOST` as dockercloud/haproxy did: comma-separated entries, each
 * `[scheme://]host[:port][/path]`, the host possibly `*.example.com`, a path ending in `*` a prefix
 * (`/path` alone is a prefix too here). Malformed entries are answered in `bad`.
 */
export function parseVirtualHost(value: string): { hosts: VirtualHost[]; bad: string[] } {
  const hosts: VirtualHost[] = [];
  const bad: string[] = [];
  for (const raw of value.split(",")) {
    const entry = raw.trim();
    if (entry === "") continue;
    const m = /^(?:(https?|wss?):\/\/)?([^/:]+)(?::(\d{1,5}))?(\/.*)?$/i.exec(entry);
    const host = m?.[2]?.toLowerCase() ?? "";
    if (!m || !isHostName(host)) {
      bad.push(entry);
      continue;
    }
    let path = (m[4] ?? "/").replace(/\*+$/, "");
    if (path.length > 1) path = path.replace(/\/+$/, "");
    hosts.push({
      scheme: (m[1]?.toLowerCase() ?? "http") as VirtualHost["scheme"],
      host,
      port: m[3] ? Number(m[3]) : null,
      path: path || "/",
    });
  }
  return { hosts, bad };
}

/**
 * The domains the historical variables give a service linked to a load balancer:
 * `VIRTUAL_HOST` (its hosts; https:// and wss:// entries with a certificate from the ACME server),
 * `VIRTUAL_HOST_WEIGHT` (the routes' weight: higher matched first), `EXCLUDE_PORTS` (ports never
 * routed: the port is the first TCP port not excluded), `FORCE_SSL` (any value: plain HTTP is
 * redirected to HTTPS, and every entry gets a certificate), `COOKIE` (any value: sticky sessions).
 * None without `VIRTUAL_HOST`, or when every port is excluded.
 */
export function virtualHostDomains(
  env: readonly { key: string; value: string }[],
  ports: readonly { protocol: string; inner_port: number }[],
): ServiceDomain[] {
  const get = (k: string) => env.find((e) => e.key === k)?.value;
  const vhost = get("VIRTUAL_HOST");
  if (vhost === undefined || vhost.trim() === "") return [];
  const excluded = new Set(
    (get("EXCLUDE_PORTS") ?? "")
      .split(",")
      .map((p) => Number(p.trim()))
      .filter((n) => Number.isInteger(n) && n > 0),
  );
  const tcp = ports.filter((p) => p.protocol === "tcp").map((p) => p.inner_port);
  const port = tcp.length > 0 ? tcp.find((p) => !excluded.has(p)) : excluded.has(80) ? undefined : 80;
  if (port === undefined) return [];
  const weight = Number.parseInt(get("VIRTUAL_HOST_WEIGHT") ?? "0", 10);
  const forceSsl = get("FORCE_SSL") !== undefined;
  const sticky = get("COOKIE") !== undefined && get("COOKIE") !== "";
  return parseVirtualHost(vhost).hosts.map((v) => {
    const secure = forceSsl || v.scheme === "https" || v.scheme === "wss";
    return {
      host: v.host,
      path: v.path,
      port,
      tls: secure ? "acme" : "off",
      redirect_https: forceSsl,
      sticky,
      weight: Number.isFinite(weight) ? weight : 0,
    };
  });
}
