// The router controller (issue 30): every router of a namespace's nodes serves that namespace's
// domains. It follows the change feed (store/follow.ts): a changed service, container or node
// rebuilds its namespace's routes (domain/router-config.ts, one pure function) once, and only when
// the namespace's configuration changed queues its nodes on a typed work queue
// (orchestrator/work-queue.ts); the worker hands a node's router that configuration when it
// differs from the one it last took, then records the certificate
// states the router reports (an error is written with an event on each service serving the host).
// A periodic pass queues every node again (certificate renewals and errors, a router restarted).
// Drains written by another replica reach no feed here: before a build is handed to a router, the
// namespace's drains are read again (once per build, not per node) and a build that read older
// ones is made again, so a build begun before another replica's drain never routes the drained
// container back after that replica's push (test/router/drain-race.test.ts).
import { createHash } from "node:crypto";
import { buildRoutes, type RouterService, type RoutesOutput } from "../domain/router-config.ts";
import { lastSegment } from "../domain/uri.ts";
import {
  type AcmeSettings,
  type Router,
  type RouterConfig,
  RouterUnavailable,
} from "../drivers/router/router.ts";
import type { NodeKey } from "../orchestrator/controllers/context.ts";
import { Controller } from "../orchestrator/controllers/controller.ts";
import { specOf } from "../store/codec.ts";
import { type Follower, follow } from "../store/follow.ts";
import type { NodeRow } from "../store/nodes.ts";
import { RouterStore } from "../store/router.ts";
import type { ChangeRow, Store } from "../store/store.ts";
import { CertificateRecords, withAcmeProblems } from "./certificate-records.ts";
import { type Drains, drainsRevision } from "./drains.ts";

/** Which router serves a node (undefined: the node has none here, e.g. an agent node whose tunnel another replica holds). */
export interface RouterSource {
  forNode(node: NodeRow): Router | undefined;
  /** A node was terminated: its router's process and files go. */
  released?(nodeUuid: string): Promise<void>;
}

export interface RouterControllerDeps {
  store: Store;
  routers: RouterSource;
  acme: AcmeSettings;
  /** Opens an uploaded certificate's sealed PEM. */
  open(sealed: string): string;
  drains: () => Drains | undefined;
  /**
   * Whether this replica configures the node's router (duties.ownsNode: the replica that watches
   * the node); undefined: every node. A drain's push reaches every router of its namespace anyway:
   * the replica that drains waits for them before its engine stops the container.
   */
  ownsNode?(nodeUuid: string): boolean;
  /**
   * Whether this replica holds the node's agent tunnel: an agent node's router is reached only
   * through it, so that replica configures it whichever replica owns the node.
   */
  attachedHere?(nodeUuid: string): boolean;
  intervalMs: number;
  now(): number;
  onError(err: unknown): void;
  /** Told after a node's router took a configuration (metrics, tests). */
  onApplied?(node: string, routes: RoutesOutput): void;
}

export class RouterController extends Controller<NodeKey> {
  private feed: Follower | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The hash of the configuration each node's router last took. */
  private readonly appliedHash = new Map<string, string>();
  /** Writes what routers report of certificates (certificate-records.ts). */
  private readonly records: CertificateRecords;
  /** The routes last built per namespace (views, drains, metrics). */
  private readonly built = new Map<string, RoutesOutput>();
  private readonly routerStore: RouterStore;
  /**
   * The routes being built or last built per namespace, shared by the nodes of a pass: a
   * namespace's change, a push or a periodic pass drops its entry, so each change is one build
   * per namespace, not one per node.
   */
  private readonly current = new Map<string, Promise<RoutesOutput>>();
  /** Until when each node's router may still choose an upstream its last configuration removed (Router.settlesAt). */
  private readonly settles = new Map<string, number>();
  /** Nodes a push queued: configured even when another replica owns them. */
  private readonly pushed = new Set<string>();
  /**
   * The rows of nodes read when their namespace was queued: a change in a namespace of N nodes
   * reads them in one statement, not N (a node's own change drops its row, so a node that left
   * Deployed is read again).
   */
  private readonly queuedRows = new Map<string, NodeRow>();
  /**
   * Each build's router configuration and its hash, made once and shared by the namespace's
   * nodes (one certificates read and one serialization per change, not one per node).
   */
  private readonly configs = new WeakMap<RoutesOutput, Promise<{ config: RouterConfig; hash: string }>>();
  /**
   * The hash of the configuration a change last queued to each namespace's nodes: a change that
   * leaves a namespace's configuration as it was (most changes: a container started, a service
   * without domains edited) queues none of its nodes, however many it has.
   */
  private readonly queuedHash = new Map<string, string>();
  /** The revision of the drains each build read (drains.ts drainsRevision). */
  private readonly drainsRead = new WeakMap<RoutesOutput, string>();
  /**
   * Each build as checked against the drains now, once before its first hand-over to a router:
   * itself, or the build made again when the drains moved since it read them.
   */
  private readonly checked = new WeakMap<RoutesOutput, Promise<RoutesOutput>>();

