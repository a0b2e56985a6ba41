// Placement strategies of the spec ("Service" → deployment strategies). Each new container is
// placed against the counts as they will be after the earlier placements of the same plan, so a
// request for several containers spreads them instead of piling them onto one node.
//
// A batch of requests (many services started at once) is planned over one snapshot: the nodes'
// counts and claims are computed once (`PlacementState`), and each request's placements are
// counted before the next request is planned. Choosing a node is a heap pop, so a plan costs
// O(nodes + containers + placements × log nodes), never placements × nodes.
import { NO_DEMAND, NodeUsage } from "./capacity.ts";
import { explainNoFit, filterNodes, isLive } from "./filters.ts";
import { Heap } from "./heap.ts";
import type { ContainerSnapshot, Demand, NodeSnapshot, PlacementPlan, PlacementRequest } from "./types.ts";

interface Load {
  node: NodeSnapshot;
  /**
   * The final tie-break: the node's input position, so equal nodes are chosen in the order the
   * caller lists them, or its rank in the caller's `order` (see PlacementState).
   */
  order: number;
  /**
   * Running containers of every service (the spec: "lowest total number of running containers").
   * Starting ones count: they are about to run, and placements of this plan are counted as they are made.
   */
  total: number;
  /** Running containers of the service being placed (HIGH_AVAILABILITY). */
  own: number;
  /** Live containers of the service in any state (EVERY_NODE: one per node, running or not). */
  ownLive: number;
}

const RUNNING = new Set(["Running", "Starting"]);

/** Negative when `a` should receive the next container before `b`. */
type Preference = (a: Load, b: Load) => number;

const emptiestNode: Preference = (a, b) => a.total - b.total || a.order - b.order;
const highAvailability: Preference = (a, b) => a.own - b.own || emptiestNode(a, b);

/**
 * A namespace's nodes and live containers, counted once, with every placement planned on it
 * counted as it is made: requests planned one after the other see each other's containers, as
 * they would after being written.
 */
export class PlacementState {
  private readonly usage = new Map<string, NodeUsage>();
  /** Each node's tie-break rank, when the caller gave an order (else: its input position). */
  private readonly ranks: Map<string, number> | undefined;
  /** Running (or starting) containers per node, of every service. */
  private readonly totals = new Map<string, number>();
  /** Per service: running and live containers per node. */
  private readonly own = new Map<string, Map<string, { running: number; live: number }>>();

  /**
   * `order`: ranks the nodes among equally preferred ones (lowest first), computed once per node;
   * without it they are chosen in the order listed. Several replicas planning on equal snapshots
   * give each its own order (plan-applier.ts), so they do not all pick the same emptiest nodes.
   */
  constructor(
    readonly nodes: NodeSnapshot[],
    containers: ContainerSnapshot[],
    order?: (node: NodeSnapshot) => number,
  ) {
    this.ranks = order ? new Map(nodes.map((n) => [n.uuid, order(n)])) : undefined;
    for (const n of nodes) this.usage.set(n.uuid, new NodeUsage(n));
    for (const c of containers) {
      if (!isLive(c)) continue;
      this.count(c.service, c.node, RUNNING.has(c.state), c.demand);
    }
  }

  private count(service: string, node: string, running: boolean, demand: Demand | undefined): void {
    const usage = this.usage.get(node);
    if (!usage) return; // a node that is gone or not live: not a candidate
    if (demand) usage.add(demand);
    if (running) this.totals.set(node, (this.totals.get(node) ?? 0) + 1);
    let mine = this.own.get(service);
    if (!mine) {
      mine = new Map();
      this.own.set(service, mine);
    }
    const o = mine.get(node) ?? { running: 0, live: 0 };
    o.live += 1;
    if (running) o.running += 1;
    mine.set(node, o);
  }

  /**
   * Takes back placements `plan` counted (their commit was refused): the state is again what it
   * was before the plan was made.
   */
  unplan(service: string, placements: readonly string[], demand: Demand | undefined): void {
    for (const node of placements) {
      const usage = this.usage.get(node);
      if (!usage) continue;
      if (demand) usage.remove(demand);
      this.totals.set(node, (this.totals.get(node) ?? 1) - 1);
      const o = this.own.get(service)?.get(node);
      if (o) {
        o.live -= 1;
        o.running -= 1;
      }
    }
  }

  /**
   * Counts one node again from its live containers as read now (another replica placed or removed
   * containers there): what was counted on it before is forgotten. The cost is the node's
   * containers plus one look per service, never the namespace's containers.
   */
  refreshNode(node: string, containers: readonly ContainerSnapshot[]): void {
    const usage = this.usage.get(node);
    if (!usage) return;
    this.usage.set(node, new NodeUsage(usage.node));
    this.totals.delete(node);
    for (const mine of this.own.values()) mine.delete(node);
    for (const c of containers) {
      if (c.node === node && isLive(c)) this.count(c.service, node, RUNNING.has(c.state), c.demand);
    }
  }

