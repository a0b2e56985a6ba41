// Pure placement: strategies and node filters over a read-only snapshot, returning a plan or an
// explanation. No I/O, clock or randomness; the caller re-checks the plan against fresh state.
export { cpusetMax, NO_DEMAND, SHARES_PER_CPU } from "./capacity.ts";
export { filterNodes, isLive, NO_NODES_REASON, type NodeFilterResult } from "./filters.ts";
export { Heap } from "./heap.ts";
export { nextContainerNumbers } from "./numbers.ts";
export { PlacementState, planEveryNode, planPlacement } from "./placement.ts";
export { planRemoval } from "./removal.ts";
export type {
  ContainerSnapshot,
  Demand,
  NodeSnapshot,
  PlacementPlan,
  PlacementRequest,
  RemovalRequest,
  Strategy,
} from "./types.ts";
