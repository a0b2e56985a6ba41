// Outbound safety for calls to registry hosts that users name (SSRF guard). Berth resolves the
// host itself, refuses loopback, link-local (cloud metadata), private and reserved addresses
// unless the configured allow-list names the host or the address, then connects to exactly the
// address it checked (no second lookup a DNS answer could change). Redirects are followed only
// within the same origin, every call has a timeout and bodies are read up to a limit.
import { lookup as dnsLookup } from "node:dns/promises";
import http from "node:http";
import https from "node:https";
import { BlockList, isIP } from "node:net";
import { splitHost } from "../domain/images.ts";

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export type HostLookup = (hostname: string) => Promise<ResolvedAddress[]>;

export interface OutboundPolicy {
  /** Host names, addresses and CIDRs Berth may contact although they are not public. */
  allow: string[];
  /** Registry hosts (`host` or `host:port`) reached over plain HTTP. */
  insecure: string[];
  /** Limit of every single call: lookup, connect and answer. */
  timeoutMs: number;
  /** Replaceable resolver (tests); the system resolver otherwise. */
  lookup?: HostLookup;
  /** The setting that extends `allow`, named in refusals (BERTH_REGISTRY_ALLOW by default). */
  allowSetting?: string;
}

/** Berth would not contact the host: a user error, with a sentence saying why. */
export class OutboundRefused extends Error {}

/** The host could not be reached or did not answer in time. */
export class OutboundFailed extends Error {}

const RANGES: [string, number, 4 | 6, string][] = [
  ["169.254.169.254", 32, 4, "the cloud metadata address"],
  ["127.0.0.0", 8, 4, "a loopback address"],
  ["169.254.0.0", 16, 4, "a link-local address"],
  ["10.0.0.0", 8, 4, "a private address"],
  ["172.16.0.0", 12, 4, "a private address"],
  ["192.168.0.0", 16, 4, "a private address"],
  ["100.64.0.0", 10, 4, "a shared (carrier-grade NAT) address"],
  ["0.0.0.0", 8, 4, "a reserved address"],
  ["192.0.0.0", 24, 4, "a reserved address"],
  ["192.0.2.0", 24, 4, "a documentation address"],
  ["192.88.99.0", 24, 4, "a reserved (6to4 relay) address"],
  ["198.18.0.0", 15, 4, "a reserved address"],
  ["198.51.100.0", 24, 4, "a documentation address"],
  ["203.0.113.0", 24, 4, "a documentation address"],
  ["224.0.0.0", 4, 4, "a multicast address"],
  ["240.0.0.0", 4, 4, "a reserved address"],
  ["::1", 128, 6, "a loopback address"],
  ["::", 128, 6, "a reserved (unspecified) address"],
  // Deprecated forms that carry an IPv4 address (RFC 4291 §2.5.5.1, RFC 6052/SIIT): nothing on
  // the Internet is reached through them, and a stack may deliver them to the embedded address.
  ["::", 96, 6, "an IPv4-compatible address"],
  ["::ffff:0:0:0", 96, 6, "an IPv4-translated address"],
  ["100::", 64, 6, "a discard-only address"],
  ["fe80::", 10, 6, "a link-local address"],
  ["fec0::", 10, 6, "a site-local address"],
  ["fc00::", 7, 6, "a private (unique local) address"],
  ["ff00::", 8, 6, "a multicast address"],
  ["64:ff9b::", 96, 6, "a translated (NAT64) address"],
  ["64:ff9b:1::", 48, 6, "a translated (local NAT64) address"],
  ["2001::", 32, 6, "a Teredo tunnel address"],
  ["2001:2::", 48, 6, "a benchmarking address"],
  ["2001:10::", 28, 6, "a reserved (ORCHID) address"],
  ["2001:20::", 28, 6, "a reserved (ORCHID) address"],
  ["2001:db8::", 32, 6, "a documentation address"],
  ["3fff::", 20, 6, "a documentation address"],
  ["5f00::", 16, 6, "a reserved (segment routing) address"],
];

const RANGE_LISTS = RANGES.map(([net, prefix, family, reason]) => {
  const list = new BlockList();
  list.addSubnet(net, prefix, family === 4 ? "ipv4" : "ipv6");
  return { list, family, reason };
});