  constructor(private readonly d: RouterControllerDeps) {
    // Changes gather briefly: a burst (a scale, a redeploy) is one configuration swap, not one each.
    super({
      id: (k) => k.node,
      batch: 1,
      workers: 4,
      gatherMs: 100,
      onError: d.onError,
      nodeOf: (k) => k.node,
      perNode: 1,
    });
    this.routerStore = new RouterStore(d.store);
    this.records = new CertificateRecords({
      store: d.store,
      now: d.now,
      renewalWindowRatio: d.acme.renewalWindowRatio,
      built: (namespace) => this.built.get(namespace),
    });
  }

  override start(): void {
    super.start();
    this.feed = follow(this.d.store, {
      types: ["service", "container", "node"],
      onPage: (rows) => this.fromFeed(rows),
      onError: this.d.onError,
    });
    this.timer = setInterval(() => void this.queueAll(), this.d.intervalMs);
    this.timer.unref();
    void this.queueAll();
  }

  override stop(): void {
    this.feed?.stop();
    this.feed = undefined;
    if (this.timer) clearInterval(this.timer);
    this.queuedRows.clear();
    super.stop();
  }

  /** The routes last built for a namespace. */
  routesOf(namespace: string): RoutesOutput | undefined {
    return this.built.get(namespace);
  }

  /** Every namespace's routes last built. */
  allRoutes(): ReadonlyMap<string, RoutesOutput> {
    return this.built;
  }

  /** Queues every node of the namespaces and waits until their routers took what they have now. */
  async push(namespaces: ReadonlySet<string>, timeoutMs: number): Promise<void> {
    // What a push hands the routers is not what a change queued: the next change queues again.
    for (const ns of namespaces) this.queuedHash.delete(ns);
    for (const ns of namespaces) this.current.delete(ns);
    const deadline = Date.now() + timeoutMs;
    for (const ns of namespaces) await this.queueNamespace(ns, true);
    await Promise.race([this.idle(), new Promise((r) => setTimeout(r, timeoutMs).unref())]);
    // Routers that look their upstreams up (Caddy) may choose a removed one until their next
    // lookup: waited for once for every router of the push, not per router in its worker.
    const now = Date.now();
    let settles = 0;
    for (const [node, at] of this.settles) {
      if (at <= now) this.settles.delete(node);
      else settles = Math.max(settles, at);
    }
    const wait = Math.min(settles, deadline) - now;
    if (wait > 0) await new Promise((r) => setTimeout(r, wait).unref());
  }

  /** A node's agent connected (again): its router may have started over, so it is configured again. */
  reconnected(nodeUuid: string): void {
    this.appliedHash.delete(nodeUuid);
    this.add({ node: nodeUuid });
  }

  /** Resolves when the feed follower and the queue are idle (tests). */
  async settle(): Promise<void> {
    for (let i = 0; i < 50; i++) {
      await this.feed?.idle();
      await this.idle();
      if (!this.feed?.reading && this.length === 0) return;
    }
  }

  async queueAll(): Promise<void> {
    this.current.clear();
    try {
      for (const n of await this.d.store.nodes.liveNodes())
        if (n.state === "Deployed") {
          this.queuedRows.set(n.uuid, n);
          this.add({ node: n.uuid });
        }
    } catch (err) {
      this.d.onError(err);
    }
    // Holds that outlived their rollout (a crash before their release) go now (drains.ts sweep).
    void this.d
      .drains()
      ?.sweep()
      .catch((err) => this.d.onError(err));
  }

  private async queueNamespace(namespace: string, pushed = false): Promise<void> {
    for (const n of await this.d.store.nodes.liveNodes({ namespace }))
      if (n.state === "Deployed") {
        if (pushed) this.pushed.add(n.uuid);
        this.queuedRows.set(n.uuid, n);
        this.add({ node: n.uuid });
      }
  }

