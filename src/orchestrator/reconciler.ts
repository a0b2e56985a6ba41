// Level-based reconciliation (Kubernetes-style): events only enqueue a key; a worker re-reads
// desired and observed state and acts on the difference. A full pass runs at start-up and
// periodically, so a missed event only delays convergence. One key is never worked on twice
// at once, and objects an action is working on are left to that action. With several replicas
// (Duties), each watches the engines of the nodes it owns and one leader runs the periodic pass.
import type { ActionEngine } from "../actions/engine.ts";
import { addTo } from "../domain/collections.ts";
import { linkHosts } from "../domain/container-spec.ts";
import { type Duties, SOLO_DUTIES } from "../domain/duties.ts";
import { LABELS, type ServiceSpec } from "../domain/service.ts";
import {
  actionEnded,
  SERVICE_TRANSITIONAL,
  type ServiceState,
  settledServiceState,
} from "../domain/states.ts";
import type { Clock } from "../domain/time.ts";
import { containerUri, lastSegment, serviceUri, stackUri } from "../domain/uri.ts";
import type { ContainerEvent, ContainerSummary } from "../drivers/engine.ts";
import type { EngineSource } from "../nodes/provisioners.ts";
import type { NodeRow } from "../store/nodes.ts";
import type { ContainerRow, ServiceRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import { followedLinks, hostTargetOf, offeredAddress, sameEntries } from "./links.ts";
import { type ContainerRuntime, GENERATION_LABEL } from "./runtime.ts";
import type { Orchestrator } from "./services.ts";

/** Change-feed rows read per page. */
const FEED_PAGE = 500;

/** Engines asked at once per node when the reconciler compares containers with them. */
const OBSERVE_PER_NODE = 4;

/** How long engine events gather in the queue before it is worked on. */
const EVENT_BATCH_MS = 20;

/** Engine events that end a container's process, or the container. */
const END_EVENTS: ReadonlySet<string> = new Set(["die", "oom", "kill", "stop", "destroy"]);

/** States of a record that claim its container's process runs (or is coming up). */
const LIVE_STATES: ReadonlySet<string> = new Set(["Running", "Starting"]);

const SYSTEM = {
  method: "POST",
  path: "",
  user: "berth",
  userAgent: "berth-reconciler",
  ip: "",
  isUserAction: false,
};

export class Reconciler {
  private readonly queue = new Set<string>();
  private readonly inFlight = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private drainTimer: NodeJS.Timeout | undefined;
  private draining = false;
  private readonly watchers = new Map<string, AbortController>();
  private stopped = true;
  /** Engine listings of the current pass, by node (each node's engine is listed once per pass). */
  private readonly listings = new Map<string, ContainerSummary[]>();
  /** Revision of the change feed read so far (changed containers get their link hosts checked). */
  private feedRevision: number | undefined;
  private unlistenFeed: (() => void) | undefined;
  private readingFeed = false;
  private readFeedAgain = false;
  /**
   * Containers whose engine container (by record uuid: its engine id) reported an end while an
   * action held them. The action's own record of them may predate that end: once an action ends,
   * those whose record still holds that container and claims it runs are looked at again, rather
   * than at the next periodic pass (recheckEnded).
   */
  private readonly endedWhileHeld = new Map<string, string>();
  /** Containers queued because of such an end event (by record uuid: its engine id), until worked on. */
  private readonly endsQueued = new Map<string, string>();

  constructor(
    private readonly d: {
      store: Store;
      clock: Clock;
      engines: EngineSource;
      runtime: ContainerRuntime;
      orchestrator: Orchestrator;
      actions: ActionEngine;
      intervalMs: number;
      duties?: Duties;
      /** Called after each full pass this replica ran (reconcile lag). */
      onPass?(at: number): void;
      onError?(err: unknown): void;
    },
  ) {}

  private get duties(): Duties {
    return this.d.duties ?? SOLO_DUTIES;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.timer = setInterval(() => void this.resync(), this.d.intervalMs);
    this.timer.unref();
    this.unlistenFeed = this.d.store.onChange((type) => {
      if (type === "container" || type === "" || (type === "action" && this.endedWhileHeld.size))
        this.readFeed();
    });
    this.readFeed();
    void this.resync();
  }

  stop(): void {
    this.stopped = true;
    this.unlistenFeed?.();
    this.unlistenFeed = undefined;
    this.feedRevision = undefined;
    if (this.timer) clearInterval(this.timer);
    if (this.drainTimer) clearTimeout(this.drainTimer);
    this.drainTimer = undefined;
    for (const w of this.watchers.values()) w.abort();
    this.watchers.clear();
  }

  /**
   * Follows the change feed: every changed container (its own change, or one of its link
   * targets', see ChangeFeed in store/feed.ts) gets its link host entries checked at once.
   */
  private readFeed(): void {
    if (this.stopped) return;
    if (this.readingFeed) {
      this.readFeedAgain = true;
      return;
    }
    this.readingFeed = true;
    void this.readFeedPages()
      .catch((err: unknown) => this.d.onError?.(err))
      .finally(() => {
        this.readingFeed = false;
        if (this.readFeedAgain) {
          this.readFeedAgain = false;
          this.readFeed();
        }
      });
  }

  private async readFeedPages(): Promise<void> {
    // Starts from now: containers changed before are covered by the periodic pass.
    this.feedRevision ??= await this.d.store.latestRevision();
    let ended = false;
    for (;;) {
      const rows = await this.d.store.changesSince(this.feedRevision, FEED_PAGE);
      for (const row of rows) {
        this.feedRevision = Math.max(this.feedRevision, Number(row.revision));
        if (row.type === "action" && actionEnded(row.state)) ended = true;
        if (row.type !== "container" || row.action === "delete" || row.state !== "Running") continue;
        // An action of this process holds the container, its service or its stack: followLinks
        // would find it busy and leave it (a large deploy's every container would be read for
        // nothing). What changed meanwhile is the periodic pass's (compareLinkHosts).
        if (this.d.actions.runsOnAny([row.resource_uri, ...(JSON.parse(row.parents) as string[])])) continue;
        const uuid = lastSegment(row.resource_uri);
        if (uuid) this.queue.add(`l:${uuid}`);
      }
      if (rows.length < FEED_PAGE) break;
    }
    if (ended && this.endedWhileHeld.size) await this.recheckEnded();
    void this.drain();
  }

  /**
   * Containers whose engine container ended while an action held them (endedWhileHeld), once an
   * action has ended: those whose record still holds that container and says it runs are queued
   * to be compared with their engine (their actions may still hold them: they wait for the next).
   */
  private async recheckEnded(): Promise<void> {
    const ended = new Map(this.endedWhileHeld);
    this.endedWhileHeld.clear();
    for (const c of await this.d.store.services.containerHeads([...ended.keys()])) {
      const engineId = ended.get(c.uuid);
      if (engineId === undefined || c.engine_id !== engineId || !LIVE_STATES.has(c.state)) continue;
      this.endsQueued.set(c.uuid, engineId);
      this.queue.add(`c:${c.uuid}`);
    }
  }

  /**
   * Queues a container for reconciliation. The queue is worked on a moment later
   * (EVENT_BATCH_MS), so that a burst of engine events (a large deploy) is looked at in a few
   * batches rather than one at a time.
   */
  enqueue(containerUuid: string): void {
    this.queue.add(`c:${containerUuid}`);
    if (this.drainTimer) return;
    this.drainTimer = setTimeout(() => {
      this.drainTimer = undefined;
      void this.drain();
    }, EVENT_BATCH_MS);
    this.drainTimer.unref();
  }

  /**
   * A full pass: engine watchers and orphans of this replica's nodes, and, on the replica leading
   * the reconcile job, every live container and every running service.
   */
  async resync(): Promise<void> {
    if (this.stopped) return;
    try {
      const all = await this.d.store.nodes.liveNodes();
      const nodes = all.filter((n) => this.duties.ownsNode(n.uuid));
      this.syncWatchers(nodes.filter((n) => n.state === "Deployed" && n.engine_url));
      this.listings.clear();
      const leads = this.duties.leads("reconcile");
      if (leads) await this.compareAll(all);
      for (const n of nodes) if (n.state === "Deployed") this.queue.add(`n:${n.uuid}`);
      await this.drain();
      this.listings.clear();
      if (leads) this.d.onPass?.(this.d.clock.now());
    } catch (err) {
      this.d.onError?.(err);
    }
  }

  /**
   * The periodic comparison, cheap when nothing changed: each Deployed node's engine is listed
   * once, and only containers whose engine container disagrees with their record (or whose node
   * is gone, or that an autodestroy policy may concern), EVERY_NODE services, and services whose
   * state disagrees with their containers get the full per-object reconcile.
   */
  private async compareAll(nodes: NodeRow[]): Promise<void> {
    const containers = await this.d.store.services.liveContainers();
    const services = await this.d.store.services.liveServices();
    const byNode = new Map<string, ContainerRow[]>();
    const byService = new Map<string, ContainerRow[]>();
    for (const c of containers) {
      addTo(byNode, c.node_uuid, c);
      addTo(byService, c.service_uuid, c);
    }
    const nodeByUuid = new Map(nodes.map((n) => [n.uuid, n]));
    for (const [nodeUuid, list] of byNode) {
      const node = nodeByUuid.get(nodeUuid);
      if (node && node.state !== "Deployed") continue; // nothing can be observed there
      let listing: ContainerSummary[] | undefined;
      if (node) listing = await this.listing(node).catch(() => undefined);
      // The node's engine containers by record, so each record is compared with its own only.
      const byRecord = new Map<string, ContainerSummary[]>();
      for (const x of listing ?? []) {
        const uuid = x.labels[LABELS.container];
        if (uuid === undefined) continue;
        addTo(byRecord, uuid, x);
      }
      for (const c of list)
        if (!listing || !agrees(c, byRecord.get(c.uuid) ?? [])) this.queue.add(`c:${c.uuid}`);
    }
    for (const s of services) {
      const spec = JSON.parse(s.spec) as ServiceSpec;
      this.compareLinkHosts(s, spec, byService);
      const everyNode = spec.deployment_strategy === "EVERY_NODE";
      if (everyNode && (s.state === "Running" || s.state === "Partly running")) this.queue.add(`s:${s.uuid}`);
      const live = byService.get(s.uuid);
      if (!live?.length || SERVICE_TRANSITIONAL.includes(s.state as ServiceState)) continue;
      const settled = settledServiceState(
        live.map((c) => c.state),
        everyNode ? 0 : s.target_num_containers,
      );
      if (settled !== s.state) this.queue.add(`c:${live[0]!.uuid}`);
    }
  }

  /**
   * Running containers whose recorded link host entries are not the ones their service's links give
   * now (a change the feed did not bring, or one left alone while an action worked) get them
   * rewritten; worked out from what the pass has already read.
   */
  private compareLinkHosts(s: ServiceRow, spec: ServiceSpec, byService: Map<string, ContainerRow[]>): void {
    if (spec.linked_to_service.length === 0 && !spec.sequential_deployment) return;
    const targetsOf = (uuid: string) =>
      (byService.get(uuid) ?? []).filter((t) => offeredAddress(t) !== "").map(hostTargetOf);
    for (const c of byService.get(s.uuid) ?? []) {
      if (c.state !== "Running" || c.link_hosts === null) continue;
      const desired = linkHosts(
        followedLinks(spec, { serviceUuid: s.uuid, serviceName: s.name, number: c.number }, targetsOf),
      );
      if (!sameEntries(JSON.parse(c.link_hosts) as string[], desired)) this.queue.add(`l:${c.uuid}`);
    }
  }

  /** The Berth containers of a node's engine, listed at most once per pass. */
  private async listing(node: NodeRow): Promise<ContainerSummary[]> {
    const known = this.listings.get(node.uuid);
    if (known) return known;
    const engine = this.d.engines.forNode(node);
    const found = await engine.listContainers({ labels: { [LABELS.node]: node.uuid }, all: true });
    this.listings.set(node.uuid, found);
    return found;
  }

  /**
   * This replica took nodes over (or gave them up): watchers follow at once, and the containers of
   * a node taken over are compared with its engine, covering events nobody watched meanwhile.
   */
  async nodesChanged(gained: string[]): Promise<void> {
    if (this.stopped) return;
    try {
      const nodes = (await this.d.store.nodes.liveNodes()).filter((n) => this.duties.ownsNode(n.uuid));
      this.syncWatchers(nodes.filter((n) => n.state === "Deployed" && n.engine_url));
      for (const node of gained) {
        for (const c of await this.d.store.services.liveContainers({ node })) this.queue.add(`c:${c.uuid}`);
      }
      await this.drain();
    } catch (err) {
      this.d.onError?.(err);
    }
  }

  /** Resolves when the queue is empty (tests). */
  async settle(): Promise<void> {
    await this.drain();
    while (this.inFlight.size || this.queue.size) await new Promise((r) => setTimeout(r, 20));
  }

  private async drain(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    try {
      while (this.queue.size && !this.stopped) {
        const key = this.queue.values().next().value as string;
        if (key.startsWith("l:")) {
          await this.followLinksQueued();
          continue;
        }
        if (key.startsWith("c:")) {
          await this.reconcileContainersQueued();
          continue;
        }
        this.queue.delete(key);
        if (this.inFlight.has(key)) continue;
        this.inFlight.add(key);
        try {
          await this.reconcile(key);
        } catch (err) {
          this.d.onError?.(err);
        } finally {
          this.inFlight.delete(key);
        }
      }
    } finally {
      this.draining = false;
    }
  }

  private async busy(object: string): Promise<boolean> {
    return (await this.d.store.activeActionOn(object)) !== undefined;
  }

  /** A service is worked on by its own action, or by its stack's (which runs the services' work inline). */
  private async serviceBusy(s: { namespace: string; uuid: string; stack_uuid: string | null }) {
    if (await this.busy(serviceUri(s))) return true;
    return s.stack_uuid !== null && (await this.busy(stackUri(s.namespace, s.stack_uuid)));
  }

  private async reconcile(key: string): Promise<void> {
    const [kind, uuid] = key.split(":") as [string, string];
    if (kind === "s") await this.reconcileService(uuid);
    else if (kind === "n") await this.sweepOrphans(uuid);
    else if (kind === "l") await this.followLinks(uuid);
  }

  /** Takes every queued key of one kind (`c:`, `l:`); those being worked on already are dropped, as in drain. */
  private takeQueued(prefix: string): string[] {
    const keys: string[] = [];
    for (const k of [...this.queue]) {
      if (!k.startsWith(prefix)) continue;
      this.queue.delete(k);
      if (this.inFlight.has(k)) continue;
      this.inFlight.add(k);
      keys.push(k);
    }
    return keys;
  }

  /**
   * Every queued container at once: the records, their services and which of them (or their
   * services, or the services' stacks) an action holds are read in three queries, so a burst of
   * engine events during a large deploy costs a few statements; the containers left to the
   * reconciler are then reconciled together (reconcileContainers).
   */
  private async reconcileContainersQueued(): Promise<void> {
    const keys = this.takeQueued("c:");
    try {
      const rows = await this.d.store.services.containerHeads(keys.map((k) => k.slice(2)));
      const services = new Map(
        (await this.d.store.services.servicesByUuid(rows.map((c) => c.service_uuid))).map((x) => [x.uuid, x]),
      );
      const busy = await this.d.store.objectsWithActiveActions([
        ...rows.map((c) => containerUri(c)),
        ...[...services.values()].flatMap((s) => [
          serviceUri(s),
          ...(s.stack_uuid ? [stackUri(s.namespace, s.stack_uuid)] : []),
        ]),
      ]);
      const free = rows.filter((c) => {
        if (c.state === "Terminated") return false;
        const s = services.get(c.service_uuid);
        if (!s) return false;
        const held =
          busy.has(containerUri(c)) ||
          busy.has(serviceUri(s)) ||
          (s.stack_uuid !== null && busy.has(stackUri(s.namespace, s.stack_uuid)));
        // An end the engine reported is looked at again once an action has ended (recheckEnded).
        const ended = this.endsQueued.get(c.uuid);
        if (held && ended !== undefined) this.endedWhileHeld.set(c.uuid, ended);
        return !held;
      });
      await this.reconcileContainers(
        free.map((c) => c.uuid),
        services,
      );
    } catch (err) {
      this.d.onError?.(err);
    } finally {
      for (const k of keys) {
        this.inFlight.delete(k);
        this.endsQueued.delete(k.slice(2));
      }
    }
  }

  /**
   * Every queued link-host check at once: the containers and their services are read in two
   * queries, and only containers that follow links (or hold entries) are looked at one by one.
   */
  private async followLinksQueued(): Promise<void> {
    const keys = this.takeQueued("l:");
    try {
      const rows = await this.d.store.services.containerHeads(keys.map((k) => k.slice(2)));
      const services = new Map(
        (await this.d.store.services.servicesByUuid(rows.map((c) => c.service_uuid))).map((x) => [x.uuid, x]),
      );
      for (const c of rows) {
        if (c.state !== "Running" || !c.engine_id || c.link_hosts === null) continue;
        const s = services.get(c.service_uuid);
        if (!s) continue;
        const spec = JSON.parse(s.spec) as ServiceSpec;
        const followsNone = spec.linked_to_service.length === 0 && !spec.sequential_deployment;
        if (followsNone && c.link_hosts === "[]") continue; // holds none and should hold none
        await this.followLinks(c.uuid).catch((err: unknown) => this.d.onError?.(err));
      }
    } catch (err) {
      this.d.onError?.(err);
    } finally {
      for (const k of keys) this.inFlight.delete(k);
    }
  }

  /** A running container's link host entries follow its service's links (runtime.ensureLinkHosts). */
  private async followLinks(uuid: string): Promise<void> {
    await this.d.runtime.ensureLinkHosts(uuid, {
      // One replica acts on a container (the one that watches its node), and never while an
      // action works on it or its service.
      mayAct: async (c) => {
        if (!this.duties.ownsNode(c.node_uuid)) return false;
        const s = await this.d.store.services.findService(c.service_uuid);
        return s !== undefined && !(await this.busy(containerUri(c))) && !(await this.serviceBusy(s));
      },
    });
  }

  /**
   * Containers compared with their engines together, in a number of statements that does not
   * grow with their count: their records and nodes are read in a query each, the engines asked in
   * parallel (a few at a time per node) and what they report written in one transaction
   * (runtime.observeMany); each service concerned then settles once, not once per container.
   * The caller has left out the containers an action holds (reconcileContainersQueued).
   */
  private async reconcileContainers(uuids: string[], services: Map<string, ServiceRow>): Promise<void> {
    if (uuids.length === 0) return;
    const rows = (await this.d.store.services.containersByUuid(uuids)).filter(
      (c) => c.state !== "Terminated",
    );
    if (rows.length === 0) return;
    const nodes = await this.d.store.nodes.knownNodes(rows.map((c) => c.node_uuid));
    // Their node is gone, and the containers with it.
    const orphaned = rows.filter((c) => {
      const node = nodes.get(c.node_uuid);
      return !node || node.state === "Terminated";
    });
    const now = this.d.clock.now();
    // Unless an action took a container since the caller's check: the write is conditional on
    // the record as the store holds it (no phase), in the transaction of the write.
    await this.d.store.services.patchContainers(
      orphaned.map((c) => c.uuid),
      (r) =>
        r.phase === null && r.destroyed_at === null
          ? { desired: "terminated", destroyed_at: now, observed: "missing" }
          : undefined,
    );
    // Nothing can be observed on a node that is not Deployed (unreachable, deploying).
    const observable = rows.filter((c) => nodes.get(c.node_uuid)?.state === "Deployed");
    const observed = await this.d.runtime.observeMany(observable, { perNode: OBSERVE_PER_NODE });
    for (const row of observed.values()) {
      const spec = JSON.parse(row.spec) as ServiceSpec;
      // autodestroy: a container that exited as the policy says is terminated (the engine's own
      // restart policy has already had its say: an exited container is not coming back).
      if (row.state !== "Stopped" || row.desired !== "running" || row.exit_code === null) continue;
      const destroy =
        spec.autodestroy === "ALWAYS" || (spec.autodestroy === "ON_SUCCESS" && row.exit_code === 0);
      if (!destroy) continue;
      await this.d.store.transaction((tx) =>
        this.d.actions.enqueue(tx, {
          kind: "container.terminate",
          params: { container: row.uuid },
          namespace: row.namespace,
          object: containerUri(row),
          meta: SYSTEM,
        }),
      );
    }
    for (const uuid of new Set([...orphaned, ...observable].map((c) => c.service_uuid))) {
      const s = services.get(uuid)!;
      if (["Starting", "Scaling", "Redeploying", "Stopping", "Terminating"].includes(s.state)) continue;
      await this.d.orchestrator
        .settleService(uuid, { keepTransitional: true })
        .catch((err: unknown) => this.d.onError?.(err));
    }
  }

  /** EVERY_NODE services get a container on every new eligible node while they run. */
  private async reconcileService(uuid: string): Promise<void> {
    const s = await this.d.store.services.findService(uuid);
    if (!s || (s.state !== "Running" && s.state !== "Partly running")) return;
    if (await this.serviceBusy(s)) return;
    const spec = JSON.parse(s.spec) as ServiceSpec;
    if (spec.deployment_strategy !== "EVERY_NODE") return;
    const plan = await this.d.orchestrator.planFor(s, 0);
    if (plan.ok && plan.placements.length) {
      await this.d.store.transaction((tx) =>
        this.d.actions.enqueue(tx, {
          kind: "service.scale",
          params: { service: s.uuid, new_nodes: true },
          namespace: s.namespace,
          object: serviceUri(s),
          meta: SYSTEM,
        }),
      );
    }
  }

  /** Engine containers that carry Berth's labels but no live record are removed (proof of ownership: the labels). */
  private async sweepOrphans(nodeUuid: string): Promise<void> {
    const node = await this.d.store.nodes.knownNode(nodeUuid);
    if (node?.state !== "Deployed") return;
    const engine = this.d.engines.forNode(node);
    const ours = await this.listing(node);
    this.listings.delete(node.uuid);
    const records = new Map(
      // Only which records live is needed: their heads, not whole records with their definitions.
      (
        await this.d.store.services.containerHeads(
          ours.flatMap((o) => (o.labels[LABELS.container] ? [o.labels[LABELS.container]!] : [])),
        )
      ).map((r) => [r.uuid, r]),
    );
    for (const o of ours) {
      const recordUuid = o.labels[LABELS.container];
      if (!recordUuid) continue;
      const record = records.get(recordUuid);
      if (record && record.state !== "Terminated") continue;
      if (record && (await this.busy(containerUri(record)))) continue;
      // Give creations in flight a moment: a record is written before its engine container.
      if (!record && this.d.clock.now() - o.createdAt < 60_000) continue;
      await engine
        .removeContainer(o.id, { force: true, removeVolumes: true })
        .catch((err) => this.d.onError?.(err));
    }
  }

  /** One engine-event subscription per Deployed node; events only enqueue the container. */
  private syncWatchers(nodes: NodeRow[]): void {
    const wanted = new Set(nodes.map((n) => n.uuid));
    for (const [uuid, ctl] of this.watchers) {
      if (!wanted.has(uuid)) {
        ctl.abort();
        this.watchers.delete(uuid);
      }
    }
    for (const n of nodes) {
      if (this.watchers.has(n.uuid)) continue;
      const ctl = new AbortController();
      this.watchers.set(n.uuid, ctl);
      void this.watch(n, ctl.signal).finally(() => {
        if (this.watchers.get(n.uuid)?.signal === ctl.signal) this.watchers.delete(n.uuid);
      });
    }
  }

  /**
   * Whether an action of this process holds the container of an engine event, or its service (as
   * its labels name them): reconcileContainersQueued would find it busy and leave it, after reading
   * it. A stack's action is not seen here; the store is asked then, as for other replicas' actions.
   */
  private heldHere(uuid: string, labels: Record<string, string>): boolean {
    const namespace = labels[LABELS.namespace];
    const service = labels[LABELS.service];
    if (namespace === undefined) return false;
    const objects = [containerUri({ namespace, uuid })];
    if (service !== undefined) objects.push(serviceUri({ namespace, uuid: service }));
    return this.d.actions.runsOnAny(objects);
  }

  private async watch(node: NodeRow, signal: AbortSignal): Promise<void> {
    try {
      const engine = this.d.engines.forNode(node);
      for await (const ev of engine.events({
        signal,
        since: this.d.clock.now() - 1000,
      }) as AsyncIterable<ContainerEvent>) {
        const uuid = ev.labels?.[LABELS.container];
        if (!uuid) continue;
        const ended = END_EVENTS.has(ev.action);
        if (this.heldHere(uuid, ev.labels)) {
          // Left to the action, unless what ended is what its record holds once the action is over.
          if (ended) this.endedWhileHeld.set(uuid, ev.id);
          continue;
        }
        if (ended) this.endsQueued.set(uuid, ev.id);
        this.enqueue(uuid);
      }
    } catch (err) {
      if (!signal.aborted) this.d.onError?.(err);
    }
  }
}

/**
 * Whether a record and its engine containers (`mine`: those of its node's engine that carry its
 * label) agree, so that reconciling it would change nothing: one
 * engine container of the record's generation, the one recorded, in the recorded state. Records
 * in a transitional state, and stopped ones an autodestroy policy may concern, never agree here.
 */
function agrees(c: ContainerRow, mine: ContainerSummary[]): boolean {
  if (mine.length !== 1) return false;
  const x = mine[0]!;
  if (x.id !== c.engine_id || x.labels[GENERATION_LABEL] !== c.generation) return false;
  if (x.state === "running") return c.state === "Running";
  if (x.state === "restarting") return c.state === "Starting";
  if (x.state !== "exited" && x.state !== "created" && x.state !== "dead") return false;
  if (c.state !== "Stopped") return false;
  if (c.desired !== "running" || c.exit_code === null) return true;
  return (JSON.parse(c.spec) as ServiceSpec).autodestroy === "OFF";
}