/** The eight 16-bit words of an IPv6 address `isIP` accepted (a zone and a dotted IPv4 tail allowed). */
function ipv6Words(address: string): number[] {
  let text = address.split("%")[0]!.toLowerCase();
  const dotted = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split("::") as [string, string?];
  const words = (part: string | undefined) =>
    part ? part.split(":").map((w) => Number.parseInt(w, 16)) : [];
  const left = words(head);
  const right = words(tail);
  return tail === undefined
    ? left
    : [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

function dottedOf(hi: number, lo: number): string {
  return [hi >> 8, hi & 255, lo >> 8, lo & 255].join(".");
}

/**
 * The IPv4 address an IPv6 address carries, and how it is written: IPv4-mapped (`::ffff:a.b.c.d`),
 * IPv4-compatible (`::a.b.c.d`), IPv4-translated (`::ffff:0:a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`)
 * and 6to4 (`2002:aabb:ccdd::`, whose packets go to a.b.c.d).
 */
function embeddedIpv4(address: string): { address: string; form: string } | undefined {
  const w = ipv6Words(address);
  if (w.length !== 8) return undefined;
  const zero = (from: number, to: number) => w.slice(from, to).every((x) => x === 0);
  if (w[0] === 0x2002) return { address: dottedOf(w[1]!, w[2]!), form: "a 6to4 address" };
  const last = dottedOf(w[6]!, w[7]!);
  if (zero(0, 5) && w[5] === 0xffff) return { address: last, form: "an IPv4-mapped address" };
  if (zero(0, 6)) return { address: last, form: "an IPv4-compatible address" };
  if (zero(0, 4) && w[4] === 0xffff && w[5] === 0)
    return { address: last, form: "an IPv4-translated address" };
  if (w[0] === 0x64 && w[1] === 0xff9b && zero(2, 6)) return { address: last, form: "a NAT64 address" };
  return undefined;
}

/** `::ffff:127.0.0.1` (or `::ffff:7f00:1`, as URLs write it) is 127.0.0.1 for every purpose here. */
function plainAddress(address: string): { address: string; family: 4 | 6 } {
  if (isIP(address) !== 6) return { address, family: 4 };
  const inner = embeddedIpv4(address);
  if (inner?.form === "an IPv4-mapped address") return { address: inner.address, family: 4 };
  return { address, family: 6 };
}

function rangeReason(address: string, family: 4 | 6): string | undefined {
  for (const r of RANGE_LISTS) {
    if (r.family === family && r.list.check(address, family === 4 ? "ipv4" : "ipv6")) return r.reason;
  }
  return undefined;
}

/**
 * Why Berth refuses to contact `address` (unless allow-listed), or undefined for a public address.
 * An IPv6 address that carries an IPv4 address is also judged by the IPv4 rules on that address.
 */
export function forbiddenReason(address: string): string | undefined {
  const a = plainAddress(address);
  if (a.family === 4) return rangeReason(a.address, 4);
  // ::1 and :: are themselves, not the IPv4-compatible forms of 0.0.0.1 and 0.0.0.0.
  const own = rangeReason(a.address, 6);
  if (own === "a loopback address" || own === "a reserved (unspecified) address") return own;
  const inner = embeddedIpv4(a.address);
  const innerReason = inner && rangeReason(inner.address, 4);
  if (inner && innerReason) return `${inner.form} of ${inner.address}, ${innerReason}`;
  return own;
}

/** Whether an allow-list entry names this host (by name) or this address (exactly or by CIDR). */
export function allowListed(allow: string[], hostname: string, address: string): boolean {
  const a = plainAddress(address);
  for (const entry of allow) {
    if (entry.toLowerCase() === hostname.toLowerCase()) return true;
    const [net, prefix] = entry.split("/");
    const family = isIP(net ?? "");
    if (family === 0 || family !== a.family) continue;
    const list = new BlockList();
    const type = family === 4 ? "ipv4" : "ipv6";
    if (prefix === undefined) list.addAddress(net!, type);
    else list.addSubnet(net!, Number(prefix), type);
    if (list.check(a.address, type)) return true;
  }
  return false;
}

const systemLookup: HostLookup = async (hostname) =>
  (await dnsLookup(hostname, { all: true, verbatim: true })).map((r) => ({
    address: r.address,
    family: r.family === 6 ? 6 : 4,
  }));

async function withTimeout<T>(what: string, ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new OutboundFailed(`${what} did not finish within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Resolves a host and returns the address Berth may connect to. Every address the name resolves
 * to must be allowed: a name that also points inside would otherwise be a way in.
 */
export async function resolveAllowed(policy: OutboundPolicy, hostname: string): Promise<ResolvedAddress> {
  let addresses: ResolvedAddress[];
  if (isIP(hostname)) {
    addresses = [{ address: hostname, family: isIP(hostname) === 6 ? 6 : 4 }];
  } else {
    try {
      addresses = await withTimeout(
        `looking up ${hostname}`,
        policy.timeoutMs,
        (policy.lookup ?? systemLookup)(hostname),
      );
    } catch (err) {
      if (err instanceof OutboundFailed) throw err;
      throw new OutboundFailed(
        `${hostname} does not resolve (${(err as NodeJS.ErrnoException).code ?? "error"})`,
      );
    }
  }
  if (addresses.length === 0) throw new OutboundFailed(`${hostname} does not resolve`);
  for (const a of addresses) {
    const reason = forbiddenReason(a.address);
    if (reason && !allowListed(policy.allow, hostname, a.address)) {
      const shown = hostname === a.address ? hostname : `${hostname} resolves to ${a.address},`;
      throw new OutboundRefused(
        `${shown} ${hostname === a.address ? "is" : "which is"} ${reason}; Berth does not contact it unless ${policy.allowSetting ?? "BERTH_REGISTRY_ALLOW"} names it`,
      );
    }
  }
  return addresses[0]!;
}

/** Whether a registry host is reached over plain HTTP: named in the insecure list, or a loopback address (Docker's rule). */
export function usesPlainHttp(policy: OutboundPolicy, host: string): boolean {
  const { hostname } = splitHost(host);
  if (policy.insecure.some((h) => h === host || h === hostname)) return true;
  return isIP(hostname) !== 0 && forbiddenReason(hostname) === "a loopback address";
}

export interface OutboundResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

const MAX_BODY_BYTES = 1024 * 1024;
const MAX_REDIRECTS = 3;

function once(
  url: URL,
  target: ResolvedAddress,
  init: { method: string; headers: Record<string, string>; body?: string },
  timeoutMs: number,
): Promise<OutboundResponse> {
  const client = url.protocol === "https:" ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(
      {
        protocol: url.protocol,
        hostname: url.hostname.replace(/^\[|\]$/g, ""),
        port: url.port || undefined,
        path: `${url.pathname}${url.search}`,
        method: init.method,
        headers: { "user-agent": "berth", ...init.headers },
        // Connect to the address that was checked, whatever a second lookup would say.
        lookup: (_hostname, options, callback) => {
          const cb = callback as (err: Error | null, address: unknown, family?: number) => void;
          if ((options as { all?: boolean }).all) cb(null, [target]);
          else cb(null, target.address, target.family);
        },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_BODY_BYTES) {
            req.destroy(new OutboundFailed(`${url.host} answered with more than ${MAX_BODY_BYTES} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString("utf8"),
          }),
        );
        res.on("error", reject);
      },
    );
    const timer = setTimeout(
      () => req.destroy(new OutboundFailed(`${url.host} did not answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
    req.on("close", () => clearTimeout(timer));
    req.on("error", (err: NodeJS.ErrnoException) => {
      if (err instanceof OutboundFailed) return reject(err);
      if (url.protocol === "https:" && (err.code === "EPROTO" || /SSL|TLS|certificate/i.test(err.message))) {
        return reject(
          new OutboundFailed(
            `${url.host} did not complete a TLS handshake (${err.code ?? err.message.split("\n")[0]}); a registry served over plain HTTP must be listed in BERTH_INSECURE_REGISTRIES`,
          ),
        );
      }
      reject(new OutboundFailed(`${url.host} is unreachable: ${err.code ?? err.message}`));
    });
    req.end(init.body);
  });
}

/**
 * One HTTP call to a host a user named, under the policy: the host is resolved and checked, the
 * call is bounded in time and size, and a redirect is followed only to the same origin.
 */
export async function outboundRequest(
  policy: OutboundPolicy,
  url: URL,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<OutboundResponse> {
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new OutboundRefused(`${url.href} is not an http(s) URL`);
  }
  let current = url;
  for (let hop = 0; ; hop++) {
    const target = await resolveAllowed(policy, current.hostname.replace(/^\[|\]$/g, ""));
    const res = await once(
      current,
      target,
      { method: init.method ?? "GET", headers: init.headers ?? {}, body: init.body },
      policy.timeoutMs,
    );
    const location = res.headers.location;
    if (res.status < 300 || res.status >= 400 || !location) return res;
    const next = new URL(location, current);
    if (next.origin !== current.origin) {
      throw new OutboundRefused(
        `${current.host} redirected to another host (${next.host}); Berth follows redirects only within the same host`,
      );
    }
    if (hop >= MAX_REDIRECTS)
      throw new OutboundFailed(`${current.host} redirected more than ${MAX_REDIRECTS} times`);
    current = next;
  }
}