  private async fromFeed(rows: ChangeRow[]): Promise<void> {
    const namespaces = new Set<string>();
    for (const r of rows) {
      if (r.type === "node") {
        const uuid = lastSegment(r.resource_uri);
        if (uuid) this.queuedRows.delete(uuid);
        // A node that has not taken its namespace's configuration yet (new, back from Unreachable)
        // is queued by its own row; one that has needs nothing for a change of its record.
        if (uuid && r.state === "Deployed" && !this.appliedHash.has(uuid)) this.add({ node: uuid });
        if (r.state !== "Deployed") this.appliedHash.delete(uuid ?? "");
        if (uuid && r.state === "Terminated") {
          await this.d.routers.released?.(uuid).catch(this.d.onError);
          await this.records.forgetNode(uuid).catch(this.d.onError);
        }
      }
      namespaces.add(r.namespace);
    }
    for (const ns of namespaces) {
      this.current.delete(ns);
      if (await this.changedConfig(ns)) await this.queueNamespace(ns);
    }
  }

  /**
   * Whether the namespace's configuration differs from the one a change last queued to its nodes
   * (a failed build counts as changed: the nodes' own passes build again and report it). A router
   * restarted or a node that missed a configuration is found by the periodic pass.
   */
  private async changedConfig(namespace: string): Promise<boolean> {
    try {
      const { hash } = await this.configFor(namespace, await this.routesFor(namespace));
      if (this.queuedHash.get(namespace) === hash) return false;
      this.queuedHash.set(namespace, hash);
    } catch {
      this.queuedHash.delete(namespace);
    }
    return true;
  }

  /** The namespace's routes as built since its last change (one build shared by its nodes). */
  private routesFor(namespace: string): Promise<RoutesOutput> {
    let routes = this.current.get(namespace);
    if (!routes) {
      routes = this.build(namespace);
      this.current.set(namespace, routes);
      routes.catch(() => {
        if (this.current.get(namespace) === routes) this.current.delete(namespace);
      });
    }
    return routes;
  }

  /** The namespace's routes now (services, containers, claims, drains). */
  async build(namespace: string): Promise<RoutesOutput> {
    const store = this.d.store;
    // Every routed host name is claimed by its namespace: without a claim there is nothing to
    // route, and the namespace's services and containers need not be read.
    const claims = await this.routerStore.claimMap([namespace]);
    if (claims.size === 0) {
      const none = buildRoutes({ services: [], containers: [], claims, draining: new Set() });
      this.built.set(namespace, none);
      return none;
    }
    const services: RouterService[] = (await store.services.liveServices({ namespace })).map((s) => ({
      uuid: s.uuid,
      namespace: s.namespace,
      name: s.name,
      state: s.state,
      created: s.created,
      spec: specOf(s),
    }));
    await this.dropUploadsNoLongerServed(namespace, services);
    const containers = (await store.services.liveContainers({ namespace })).map((c) => ({
      uuid: c.uuid,
      service_uuid: c.service_uuid,
      name: c.name,
      state: c.state,
      desired: c.desired,
      phase: c.phase,
      private_ip: c.private_ip,
      generation: c.generation,
      health: c.health,
      node_uuid: c.node_uuid ?? undefined,
    }));
    const drains = await this.d.drains()?.state(namespace);
    const out = buildRoutes({
      services,
      containers,
      claims,
      draining: drains?.draining ?? new Set(),
      held: drains?.held ?? [],
    });
    if (drains) this.drainsRead.set(out, drainsRevision(drains));
    this.built.set(namespace, out);
    return out;
  }

  /** An uploaded certificate goes with the last domain of its host name in the namespace. */
  private async dropUploadsNoLongerServed(
    namespace: string,
    services: readonly RouterService[],
  ): Promise<void> {
    const uploads = (await this.routerStore.certificatesOfNamespace(namespace)).filter(
      (c) => c.state === "uploaded",
    );
    if (uploads.length === 0) return;
    const served = new Set(services.flatMap((s) => (s.spec.domains ?? []).map((d) => d.host)));
    for (const c of uploads) if (!served.has(c.host)) await this.routerStore.deleteCertificate(c.host);
  }

  protected async work(keys: NodeKey[]): Promise<NodeKey[]> {
    const failed: NodeKey[] = [];
    for (const key of keys) {
      try {
        await this.reconcile(key.node);
      } catch (err) {
        this.d.onError(err);
        failed.push(key);
      }
    }
    return failed;
  }

  private async reconcile(nodeUuid: string): Promise<void> {
    const pushed = this.pushed.delete(nodeUuid);
    const queued = this.queuedRows.get(nodeUuid);
    this.queuedRows.delete(nodeUuid);
    if (!pushed && this.d.ownsNode && !this.d.ownsNode(nodeUuid) && !this.d.attachedHere?.(nodeUuid)) return;
    const node = queued ?? (await this.d.store.nodes.findNode(nodeUuid));
    if (node?.state !== "Deployed") return;
    const router = this.d.routers.forNode(node);
    if (!router) return;
    try {
      await this.configure(node, router);
    } catch (err) {
      if (err instanceof RouterUnavailable) await this.cannotRun(node, err);
      throw err;
    }
  }

