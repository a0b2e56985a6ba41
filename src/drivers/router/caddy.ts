// The router driver on Caddy 2 (issue 30). Why Caddy rather than HAProxy: one process takes the
// whole configuration as one JSON document over its admin API and swaps it in without a restart
// (open connections finish on the old one), and it obtains and renews ACME certificates itself
// (HTTP-01 and TLS-ALPN-01, any directory URL, a private root for the directory); HAProxy 2.6's
// runtime API changes servers and maps but not frontends or certificates' issuance, so Berth would
// have to run an ACME client and reload for new domains. WebSocket and HTTP/2 pass through Caddy's
// reverse proxy as they are.
//
// The admin API listens on a unix socket only (a container on the node cannot reach it). What the
// router reports: certificates by a TLS handshake with each host name (what a client would get)
// and, when none is served, the last error Caddy logged obtaining it; request figures from its
// access log, read incrementally. Every read is bounded (drivers/bounds.ts ROUTER_BOUNDS).
//
// A configuration is loaded only when its shape changed (router.ts routingShape): a load closes
// every WebSocket Caddy 2.6 proxies. A change of upstreams alone is published to the router's
// route resolver (dns.ts), where Caddy looks them up every second; settlesAt() says until when a
// removed upstream may still be chosen (the controller's pushes wait for it before a drain goes on).
import { createHash } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import tls from "node:tls";
import { matchRoute } from "../../domain/router-config.ts";
import { ROUTER_BOUNDS } from "../bounds.ts";
import { type CaddyPaths, caddyConfig } from "./caddy-config.ts";
import { type RouteDns, removedUpstream } from "./dns.ts";
import {
  type ApplyCounts,
  bucketsOf,
  type CertificateStatus,
  LATENCY_BUCKETS,
  type RouteCounters,
  type Router,
  type RouterConfig,
  routingShape,
} from "./router.ts";

export interface CaddyRouterOptions {
  /** Path of the admin API's unix socket. */
  adminSocket: string;
  paths: CaddyPaths;
  /** The address the router's :443 is reached at (certificate probes). */
  address: string;
  /** Starts Caddy when it does not run; true when it was (re)started (its configuration is lost then). */
  ensureRunning(): Promise<boolean>;
  /** Stops Caddy and removes its files (the node is gone). */
  remove?(): Promise<void>;
  /** The route resolver routes' upstreams are looked up at; none: upstreams are in the configuration (each change a load). */
  dns?: RouteDns;
  /**
   * Where the shape of the configuration Caddy runs is kept (its digest), so a driver made again
   * (Berth or the agent restarted, Caddy still running) loads nothing for a configuration of the
   * same shape; removed when Caddy starts (caddy-process.ts).
   */
  shapeFile?: string;
}

/** What a TLS handshake with a host name got: a certificate issued for it. */
interface Served {
  issuer: string;
  expiresAt: number;
  serial: string;
  issuedAt: number;
}

export class CaddyRouter implements Router {
  private current: RouterConfig | undefined;
  private accessOffset = 0;
  private readonly counts = new Map<string, RouteCounters>();
  /** The shape of the configuration Caddy runs (undefined: none loaded by this driver, or Caddy started again). */
  private loaded: string | undefined;
  readonly applyCounts: ApplyCounts = { loads: 0, upstreamUpdates: 0 };
  /** Until when an upstream the last configuration removed may still be chosen (Caddy's cached lookups). */
  private settles = 0;

  constructor(private readonly o: CaddyRouterOptions) {}

  settlesAt(): number {
    return this.settles;
  }

  /** Whether Caddy had to be started again (a crash, a reboot): the caller gives it its configuration again. */
  async restarted(): Promise<boolean> {
    const again = await this.o.ensureRunning();
    if (again) this.forgetLoaded();
    return again;
  }

  /** Caddy was started again: it runs no configuration. */
  private forgetLoaded(): void {
    this.loaded = undefined;
    if (this.o.shapeFile) fs.rmSync(this.o.shapeFile, { force: true });
  }

  /** The shape Caddy runs: this driver's last load, or what the file says a driver before it loaded. */
  private loadedShape(): string | undefined {
    if (this.loaded === undefined && this.o.shapeFile) {
      try {
        this.loaded = fs.readFileSync(this.o.shapeFile, "utf8").trim().slice(0, 64) || undefined;
      } catch {
        // none kept: the next configuration is loaded
      }
    }
    return this.loaded;
  }

