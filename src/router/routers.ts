// The router capability (issue 30): which router serves a node (a fake one on simulated
// nodes, Caddy in a local node's namespace, Caddy run by the agent on an agent node), the controller that configures them from the change
// feed, drains, request figures (API and /metrics). module.ts assembles it for platform.ts.
import { Gauge, type Registry } from "prom-client";
import type { RouterSettings } from "../config/router.ts";
import type { RoutesOutput } from "../domain/router-config.ts";
import { serviceUri } from "../domain/uri.ts";
import { FakeRouter } from "../drivers/router/fake-router.ts";
import { LATENCY_BUCKETS, type RouteCounters, type Router } from "../drivers/router/router.ts";
import { specOf } from "../store/codec.ts";
import type { NodeRow } from "../store/nodes.ts";
import { RouterStore } from "../store/router.ts";
import type { ContainerRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import { RouterController, type RouterSource } from "./controller.ts";
import { Drains } from "./drains.ts";

export interface RouterModuleDeps {
  store: Store;
  settings: RouterSettings;
  open(sealed: string): string;
  /** The router of a local node (Caddy in its namespace), when the local provider runs it. */
  localRouter?(node: NodeRow): Router | undefined;
  /** A local node was terminated: its router's files go. */
  releaseLocal?(nodeUuid: string): Promise<void>;
  /** The module stopped: what the local routers listen on (their route resolver) closes. */
  stopped?(): void;
  /**
   * The router of an agent node, driven through its agent's tunnel, when the agent is connected to
   * this replica and runs one (drivers/router/agent-router.ts).
   */
  agentRouter?(node: NodeRow): Router | undefined;
  /** Whether this replica holds the node's agent tunnel (it alone can configure that router). */
  agentHere?(nodeUuid: string): boolean;
  /** An agent node was terminated: what Berth kept of its router goes (the agent removes Caddy). */
  releaseAgent?(nodeUuid: string): void;
  onError(err: unknown): void;
  /** Whether this replica configures the node's router (duties.ownsNode); undefined: every node. */
  ownsNode?(nodeUuid: string): boolean;
}

/** Figures of one route: totals, and rates over the last reading's window. */
export interface RouteFigures {
  requests_total: number;
  requests_per_second: number;
  error_rate: number;
  latency_p99_ms: number | null;
}

export class RouterModule implements RouterSource {
  readonly controller: RouterController;
  readonly drains: Drains;
  /** The fake routers of simulated nodes, by node uuid (tests look at them). */
  readonly fakes = new Map<string, FakeRouter>();
  private readonly nodes = new Map<string, NodeRow>();
  /** The previous reading of each route's counters (summed over nodes) and when it was taken. */
  private readonly previous = new Map<
    string,
    { at: number; c: RouteCounters; rate: number; errors: number }
  >();

  constructor(private readonly d: RouterModuleDeps) {
    this.controller = new RouterController({
      store: d.store,
      routers: this,
      acme: {
        directory: d.settings.acmeDirectory,
        email: d.settings.acmeEmail,
        caRootFile: d.settings.acmeCaRoot,
        renewIntervalMs: d.settings.renewIntervalMs,
        renewalWindowRatio: d.settings.renewalWindowRatio,
      },
      open: d.open,
      drains: () => this.drains,
      ownsNode: d.ownsNode,
      attachedHere: d.agentHere,
      intervalMs: d.settings.intervalMs,
      now: () => Date.now(),
      onError: d.onError,
    });
    this.drains = new Drains({
      store: d.store,
      now: () => Date.now(),
      push: (namespaces, timeoutMs) => this.controller.push(namespaces, timeoutMs),
      routes: async (ns) =>
        (this.controller.routesOf(ns) ?? (await this.controller.build(ns))).routes.length > 0,
      graceMs: d.settings.drainGraceMs,
      timeoutMs: d.settings.drainTimeoutMs,
      holdMaxMs: d.settings.holdMaxMs,
    });
  }

  forNode(node: NodeRow): Router | undefined {
    this.nodes.set(node.uuid, node);
    if (node.engine_url.startsWith("fake://")) {
      let fake = this.fakes.get(node.uuid);
      if (!fake) {
        fake = new FakeRouter(node.uuid);
        this.fakes.set(node.uuid, fake);
      }
      return fake;
    }
    if (node.provider === "local") return this.d.localRouter?.(node);
    if (node.engine_url.startsWith("tunnel://")) return this.d.agentRouter?.(node);
    return undefined;
  }

  async released(nodeUuid: string): Promise<void> {
    this.fakes.delete(nodeUuid);
    this.d.releaseAgent?.(nodeUuid);
    await this.d.releaseLocal?.(nodeUuid);
  }

  drain(rows: readonly ContainerRow[]): Promise<void> {
    return this.drains.drain(rows);
  }

  hold(rows: readonly ContainerRow[]): Promise<void> {
    return this.drains.hold(rows);
  }

  release(rows: readonly ContainerRow[]): Promise<void> {
    return this.drains.release(rows);
  }

  pause(containerUuids: readonly string[]): Promise<void> {
    return this.drains.pause(containerUuids);
  }

  start(): void {
    this.controller.start();
  }

  stop(): void {
    this.controller.stop();
    this.d.stopped?.();
  }

  /**
   * The `certificate_expiring` alert kind's source (alerts/conditions.ts): each certificate of the
   * namespace (ACME or uploaded) expiring within `days`, on each service serving its host name.
   */
  async expiringCertificates(
    rule: { namespace: string; params: { days?: number } },
    now: number,
  ): Promise<{ subject: string; summary: string }[]> {
    const before = now + (rule.params.days ?? 14) * 86_400_000;
    const soon = (await new RouterStore(this.d.store).certificatesOfNamespace(rule.namespace)).filter(
      (c) => c.expires_at !== null && c.expires_at <= before,
    );
    if (soon.length === 0) return [];
    const services = await this.d.store.services.liveServices({ namespace: rule.namespace });
    const out: { subject: string; summary: string }[] = [];
    for (const c of soon) {
      const when = new Date(c.expires_at!).toISOString();
      for (const s of services.filter((x) => (specOf(x).domains ?? []).some((d) => d.host === c.host)))
        out.push({
          subject: serviceUri(s),
          summary: `the certificate of ${c.host} (${c.state}) ${c.expires_at! <= now ? "expired" : "expires"} at ${when}`,
        });
    }
    return out;
  }

  /** The routes of a namespace now (built again, so what the API shows is current). */
  routes(namespace: string): Promise<RoutesOutput> {
    return this.controller.build(namespace);
  }

  /** Each route's counters summed over the routers of the namespace's nodes. */
  async counters(namespace: string): Promise<Map<string, RouteCounters>> {
    const out = new Map<string, RouteCounters>();
    const nodes = (await this.d.store.nodes.liveNodes({ namespace })).filter((n) => n.state === "Deployed");
    for (const n of nodes) {
      const router = this.forNode(n);
      if (!router) continue;
      const list = await router.counters().catch((err: unknown) => {
        this.d.onError(err);
        return [] as RouteCounters[];
      });
      for (const c of list) {
        const sum = out.get(c.route);
        if (!sum) out.set(c.route, { ...c, buckets: [...c.buckets] });
        else {
          sum.requests += c.requests;
          sum.errors += c.errors;
          sum.latencySum += c.latencySum;
          sum.buckets = sum.buckets.map((b, i) => b + (c.buckets[i] ?? 0));
        }
      }
    }
    return out;
  }

  /** Totals and rates of a route from its counters (rates over the window since the last reading, at least 1 s). */
  figures(route: string, c: RouteCounters | undefined, now = Date.now()): RouteFigures {
    if (!c) return { requests_total: 0, requests_per_second: 0, error_rate: 0, latency_p99_ms: null };
    const prev = this.previous.get(route);
    let rate = prev?.rate ?? 0;
    let errors = prev?.errors ?? (c.requests > 0 ? c.errors / c.requests : 0);
    if (!prev || now - prev.at >= 1000) {
      if (prev) {
        const dt = (now - prev.at) / 1000;
        const dr = Math.max(0, c.requests - prev.c.requests);
        rate = dr / dt;
        errors = dr > 0 ? Math.max(0, c.errors - prev.c.errors) / dr : 0;
      }
      this.previous.set(route, { at: now, c, rate, errors });
    }
    return {
      requests_total: c.requests,
      requests_per_second: rate,
      error_rate: errors,
      latency_p99_ms: p99(c),
    };
  }

  /** Route figures on /metrics: requests, errors and latency per route, read when scraped. */
  registerMetrics(registry: Registry): void {
    const labelNames = ["namespace", "host", "path", "service"] as const;
    // Registered in this order, and written in it: the first one's collect reads every figure.
    const requests: Gauge<(typeof labelNames)[number]> = new Gauge({
      name: "berth_route_requests_total",
      help: "Requests a route's routers answered since they started",
      labelNames,
      registers: [registry],
      collect: () => this.collect(requests, errors, latency),
    });
    const errors = new Gauge({
      name: "berth_route_errors_total",
      help: "Answers 5xx of a route's routers since they started",
      labelNames,
      registers: [registry],
    });
    const latency = new Gauge({
      name: "berth_route_latency_p99_seconds",
      help: "99th percentile of a route's request latency since its routers started",
      labelNames,
      registers: [registry],
    });
  }

  private async collect(
    requests: Gauge<"namespace" | "host" | "path" | "service">,
    errors: Gauge<"namespace" | "host" | "path" | "service">,
    latency: Gauge<"namespace" | "host" | "path" | "service">,
  ): Promise<void> {
    requests.reset();
    errors.reset();
    latency.reset();
    for (const [ns, built] of this.controller.allRoutes()) {
      const counters = await this.counters(ns).catch(() => new Map<string, RouteCounters>());
      for (const r of built.routes) {
        const c = counters.get(r.id);
        const labels = { namespace: ns, host: r.host, path: r.path, service: r.service_name };
        requests.set(labels, c?.requests ?? 0);
        errors.set(labels, c?.errors ?? 0);
        const p = c ? p99(c) : null;
        if (p !== null) latency.set(labels, p / 1000);
      }
    }
  }
}

/** The 99th percentile from cumulative buckets, in ms (the bucket's bound); null without requests. */
export function p99(c: RouteCounters): number | null {
  if (c.requests === 0) return null;
  const want = c.requests * 0.99;
  for (const [i, bound] of LATENCY_BUCKETS.entries()) if ((c.buckets[i] ?? 0) >= want) return bound * 1000;
  return LATENCY_BUCKETS.at(-1)! * 1000;
}
