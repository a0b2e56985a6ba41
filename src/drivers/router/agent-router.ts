// The router of an agent node (issue 30), as Berth drives it: Caddy runs on the agent's host,
// started and supervised by the agent (src/agent/router.ts), and Berth reaches it only through the
// agent's tunnel (streams whose OPEN names the target `router`; agents of version 2 offer it and
// say so in the tunnel's handshake). Each call is one HTTP request on a stream of its own:
//   POST /ensure        → {restarted}: Caddy started again, or the agent holds no configuration
//   POST /apply         ← {routes, certificates, acme: {directory, email, caRootPem}}
//   GET  /certificates  → CertificateStatus[]
//   GET  /counters      → RouteCounters[]
// The ACME state (accounts, certificates) stays on the node; uploaded certificates and keys cross
// only this channel. The agent is not trusted: every answer is bounded (ROUTER_BOUNDS) and
// checked, and only host names and routes of the configuration Berth gave it are believed.
// No network joins an agent's host to other nodes: its router is given only the upstreams that
// run on its own node (a route with none there answers 502 saying so), never an address that on
// this host could be someone else's container.
import fs from "node:fs";
import http from "node:http";
import type { Duplex } from "node:stream";
import { ROUTER_BOUNDS } from "../bounds.ts";
import { TunnelHttpAgent } from "../tunnel/hub.ts";
import { ROUTE_REFRESH_MS, removedUpstream } from "./dns.ts";
import {
  type CertificateState,
  type CertificateStatus,
  LATENCY_BUCKETS,
  type RouteCounters,
  type Router,
  type RouterConfig,
  RouterUnavailable,
} from "./router.ts";

/** The configuration as the agent takes it: the ACME server's root as PEM, not a path on Berth's host. */
export interface AgentRouterConfig extends Omit<RouterConfig, "acme"> {
  /** The renewal settings are absent from older Berths' configurations (the router's defaults then). */
  acme: {
    directory: string;
    email: string;
    caRootPem: string;
    renewIntervalMs?: number;
    renewalWindowRatio?: number;
  };
}

/** Bytes of the ACME root file sent to the agent at most. */
const MAX_ROOT_BYTES = 256 * 1024;
const STATES: readonly CertificateState[] = ["pending", "issued", "error", "uploaded", "expiring"];

export class AgentRouter implements Router {
  private current: RouterConfig | undefined;
  private readonly agent: TunnelHttpAgent;
  /** Until when an upstream the last configuration removed may still be chosen by the agent's Caddy (its lookups). */
  private settles = 0;

  constructor(
    private readonly o: {
      /** A new stream to the agent's router (fails as a connection error when the agent is not connected). */
      openStream(): Duplex;
      /** Which node, for messages. */
      node: string;
    },
  ) {
    this.agent = new TunnelHttpAgent(() => this.o.openStream());
  }

  async restarted(): Promise<boolean> {
    const v = await this.call("POST", "/ensure");
    return typeof v === "object" && v !== null && (v as { restarted?: unknown }).restarted === true;
  }

  async apply(config: RouterConfig): Promise<void> {
    const body: AgentRouterConfig = {
      routes: config.routes.map((r) => ({
        ...r,
        upstreams: r.upstreams.filter((u) => u.node === this.o.node),
      })),
      certificates: config.certificates,
      acme: {
        directory: config.acme.directory,
        email: config.acme.email,
        caRootPem: config.acme.caRootFile ? readRoot(config.acme.caRootFile) : "",
        renewIntervalMs: config.acme.renewIntervalMs,
        renewalWindowRatio: config.acme.renewalWindowRatio,
      },
    };
    await this.call("POST", "/apply", JSON.stringify(body));
    const before = this.current;
    this.current = structuredClone({ ...config, routes: body.routes });
    if (before && removedUpstream(before, this.current)) this.settles = Date.now() + ROUTE_REFRESH_MS + 200;
  }

  settlesAt(): number {
    return this.settles;
  }

