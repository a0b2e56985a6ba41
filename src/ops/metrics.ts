// Prometheus metrics of one replica (prom-client, on its own registry rather than the library's
// global one, so that tests can assemble several platforms in one process). Counters and
// histograms are fed by hooks of the parts that do the work; queue depth, reconcile lag and open
// streams are read when Prometheus scrapes.
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { NamespaceUsage } from "../store/stats.ts";

export interface ScrapeSources {
  /** Unfinished actions of the whole installation (the database). */
  actionQueue(): Promise<{ pending: number; active: number; oldestPendingStart: number | null }>;
  /** When the last periodic reconcile pass ended, by any replica (epoch ms), if one did. */
  lastReconcilePass(): Promise<number | undefined>;
  openStreams(): number;
  ownedNodes(): number;
  liveReplicas(): number;
  now(): number;
}

export class Metrics {
  readonly registry = new Registry();
  private sources: ScrapeSources | undefined;

  readonly httpDuration = new Histogram({
    name: "berth_http_request_duration_seconds",
    help: "HTTP request latency by route and status",
    labelNames: ["method", "route", "status"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly actionsEnded = new Counter({
    name: "berth_actions_total",
    help: "Actions ended on this replica by kind and outcome (synchronous calls have kind 'call')",
    labelNames: ["kind", "outcome"] as const,
    registers: [this.registry],
  });

  // Not labelled by node: at 1,000 nodes that label made some 200,000 series (nodes × operations ×
  // results × buckets), more than a Prometheus server should take from one target. A slow or failing
  // node shows in its own state and health checks (the node API and its events).
  readonly engineCalls = new Histogram({
    name: "berth_engine_call_duration_seconds",
    help: "Engine call latency by operation and result (every node together)",
    labelNames: ["operation", "result"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  readonly feedLag = new Histogram({
    name: "berth_change_feed_lag_seconds",
    help: "Delay between a change committed by another replica and its notification here",
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  constructor(replicaId: string) {
    this.registry.setDefaultLabels({ replica: replicaId });
    this.tenantRegistry.setDefaultLabels({ replica: replicaId });
    collectDefaultMetrics({ register: this.registry, prefix: "berth_process_" });
    const self = this;
    // One read per scrape feeds the four per-namespace gauges.
    let pending: Promise<NamespaceUsage[]> | undefined;
    const usage = (): Promise<NamespaceUsage[]> => {
      pending ??= (self.usage?.() ?? Promise.resolve([])).finally(() => {
        setImmediate(() => {
          pending = undefined;
        });
      });
      return pending;
    };
    const perNamespace = (name: string, help: string, pick: (u: NamespaceUsage) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ["namespace"] as const,
        registers: [this.tenantRegistry],
        async collect() {
          this.reset();
          for (const u of await usage()) this.set({ namespace: u.namespace }, pick(u));
        },
      });
    perNamespace(
      "berth_namespace_containers_sampled",
      "Running containers sampled in the latest stats round",
      (u) => u.containers,
    );
    perNamespace(
      "berth_namespace_cpu_percent",
      "CPU of the namespace's containers, percent of one core",
      (u) => u.cpu,
    );
    perNamespace(
      "berth_namespace_memory_bytes",
      "Memory of the namespace's containers without page cache",
      (u) => u.memory,
    );
    perNamespace(
      "berth_namespace_network_receive_bytes_per_second",
      "Bytes per second the namespace's containers receive",
      (u) => u.net_rx,
    );
    perNamespace(
      "berth_namespace_network_transmit_bytes_per_second",
      "Bytes per second the namespace's containers send",
      (u) => u.net_tx,
    );
    new Gauge({
      name: "berth_action_queue_depth",
      help: "Unfinished actions by state (pending: waiting for a worker or for their object)",
      labelNames: ["state"] as const,
      registers: [this.registry],
      async collect() {
        const q = await self.sources?.actionQueue();
        if (!q) return;
        this.set({ state: "pending" }, q.pending);
        this.set({ state: "active" }, q.active);
      },
    });
    new Gauge({
      name: "berth_action_queue_oldest_age_seconds",
      help: "Age of the oldest Pending action (0 when none waits)",
      registers: [this.registry],
      async collect() {
        const s = self.sources;
        if (!s) return;
        const q = await s.actionQueue();
        this.set(q.oldestPendingStart === null ? 0 : Math.max(0, (s.now() - q.oldestPendingStart) / 1000));
      },
    });
    new Gauge({
      name: "berth_reconcile_lag_seconds",
      help: "Time since the last periodic reconcile pass ended (any replica)",
      registers: [this.registry],
      async collect() {
        const s = self.sources;
        if (!s) return;
        const at = await s.lastReconcilePass();
        if (at !== undefined) this.set(Math.max(0, (s.now() - at) / 1000));
      },
    });
    new Gauge({
      name: "berth_open_streams",
      help: "WebSocket streams open on this replica",
      registers: [this.registry],
      collect() {
        if (self.sources) this.set(self.sources.openStreams());
      },
    });
    new Gauge({
      name: "berth_owned_nodes",
      help: "Nodes whose engine watcher and health checks this replica owns",
      registers: [this.registry],
      collect() {
        if (self.sources) this.set(self.sources.ownedNodes());
      },
    });
    new Gauge({
      name: "berth_live_replicas",
      help: "Replicas with a recent heartbeat, as this replica last saw them",
      registers: [this.registry],
      collect() {
        if (self.sources) this.set(self.sources.liveReplicas());
      },
    });
  }

  /**
   * Per-namespace series (issue 32), in a registry of their own: `/metrics` adds them only for a
   * request carrying the administrator's scrape token (BERTH_METRICS_TOKEN), never publicly.
   */
  readonly tenantRegistry = new Registry();
  private usage: (() => Promise<NamespaceUsage[]>) | undefined;

  /** Where the per-namespace figures come from: the latest stats round, summed per namespace. */
  attachUsage(read: () => Promise<NamespaceUsage[]>): void {
    this.usage = read;
  }

  /** Every series, per-namespace ones included. */
  async tenantText(): Promise<string> {
    return `${await this.registry.metrics()}${await this.tenantRegistry.metrics()}`;
  }

  /** Where scrape-time figures come from (set once the platform is assembled). */
  attach(sources: ScrapeSources): void {
    this.sources = sources;
  }

  async text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