  async apply(config: RouterConfig): Promise<void> {
    if (await this.o.ensureRunning()) this.forgetLoaded();
    const dns = this.o.dns;
    const before = this.current;
    if (dns) {
      const resolver = await dns.address();
      // Published before a load, so the routes it adds are answered from its first request.
      dns.publish(config.routes);
      const shape = createHash("sha256")
        .update(`${resolver} ${routingShape(config)}`)
        .digest("hex");
      if (shape === this.loadedShape()) {
        this.applyCounts.upstreamUpdates += 1;
      } else {
        if (this.o.shapeFile) fs.rmSync(this.o.shapeFile, { force: true });
        await this.load(caddyConfig(config, this.o.paths, { resolver, refreshMs: dns.refreshMs }));
        this.loaded = shape;
        if (this.o.shapeFile) fs.writeFileSync(this.o.shapeFile, `${shape}\n`, { mode: 0o600 });
      }
      this.current = structuredClone(config);
      // Caddy keeps an answer for refreshMs: a removed upstream is chosen no longer after that.
      if (before && removedUpstream(before, config)) this.settles = Date.now() + dns.refreshMs + 200;
      return;
    }
    await this.load(caddyConfig(config, this.o.paths));
    this.current = structuredClone(config);
  }

  private async load(document: Record<string, unknown>): Promise<void> {
    const res = await this.admin("POST", "/load", JSON.stringify(document));
    if (res.status !== 200)
      throw new Error(`the router refused its configuration (${res.status}): ${res.body.slice(0, 2000)}`);
    this.applyCounts.loads += 1;
  }

  async certificates(): Promise<CertificateStatus[]> {
    const config = this.current;
    if (!config) return [];
    const uploaded = new Set(config.certificates.map((c) => c.host));
    const hosts = [...new Set(config.routes.filter((r) => r.tls !== "off").map((r) => r.host))];
    const errors = this.obtainErrors();
    return Promise.all(
      hosts.map(async (host): Promise<CertificateStatus> => {
        const served = host.startsWith("*.") ? undefined : await this.probe(host);
        if (uploaded.has(host))
          return {
            host,
            state: "uploaded",
            issuer: served?.issuer ?? "",
            expiresAt: served?.expiresAt ?? null,
            error: null,
          };
        if (served)
          return {
            host,
            state: "issued",
            issuer: served.issuer,
            expiresAt: served.expiresAt,
            error: null,
            serial: served.serial,
            issuedAt: served.issuedAt,
          };
        const error = errors.get(host);
        return {
          host,
          state: error ? "error" : "pending",
          issuer: "",
          expiresAt: null,
          error: error ?? null,
        };
      }),
    );
  }

  async counters(): Promise<RouteCounters[]> {
    this.readAccessLog();
    return [...this.counts.values()].map((c) => ({ ...c, buckets: [...c.buckets] }));
  }

  async remove(): Promise<void> {
    await this.o.remove?.();
  }

  /** The certificate a client gets for the host name, when it is one issued for it. */
  private probe(host: string): Promise<Served | undefined> {
    return new Promise((resolve) => {
      const socket = tls.connect({
        host: this.o.address,
        port: 443,
        servername: host,
        rejectUnauthorized: false,
        timeout: ROUTER_BOUNDS.probeMs,
      });
      const done = (v: Served | undefined) => {
        socket.destroy();
        resolve(v);
      };
      socket.once("secureConnect", () => {
        const cert = socket.getPeerCertificate();
        const names = (cert?.subjectaltname ?? "").split(/,\s*/).map((n) => n.replace(/^DNS:/, ""));
        if (!cert?.valid_to || !names.includes(host)) return done(undefined);
        const issuer = [cert.issuer?.O, cert.issuer?.CN].filter(Boolean).join(" ") || "unknown issuer";
        done({
          issuer: String(issuer),
          expiresAt: Date.parse(cert.valid_to),
          serial: String(cert.serialNumber ?? ""),
          issuedAt: Date.parse(cert.valid_from),
        });
      });
      socket.once("timeout", () => done(undefined));
      socket.once("error", () => done(undefined));
    });
  }

