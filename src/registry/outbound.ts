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
  ["198.18.0.0", 15, 4, "a reserved address"],
  ["198.51.100.0", 24, 4, "a documentation address"],
  ["203.0.113.0", 24, 4, "a documentation address"],
  ["224.0.0.0", 4, 4, "a multicast address"],
  ["240.0.0.0", 4, 4, "a reserved address"],
  ["::1", 128, 6, "a loopback address"],
  ["::", 128, 6, "a reserved address"],
  ["fe80::", 10, 6, "a link-local address"],
  ["fc00::", 7, 6, "a private address"],
  ["ff00::", 8, 6, "a multicast address"],
  ["64:ff9b::", 96, 6, "a translated (NAT64) address"],
  ["2001:db8::", 32, 6, "a documentation address"],
];

const RANGE_LISTS = RANGES.map(([net, prefix, family, reason]) => {
  const list = new BlockList();
  list.addSubnet(net, prefix, family === 4 ? "ipv4" : "ipv6");
  return { list, family, reason };
});

const IPV4_MAPPED = new BlockList();
IPV4_MAPPED.addSubnet("::ffff:0:0", 96, "ipv6");

/** `::ffff:127.0.0.1` (or `::ffff:7f00:1`, as URLs write it) is 127.0.0.1 for every purpose here. */
function plainAddress(address: string): { address: string; family: 4 | 6 } {
  const dotted = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (dotted) return { address: dotted[1]!, family: 4 };
  if (isIP(address) !== 6) return { address, family: 4 };
  const hex = /:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
  if (hex && IPV4_MAPPED.check(address, "ipv6")) {
    const hi = Number.parseInt(hex[1]!, 16);
    const lo = Number.parseInt(hex[2]!, 16);
    return { address: [hi >> 8, hi & 255, lo >> 8, lo & 255].join("."), family: 4 };
  }
  return { address, family: 6 };
}

/** Why Berth refuses to contact `address` (unless allow-listed), or undefined for a public address. */
export function forbiddenReason(address: string): string | undefined {
  const a = plainAddress(address);
  for (const r of RANGE_LISTS) {
    if (r.family === a.family && r.list.check(a.address, a.family === 4 ? "ipv4" : "ipv6")) return r.reason;
  }
  return undefined;
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
        `${shown} ${hostname === a.address ? "is" : "which is"} ${reason}; Berth does not contact it unless BERTH_REGISTRY_ALLOW names it`,
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
  init: { method: string; headers: Record<string, string> },
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
    req.end();
  });
}

/**
 * One HTTP call to a host a user named, under the policy: the host is resolved and checked, the
 * call is bounded in time and size, and a redirect is followed only to the same origin.
 */
export async function outboundRequest(
  policy: OutboundPolicy,
  url: URL,
  init: { method?: string; headers?: Record<string, string> } = {},
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
      { method: init.method ?? "GET", headers: init.headers ?? {} },
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
