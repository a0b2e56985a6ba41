// Level-based reconciliation (Kubernetes-style), assembled from small controllers (controllers/):
// each watches one kind of difference, owns one kind of write and has its own typed work queue
// (work-queue.ts): events only queue a key; a worker re-reads desired and observed state and acts
// on the difference, leaving objects an action is working on to that action. This module wires
// them to their sources: one follower of the change feed (store/follow.ts), the engines' events
// (containers.ts), and the full pass run at start-up and periodically, so a missed event only
// delays convergence. With several replicas (Duties), each watches the engines of the nodes it
// owns and one leader runs the periodic pass and settles services.
import { setImmediate as nextTurn } from "node:timers/promises";
import type { ActionEngine } from "../actions/engine.ts";
import { addTo } from "../domain/collections.ts";
import { type Duties, SOLO_DUTIES } from "../domain/duties.ts";
import { LABELS } from "../domain/service.ts";
import {
  actionEnded,
  SERVICE_TRANSITIONAL,
  type ServiceState,
  settledServiceState,
} from "../domain/states.ts";
import type { Clock } from "../domain/time.ts";
import type { ContainerSummary } from "../drivers/engine.ts";
import type { EngineSource } from "../nodes/provisioners.ts";
import { turnPacer } from "../pace.ts";
import { specOf } from "../store/codec.ts";
import { type Follower, follow } from "../store/follow.ts";
import type { NodeRow } from "../store/nodes.ts";
import type { ComparedContainer } from "../store/services.ts";
import type { ChangeRow, Store } from "../store/store.ts";
import { ContainersController } from "./controllers/containers.ts";
import type { ControllerContext } from "./controllers/context.ts";
import { LinkHostsController } from "./controllers/link-hosts.ts";
import { OrphansController } from "./controllers/orphans.ts";
import { AutodestroyController, EveryNodeController } from "./controllers/policies.ts";
import { SettleController } from "./controllers/settle.ts";
import { type ContainerRuntime, GENERATION_LABEL } from "./runtime.ts";
import type { Orchestrator } from "./services.ts";

/**
 * Live containers read per statement by the periodic comparison: a page of 5,000 held the loop for
 * 60–120 ms of CPU (its read, its rows' garbage) at 30,000 containers; 1,000 stay within a slice.
 */
const COMPARE_PAGE = 1000;

export interface ReconcilerDeps {
  store: Store;
  clock: Clock;
  engines: EngineSource;
  runtime: Pick<ContainerRuntime, "observeMany" | "ensureLinkHosts">;
  orchestrator: Pick<Orchestrator, "settleService" | "planFor">;
  actions: Pick<ActionEngine, "runsOnAny" | "enqueue" | "recordSync">;
  /** Nodes a restore still has to adopt (adoption.ts): left alone until their engines answer. */
  adoption?: { adoptPending(nodes: readonly NodeRow[]): Promise<ReadonlySet<string>> };
  intervalMs: number;
  duties?: Duties;
  /** Called after each full pass this replica ran (reconcile lag). */
  onPass?(at: number): void;
  onError?(err: unknown): void;
}

export class Reconciler {
  private readonly containers: ContainersController;
  private readonly linkHosts: LinkHostsController;
  private readonly orphans: OrphansController;
  private readonly everyNode: EveryNodeController;
  private readonly autodestroy: AutodestroyController;
  private readonly settleServices: SettleController;
  private timer: NodeJS.Timeout | undefined;
  private feed: Follower | undefined;
  private stopped = true;
  /** Engine listings of the current pass, by node (each node's engine is listed once per pass). */
  private readonly listings = new Map<string, ContainerSummary[]>();

  constructor(private readonly d: ReconcilerDeps) {
    const ctx: ControllerContext = {
      store: d.store,
      clock: d.clock,
      duties: d.duties ?? SOLO_DUTIES,
      actions: d.actions,
      onError: (err) => d.onError?.(err),
    };
    this.autodestroy = new AutodestroyController(ctx);
    this.containers = new ContainersController({
      ...ctx,
      engines: d.engines,
      runtime: d.runtime,
      onStopped: (records) => {
        for (const r of records) this.autodestroy.add({ container: r.uuid });
      },
    });
    this.linkHosts = new LinkHostsController({ ...ctx, runtime: d.runtime });
    this.orphans = new OrphansController({
      ...ctx,
      engines: d.engines,
      listing: (node) => this.listing(node),
      forgetListing: (uuid) => this.listings.delete(uuid),
      record: (input) => d.actions.recordSync(input),
    });
    this.everyNode = new EveryNodeController({
      ...ctx,
      placesMore: async (s) => {
        const plan = await d.orchestrator.planFor(s, 0);
        return plan.ok && plan.placements.length > 0;
      },
    });
    this.settleServices = new SettleController({
      ...ctx,
      settle: (uuid) => d.orchestrator.settleService(uuid, { keepTransitional: true }),
    });
  }

  private get duties(): Duties {
    return this.d.duties ?? SOLO_DUTIES;
  }

  private get controllers() {
    return [
      this.containers,
      this.linkHosts,
      this.orphans,
      this.everyNode,
      this.autodestroy,
      this.settleServices,
    ];
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    for (const c of this.controllers) c.start();
    this.timer = setInterval(() => void this.resync(), this.d.intervalMs);
    this.timer.unref();
    // From now: containers changed before are covered by the full pass.
    this.feed = follow(this.d.store, {
      types: ["container", "action"],
      wakesOn: (type) =>
        type === "container" || type === "" || (type === "action" && this.containers.waitsForActions),
      onPage: (rows) => this.onFeedPage(rows),
      onError: (err) => this.d.onError?.(err),
    });
    void this.resync();
  }

