// Placement strategies of the spec ("Service" → deployment strategies). Each new container is
// placed against the counts as they will be after the earlier placements of the same plan, so a
// request for several containers spreads them instead of piling them onto one node.
import { NO_DEMAND, type NodeUsage, usageOf } from "./capacity.ts";
import { explainNoFit, filterNodes, isLive } from "./filters.ts";
import type { ContainerSnapshot, Demand, NodeSnapshot, PlacementPlan, PlacementRequest } from "./types.ts";

interface Load {
  node: NodeSnapshot;
  /** Input position: the final tie-break, so equal nodes are chosen in the order the caller lists them. */
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

function loadsOf(nodes: NodeSnapshot[], containers: ContainerSnapshot[], service: string): Load[] {
  const loads = nodes.map((node, order) => ({ node, order, total: 0, own: 0, ownLive: 0 }));
  const byUuid = new Map(loads.map((load) => [load.node.uuid, load]));
  for (const container of containers) {
    if (!isLive(container)) continue;
    const load = byUuid.get(container.node);
    if (!load) continue;
    const running = RUNNING.has(container.state);
    if (running) load.total += 1;
    if (container.service === service) {
      load.ownLive += 1;
      if (running) load.own += 1;
    }
  }
  return loads;
}

/** Negative when `a` should receive the next container before `b`. */
type Preference = (a: Load, b: Load) => number;

const emptiestNode: Preference = (a, b) => a.total - b.total || a.order - b.order;
const highAvailability: Preference = (a, b) => a.own - b.own || emptiestNode(a, b);

/**
 * Places up to `count` containers, each on the preferred node that still has room for it; stops
 * early when no node has room. Returns the placements and, for a shortfall, each node's reason.
 */
function place(
  loads: Load[],
  count: number,
  prefer: Preference,
  usage: Map<string, NodeUsage>,
  demand: Demand,
): { placements: string[]; refusals: string[] } {
  const placements: string[] = [];
  for (let i = 0; i < count; i++) {
    let best: Load | undefined;
    for (const load of loads) {
      if (usage.get(load.node.uuid)?.refusal(demand) !== undefined) continue;
      if (!best || prefer(load, best) < 0) best = load;
    }
    if (!best) {
      const refusals = loads.map(
        (load) => `node ${load.node.name} (${load.node.uuid}): ${usage.get(load.node.uuid)?.refusal(demand)}`,
      );
      return { placements, refusals };
    }
    placements.push(best.node.uuid);
    usage.get(best.node.uuid)?.add(demand);
    best.total += 1;
    best.own += 1;
    best.ownLive += 1;
  }
  return { placements, refusals: [] };
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
  if (req.strategy === "EVERY_NODE") {
    return planEveryNode({
      service: req.service,
      serviceTags: req.serviceTags,
      nodes: req.nodes,
      containers: req.containers,
    });
  }
  if (req.count <= 0) return { ok: true, placements: [] };
  const { eligible, rejections } = filterNodes(req.nodes, req.serviceTags);
  if (eligible.length === 0)
    return { ok: false, reasons: explainNoFit(req.nodes, req.serviceTags, rejections) };
  const prefer = req.strategy === "HIGH_AVAILABILITY" ? highAvailability : emptiestNode;
  const usage = usageOf(eligible, req.containers, isLive);
  const { placements, refusals } = place(
    loadsOf(eligible, req.containers, req.service),
    req.count,
    prefer,
    usage,
    req.demand ?? NO_DEMAND,
  );
  if (placements.length === 0)
    return { ok: false, reasons: shortfallOf(0, req.count, [...refusals, ...rejections]) };
  if (placements.length < req.count)
    return { ok: true, placements, shortfall: shortfallOf(placements.length, req.count, refusals) };
  return { ok: true, placements };
}

/**
 * EVERY_NODE: one container on each eligible node that has no live container of the service yet.
 * Run again when a node is added, it yields exactly the new node, which is how new nodes get
 * their container automatically.
 */
export function planEveryNode(req: Omit<PlacementRequest, "count" | "strategy">): PlacementPlan {
  const { eligible, rejections } = filterNodes(req.nodes, req.serviceTags);
  if (eligible.length === 0)
    return { ok: false, reasons: explainNoFit(req.nodes, req.serviceTags, rejections) };
  const usage = usageOf(eligible, req.containers, isLive);
  const demand = req.demand ?? NO_DEMAND;
  const placements: string[] = [];
  const refusals: string[] = [];
  for (const load of loadsOf(eligible, req.containers, req.service)) {
    if (load.ownLive > 0) continue;
    const why = usage.get(load.node.uuid)?.refusal(demand);
    if (why) refusals.push(`node ${load.node.name} (${load.node.uuid}): ${why}`);
    else placements.push(load.node.uuid);
  }
  if (refusals.length === 0) return { ok: true, placements };
  const wanted = placements.length + refusals.length;
  if (placements.length === 0) return { ok: false, reasons: shortfallOf(0, wanted, refusals) };
  return { ok: true, placements, shortfall: shortfallOf(placements.length, wanted, refusals) };
}