  /**
   * A router that cannot run (Caddy not installed on its node) is an error on the certificate of
   * each TLS host name it would serve, with an event on their services (recordCertificates writes
   * it once, not at each retry), never a line in Berth's log only.
   */
  private async cannotRun(node: NodeRow, err: RouterUnavailable): Promise<void> {
    const { config } = await this.configFor(node.namespace, await this.routesFor(node.namespace));
    const hosts = new Set(config.routes.filter((r) => r.tls !== "off").map((r) => r.host));
    const error = `the router of node ${node.nickname || node.uuid} cannot run: ${err.message}`;
    await this.records.record(
      node.uuid,
      node.namespace,
      [...hosts].map((host) => ({ host, state: "error", issuer: "", expiresAt: null, error })),
    );
  }

  private async configure(node: NodeRow, router: Router): Promise<void> {
    const nodeUuid = node.uuid;
    if (await router.restarted?.()) this.appliedHash.delete(nodeUuid);
    let routes = await this.routesFor(node.namespace);
    let { config, hash } = await this.configFor(node.namespace, routes);
    if (this.appliedHash.get(nodeUuid) !== hash) {
      routes = await this.drainsChecked(node.namespace, routes);
      ({ config, hash } = await this.configFor(node.namespace, routes));
    }
    if (this.appliedHash.get(nodeUuid) !== hash) {
      await router.apply(config);
      const settles = router.settlesAt?.() ?? 0;
      if (settles > Date.now()) this.settles.set(nodeUuid, settles);
      this.appliedHash.set(nodeUuid, hash);
      this.d.onApplied?.(nodeUuid, routes);
    }
    const tlsHosts = new Set(config.routes.filter((r) => r.tls !== "off").map((r) => r.host));
    // Only the namespace's own host names are believed (an agent's router answers for its node).
    if (tlsHosts.size > 0)
      await this.records.record(
        nodeUuid,
        node.namespace,
        withAcmeProblems(
          config,
          (await router.certificates()).filter((c) => tlsHosts.has(c.host)),
        ),
      );
  }

  /**
   * The build, or the namespace's routes built again when its drains moved since the build read
   * them (another replica drained, held or released meanwhile): one drains read per build.
   */
  private drainsChecked(namespace: string, routes: RoutesOutput): Promise<RoutesOutput> {
    const read = this.drainsRead.get(routes);
    const drains = this.d.drains();
    if (read === undefined || !drains) return Promise.resolve(routes);
    let checked = this.checked.get(routes);
    if (!checked) {
      checked = (async () => {
        if (drainsRevision(await drains.state(namespace)) === read) return routes;
        // Built after whatever the namespace's nodes share now began: it replaces that.
        const again = this.build(namespace);
        this.current.set(namespace, again);
        again.catch(() => {
          if (this.current.get(namespace) === again) this.current.delete(namespace);
        });
        const rebuilt = await again;
        // Its drains were read after this check: checking it again would read the same.
        this.checked.set(rebuilt, Promise.resolve(rebuilt));
        return rebuilt;
      })();
      this.checked.set(routes, checked);
      checked.catch(() => {
        if (this.checked.get(routes) === checked) this.checked.delete(routes);
      });
    }
    return checked;
  }

  /** The build's configuration and its hash, made once per build (configs). */
  private configFor(
    namespace: string,
    routes: RoutesOutput,
  ): Promise<{ config: RouterConfig; hash: string }> {
    let made = this.configs.get(routes);
    if (!made) {
      made = this.configOf(namespace, routes).then((config) => ({
        config,
        hash: createHash("sha256").update(JSON.stringify(config)).digest("hex"),
      }));
      this.configs.set(routes, made);
      made.catch(() => {
        if (this.configs.get(routes) === made) this.configs.delete(routes);
      });
    }
    return made;
  }

  private async configOf(namespace: string, routes: RoutesOutput): Promise<RouterConfig> {
    const uploadedHosts = [...new Set(routes.routes.filter((r) => r.tls === "uploaded").map((r) => r.host))];
    const rows = await this.routerStore.certificatesOf(uploadedHosts);
    const certificates = rows
      .filter((c) => c.namespace === namespace && c.sealed_cert && c.sealed_key)
      .map((c) => ({
        host: c.host,
        certPem: this.d.open(c.sealed_cert!),
        keyPem: this.d.open(c.sealed_key!),
      }));
    return { routes: routes.routes, certificates, acme: this.d.acme };
  }
}