  async certificates(): Promise<CertificateStatus[]> {
    const config = this.current;
    if (!config) return [];
    const hosts = new Set(config.routes.filter((r) => r.tls !== "off").map((r) => r.host));
    const v = await this.call("GET", "/certificates");
    if (!Array.isArray(v)) throw this.malformed("certificates");
    const out = new Map<string, CertificateStatus>();
    for (const e of v.slice(0, hosts.size)) {
      const c = e as Partial<CertificateStatus>;
      if (typeof c?.host !== "string" || !hosts.has(c.host)) continue;
      if (!STATES.includes(c.state as CertificateState)) continue;
      out.set(c.host, {
        host: c.host,
        state: c.state as CertificateState,
        issuer: typeof c.issuer === "string" ? c.issuer.slice(0, 500) : "",
        expiresAt: typeof c.expiresAt === "number" && Number.isFinite(c.expiresAt) ? c.expiresAt : null,
        error: typeof c.error === "string" ? c.error.slice(0, 2000) : null,
        ...(typeof c.serial === "string" && /^[0-9A-Fa-f]{1,128}$/.test(c.serial)
          ? { serial: c.serial }
          : {}),
        ...(typeof c.issuedAt === "number" && Number.isFinite(c.issuedAt) ? { issuedAt: c.issuedAt } : {}),
      });
    }
    return [...out.values()];
  }

  async counters(): Promise<RouteCounters[]> {
    const config = this.current;
    if (!config) return [];
    const ids = new Set(config.routes.map((r) => r.id));
    const v = await this.call("GET", "/counters");
    if (!Array.isArray(v)) throw this.malformed("counters");
    const count = (n: unknown) => (typeof n === "number" && Number.isFinite(n) && n >= 0 ? n : 0);
    const out: RouteCounters[] = [];
    for (const e of v.slice(0, ids.size)) {
      const c = e as Partial<RouteCounters>;
      if (typeof c?.route !== "string" || !ids.has(c.route)) continue;
      const buckets = Array.isArray(c.buckets) ? c.buckets : [];
      out.push({
        route: c.route,
        requests: count(c.requests),
        errors: count(c.errors),
        latencySum: count(c.latencySum),
        buckets: LATENCY_BUCKETS.map((_, i) => count(buckets[i])),
      });
    }
    return out;
  }

  private malformed(what: string): Error {
    return new Error(`the router of agent node ${this.o.node} answered malformed ${what}`);
  }

  /** One request to the agent's router; its JSON answer (undefined for 204). */
  private call(method: string, path: string, body?: string): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          host: "router",
          path,
          method,
          agent: this.agent,
          headers: body ? { "content-type": "application/json" } : {},
          timeout: ROUTER_BOUNDS.callMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on("data", (c: Buffer) => {
            size += c.length;
            if (size > ROUTER_BOUNDS.answerBytes) {
              req.destroy(
                new Error(
                  `the router of agent node ${this.o.node} answered over ${ROUTER_BOUNDS.answerBytes} bytes`,
                ),
              );
              return;
            }
            chunks.push(c);
          });
          res.on("end", () => {
            const text = Buffer.concat(chunks).toString("utf8");
            const status = res.statusCode ?? 0;
            let value: unknown;
            try {
              value = text ? JSON.parse(text) : undefined;
            } catch {
              return reject(this.malformed(`JSON (${status})`));
            }
            if (status >= 200 && status < 300) return resolve(value);
            const said = (value as { error?: unknown } | undefined)?.error;
            const message = `the router of agent node ${this.o.node} refused ${method} ${path} (${status})${
              typeof said === "string" ? `: ${said.slice(0, 2000)}` : ""
            }`;
            const cannotRun = (value as { code?: unknown } | undefined)?.code === "router_unavailable";
            reject(
              cannotRun && typeof said === "string"
                ? new RouterUnavailable(said.slice(0, 2000))
                : new Error(message),
            );
          });
          res.on("error", reject);
        },
      );
      req.on("timeout", () =>
        req.destroy(
          new Error(
            `the router of agent node ${this.o.node} did not answer within ${ROUTER_BOUNDS.callMs} ms`,
          ),
        ),
      );
      req.on("error", reject);
      req.end(body);
    });
  }
}

function readRoot(file: string): string {
  const fd = fs.openSync(file, "r");
  try {
    const buf = Buffer.alloc(Math.min(fs.fstatSync(fd).size, MAX_ROOT_BYTES));
    fs.readSync(fd, buf, 0, buf.length, 0);
    return buf.toString("utf8");
  } finally {
    fs.closeSync(fd);
  }
}