  /** The last error Caddy logged obtaining each host name's certificate (from the tail of its log). */
  private obtainErrors(): Map<string, string> {
    const out = new Map<string, string>();
    for (const line of tailLines(this.o.paths.logFile, ROUTER_BOUNDS.logTailBytes)) {
      if (!line.includes('"error"') || !line.includes("tls.")) continue;
      let entry: { level?: string; identifier?: string; error?: string; msg?: string };
      try {
        entry = JSON.parse(line);
      } catch {
        continue;
      }
      if (entry.level !== "error" || !entry.identifier || !entry.error) continue;
      // A job cut short by a configuration load is started again: not the order's failure.
      if (entry.error.includes("context canceled")) continue;
      out.set(entry.identifier, `${entry.msg ? `${entry.msg}: ` : ""}${entry.error}`);
    }
    // A certificate obtained after an error: the handshake says so first (see certificates()).
    return out;
  }

  /** Reads the access log from where the last reading ended, adding each request to its route. */
  private readAccessLog(): void {
    const routes = this.current?.routes ?? [];
    let fd: number;
    try {
      fd = fs.openSync(this.o.paths.accessLogFile, "r");
    } catch {
      return;
    }
    try {
      const size = fs.fstatSync(fd).size;
      if (size < this.accessOffset) this.accessOffset = 0; // rolled over
      const start = Math.max(this.accessOffset, size - ROUTER_BOUNDS.accessReadBytes);
      const buf = Buffer.alloc(size - start);
      fs.readSync(fd, buf, 0, buf.length, start);
      const text = buf.toString("utf8");
      const end = text.lastIndexOf("\n");
      if (end < 0) return;
      this.accessOffset = start + Buffer.byteLength(text.slice(0, end + 1));
      for (const line of text.slice(0, end).split("\n")) {
        let e: { request?: { host?: string; uri?: string }; status?: number; duration?: number };
        try {
          e = JSON.parse(line);
        } catch {
          continue;
        }
        const host = e.request?.host ?? "";
        const uri = e.request?.uri ?? "/";
        const r = matchRoute(routes, host, uri.split("?")[0] ?? "/");
        if (!r) continue;
        const c = this.counts.get(r.id) ?? {
          route: r.id,
          requests: 0,
          errors: 0,
          latencySum: 0,
          buckets: LATENCY_BUCKETS.map(() => 0),
        };
        const seconds = Number(e.duration ?? 0);
        c.requests += 1;
        if ((e.status ?? 0) >= 500) c.errors += 1;
        c.latencySum += seconds;
        const add = bucketsOf(seconds);
        c.buckets = c.buckets.map((n, i) => n + add[i]!);
        this.counts.set(r.id, c);
      }
    } finally {
      fs.closeSync(fd);
    }
  }

  private admin(method: string, path: string, body?: string): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          socketPath: this.o.adminSocket,
          path,
          method,
          headers: { "content-type": "application/json", host: "localhost" },
          timeout: ROUTER_BOUNDS.callMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on("data", (c: Buffer) => {
            size += c.length;
            if (size > ROUTER_BOUNDS.answerBytes) {
              req.destroy(new Error(`the router's admin answer is over ${ROUTER_BOUNDS.answerBytes} bytes`));
              return;
            }
            chunks.push(c);
          });
          res.on("end", () =>
            resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }),
          );
          res.on("error", reject);
        },
      );
      req.on("timeout", () =>
        req.destroy(new Error(`the router's admin API did not answer within ${ROUTER_BOUNDS.callMs} ms`)),
      );
      req.on("error", reject);
      req.end(body);
    });
  }
}

/** The last lines of a file, reading at most `bytes` of its end. */
function tailLines(file: string, bytes: number): string[] {
  let fd: number;
  try {
    fd = fs.openSync(file, "r");
  } catch {
    return [];
  }
  try {
    const size = fs.fstatSync(fd).size;
    const start = Math.max(0, size - bytes);
    const buf = Buffer.alloc(size - start);
    fs.readSync(fd, buf, 0, buf.length, start);
    const lines = buf.toString("utf8").split("\n");
    if (start > 0) lines.shift();
    return lines.filter(Boolean);
  } finally {
    fs.closeSync(fd);
  }
}