  stop(): void {
    this.stopped = true;
    this.feed?.stop();
    this.feed = undefined;
    if (this.timer) clearInterval(this.timer);
    for (const c of this.controllers) c.stop();
  }

  /** A page of the change feed: changed containers get their link hosts checked and their services settled. */
  private async onFeedPage(rows: ChangeRow[]): Promise<void> {
    this.linkHosts.fromFeed(rows);
    await this.settleServices.fromFeed(rows);
    const ended = rows.some((r) => r.type === "action" && actionEnded(r.state));
    if (ended && this.containers.waitsForActions) await this.containers.recheckEnded();
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
      this.containers.syncWatchers(nodes.filter((n) => n.state === "Deployed" && n.engine_url));
      this.listings.clear();
      // A restore's nodes are adopted once they answer; until then nothing compares or sweeps them.
      const waiting =
        (await this.d.adoption?.adoptPending(nodes.filter((n) => n.state === "Deployed" && n.engine_url))) ??
        new Set<string>();
      const leads = this.duties.leads("reconcile");
      if (leads) await this.compareAll(all, waiting);
      for (const n of nodes)
        if (n.state === "Deployed" && !waiting.has(n.uuid)) this.orphans.add({ node: n.uuid });
      await this.controllersIdle();
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
   * state disagrees with their containers are queued to their controllers.
   */
  private async compareAll(nodes: NodeRow[], waiting: ReadonlySet<string>): Promise<void> {
    // Read in pages of narrow rows, the event loop given back between pages and every few
    // milliseconds of comparison: at 150,000 containers one read of whole records held the loop for
    // seconds and allocated every definition at once (issue 34).
    const byNode = new Map<string, ComparedContainer[]>();
    const byService = new Map<string, ComparedContainer[]>();
    const pace = turnPacer();
    const yieldNow = async () => {
      await pace();
    };
    for (let after = 0; ; ) {
      const page = await this.d.store.services.comparedContainers(after, COMPARE_PAGE);
      for (const c of page) {
        addTo(byNode, c.node_uuid, c);
        addTo(byService, c.service_uuid, c);
      }
      if (page.length < COMPARE_PAGE) break;
      after = page.at(-1)!.id;
      await nextTurn();
    }
    await yieldNow();
    const services = await this.d.store.services.liveServices();
    const nodeByUuid = new Map(nodes.map((n) => [n.uuid, n]));
    for (const [nodeUuid, list] of byNode) {
      const node = nodeByUuid.get(nodeUuid);
      if (node && node.state !== "Deployed") continue; // nothing can be observed there
      if (waiting.has(nodeUuid)) continue; // a restore adopts it first
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
        if (!listing || !agrees(c, byRecord.get(c.uuid) ?? [])) this.containers.add({ container: c.uuid });
      await yieldNow();
    }
    for (const s of services) {
      const spec = specOf(s);
      this.linkHosts.compare(s, spec, byService);
      const everyNode = spec.deployment_strategy === "EVERY_NODE";
      if (everyNode && (s.state === "Running" || s.state === "Partly running"))
        this.everyNode.add({ service: s.uuid });
      const live = byService.get(s.uuid);
      await yieldNow();
      if (!live?.length || SERVICE_TRANSITIONAL.includes(s.state as ServiceState)) continue;
      const settled = settledServiceState(
        live.map((c) => c.state),
        everyNode ? 0 : s.target_num_containers,
      );
      if (settled !== s.state) this.settleServices.add({ service: s.uuid });
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
      this.containers.syncWatchers(nodes.filter((n) => n.state === "Deployed" && n.engine_url));
      for (const node of gained) {
        for (const c of await this.d.store.services.liveContainers({ node }))
          this.containers.add({ container: c.uuid });
      }
      await this.controllersIdle();
    } catch (err) {
      this.d.onError?.(err);
    }
  }

  /**
   * Resolves when every controller's queue is empty and the feed follower has read what it was
   * woken for (tests). A controller's work may queue another's (a stopped container, autodestroy)
   * or commit a change the follower reads: it looks until a round finds everything idle at once.
   */
  async settle(): Promise<void> {
    for (let round = 0; round < 100; round++) {
      await this.feed?.idle();
      await this.controllersIdle();
      if (!this.feed?.reading && this.controllers.every((c) => c.length === 0)) return;
    }
  }

  /** Until every controller's queue is empty (one controller's work may queue another's). */
  private async controllersIdle(): Promise<void> {
    for (let round = 0; round < 100; round++) {
      for (const c of this.controllers) await c.idle();
      if (this.controllers.every((c) => c.length === 0)) return;
    }
  }
}

/**
 * Whether a record and its engine containers (`mine`: those of its node's engine that carry its
 * label) agree, so that reconciling it would change nothing: one
 * engine container of the record's generation, the one recorded, in the recorded state. Records
 * in a transitional state, and stopped ones an autodestroy policy may concern, never agree here.
 */
function agrees(c: ComparedContainer, mine: ContainerSummary[]): boolean {
  if (mine.length !== 1) return false;
  const x = mine[0]!;
  if (x.id !== c.engine_id || x.labels[GENERATION_LABEL] !== c.generation) return false;
  if (x.state === "running") return c.state === "Running";
  if (x.state === "restarting") return c.state === "Starting";
  if (x.state !== "exited" && x.state !== "created" && x.state !== "dead") return false;
  if (c.state !== "Stopped") return false;
  if (c.desired !== "running" || c.exit_code === null) return true;
  // The page carries the definition of exactly these containers (comparedContainers).
  return c.spec !== null && specOf({ spec: c.spec }).autodestroy === "OFF";
}
