// The state the API shows for containers and nodes, derived from what actions decided (phase) and
// what engines and health checks reported (observed): every combination, written out as a table,
// so that a change of any row fails here.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  CONTAINER_OBSERVED,
  CONTAINER_PHASES,
  CONTAINER_STATES,
  type ContainerObserved,
  type ContainerPhase,
  type ContainerState,
  containerState,
  NODE_OBSERVED,
  NODE_PHASES,
  NODE_STATES,
  type NodeObserved,
  type NodePhase,
  type NodeState,
  nodeState,
} from "../../src/domain/states.ts";

/** Rows: phase (or "-" for none); columns: observed, in CONTAINER_OBSERVED's order. */
const CONTAINER_TABLE: Record<ContainerPhase | "-", Record<ContainerObserved, ContainerState>> = {
  "-": { none: "Stopped", running: "Running", restarting: "Starting", exited: "Stopped", missing: "Stopped" },
  starting: {
    none: "Starting",
    running: "Starting",
    restarting: "Starting",
    exited: "Starting",
    missing: "Starting",
  },
  redeploying: {
    none: "Starting",
    running: "Starting",
    restarting: "Starting",
    exited: "Starting",
    missing: "Starting",
  },
  stopping: {
    none: "Stopping",
    running: "Stopping",
    restarting: "Stopping",
    exited: "Stopping",
    missing: "Stopping",
  },
  terminating: {
    none: "Terminating",
    running: "Terminating",
    restarting: "Terminating",
    exited: "Terminating",
    missing: "Terminating",
  },
};

const NODE_TABLE: Record<NodePhase | "-", Record<NodeObserved, NodeState>> = {
  "-": { reachable: "Deployed", unreachable: "Unreachable" },
  deploying: { reachable: "Deploying", unreachable: "Deploying" },
  upgrading: { reachable: "Upgrading", unreachable: "Upgrading" },
  terminating: { reachable: "Terminating", unreachable: "Terminating" },
};

describe("container state from phase and observed", () => {
  test("every live combination gives the state of the table", () => {
    for (const phase of [null, ...CONTAINER_PHASES]) {
      for (const observed of CONTAINER_OBSERVED) {
        assert.equal(
          containerState({ phase, observed, destroyed_at: null }),
          CONTAINER_TABLE[phase ?? "-"][observed],
          `phase ${phase}, observed ${observed}`,
        );
      }
    }
  });

  test("a removed record is Terminated whatever its phase and observation", () => {
    for (const phase of [null, ...CONTAINER_PHASES]) {
      for (const observed of CONTAINER_OBSERVED) {
        assert.equal(containerState({ phase, observed, destroyed_at: 1 }), "Terminated");
      }
    }
  });

  test("every state of the spec is reachable, and no other", () => {
    const reached = new Set<string>(["Terminated"]);
    for (const row of Object.values(CONTAINER_TABLE)) for (const s of Object.values(row)) reached.add(s);
    assert.deepEqual([...reached].sort(), [...CONTAINER_STATES].sort());
  });
});

describe("node state from phase and observed", () => {
  test("every live combination gives the state of the table", () => {
    for (const phase of [null, ...NODE_PHASES]) {
      for (const observed of NODE_OBSERVED) {
        assert.equal(
          nodeState({ phase, observed, destroyed_at: null }),
          NODE_TABLE[phase ?? "-"][observed],
          `phase ${phase}, observed ${observed}`,
        );
      }
    }
  });

  test("a destroyed node is Terminated whatever its phase and observation", () => {
    for (const phase of [null, ...NODE_PHASES]) {
      for (const observed of NODE_OBSERVED) {
        assert.equal(nodeState({ phase, observed, destroyed_at: 1 }), "Terminated");
      }
    }
  });

  test("every state of the spec is reachable, and no other", () => {
    const reached = new Set<string>(["Terminated"]);
    for (const row of Object.values(NODE_TABLE)) for (const s of Object.values(row)) reached.add(s);
    assert.deepEqual([...reached].sort(), [...NODE_STATES].sort());
  });
});