  private loads(eligible: NodeSnapshot[], service: string): Load[] {
    const mine = this.own.get(service);
    const ranks = this.ranks;
    return eligible.map((node, position) => {
      const o = mine?.get(node.uuid);
      return {
        node,
        order: ranks?.get(node.uuid) ?? position,
        total: this.totals.get(node.uuid) ?? 0,
        own: o?.running ?? 0,
        ownLive: o?.live ?? 0,
      };
    });
  }

  /** Plans one request against the state and counts its placements (new containers start). */
  plan(req: Omit<PlacementRequest, "nodes" | "containers">): PlacementPlan {
    const plan = req.strategy === "EVERY_NODE" ? this.everyNode(req) : this.spread(req);
    if (plan.ok) for (const node of plan.placements) this.count(req.service, node, true, req.demand);
    return plan;
  }

  private spread(req: Omit<PlacementRequest, "nodes" | "containers">): PlacementPlan {
    if (req.count <= 0) return { ok: true, placements: [] };
    const { eligible, rejections } = filterNodes(this.nodes, req.serviceTags);
    if (eligible.length === 0)
      return { ok: false, reasons: explainNoFit(this.nodes, req.serviceTags, rejections) };
    const prefer = req.strategy === "HIGH_AVAILABILITY" ? highAvailability : emptiestNode;
    const demand = req.demand ?? NO_DEMAND;
    const loads = this.loads(eligible, req.service);
    // Claims only grow while a plan is made: a node without room now never gets room in this plan.
    const heap = new Heap<Load>(prefer);
    for (const load of loads) if (this.usage.get(load.node.uuid)!.fits(demand)) heap.push(load);
    const placements: string[] = [];
    const claimed = new Map<string, NodeUsage>();
    while (placements.length < req.count) {
      const best = heap.pop();
      if (!best) break;
      // What this plan already put there counts (the state is updated once the plan is made).
      let usage = claimed.get(best.node.uuid);
      if (!usage) {
        usage = this.usage.get(best.node.uuid)!.copy();
        claimed.set(best.node.uuid, usage);
      }
      if (!usage.fits(demand)) continue;
      placements.push(best.node.uuid);
      usage.add(demand);
      best.total += 1;
      best.own += 1;
      best.ownLive += 1;
      heap.push(best);
    }
    if (placements.length === req.count) return { ok: true, placements };
    const refusals = loads.map(
      (load) =>
        `node ${load.node.name} (${load.node.uuid}): ${(claimed.get(load.node.uuid) ?? this.usage.get(load.node.uuid)!).refusal(demand)}`,
    );
    if (placements.length === 0)
      return { ok: false, reasons: shortfallOf(0, req.count, [...refusals, ...rejections]) };
    return { ok: true, placements, shortfall: shortfallOf(placements.length, req.count, refusals) };
  }

  private everyNode(req: Omit<PlacementRequest, "nodes" | "containers" | "count">): PlacementPlan {
    const { eligible, rejections } = filterNodes(this.nodes, req.serviceTags);
    if (eligible.length === 0)
      return { ok: false, reasons: explainNoFit(this.nodes, req.serviceTags, rejections) };
    const demand = req.demand ?? NO_DEMAND;
    const placements: string[] = [];
    const refusals: string[] = [];
    for (const load of this.loads(eligible, req.service)) {
      if (load.ownLive > 0) continue;
      const why = this.usage.get(load.node.uuid)!.refusal(demand);
      if (why) refusals.push(`node ${load.node.name} (${load.node.uuid}): ${why}`);
      else placements.push(load.node.uuid);
    }
    if (refusals.length === 0) return { ok: true, placements };
    const wanted = placements.length + refusals.length;
    if (placements.length === 0) return { ok: false, reasons: shortfallOf(0, wanted, refusals) };
    return { ok: true, placements, shortfall: shortfallOf(placements.length, wanted, refusals) };
  }
}

/** The summary of a shortfall: how many fit, and why the rest do not. */
function shortfallOf(placed: number, wanted: number, refusals: string[]): string[] {
  const head =
    placed === 0
      ? `no node has room for a container of this service (${wanted} wanted)`
      : `only ${placed} of ${wanted} containers fit on the nodes; no node has room for the other ${wanted - placed}`;
  return [head, ...refusals];
}

/** Where `req.count` new containers of `req.service` go, or why none can be placed. */
export function planPlacement(req: PlacementRequest): PlacementPlan {
  return new PlacementState(req.nodes, req.containers).plan(req);
}

/**
 * EVERY_NODE: one container on each eligible node that has no live container of the service yet.
 * Run again when a node is added, it yields exactly the new node, which is how new nodes get
 * their container automatically.
 */
export function planEveryNode(req: Omit<PlacementRequest, "count" | "strategy">): PlacementPlan {
  return new PlacementState(req.nodes, req.containers).plan({ ...req, strategy: "EVERY_NODE", count: 0 });
}
