// The scheduler's read-only view of the world. Callers copy what they need out of the store into
// these shapes, so placement can be planned (and tested) without a database, an engine or a clock.
import type { DeploymentStrategy } from "../domain/service.ts";

/** The spec's deployment strategies; one definition shared with the service definition. */
export type Strategy = DeploymentStrategy;

export interface NodeSnapshot {
  uuid: string;
  name: string;
  /** "Deployed" | "Unreachable" | "Deploying" | …; only Deployed nodes take containers. */
  state: string;
  tags: string[];
  /** Memory of the node in MB; 0 or absent: unknown, not checked. */
  memoryMb?: number;
  /** CPUs of the node; 0 or absent: unknown, not checked. */
  cpus?: number;
}

export interface PortClaim {
  port: number;
  protocol: "tcp" | "udp";
}

/** What one container claims on its node (see capacity.ts for the accounting). */
export interface Demand {
  /** Published ports with a fixed outer_port. */
  ports: PortClaim[];
  memoryMb: number;
  cpuShares: number;
  /** The highest CPU index of its cpuset; -1 without one. */
  cpusetMax: number;
}

export interface ContainerSnapshot {
  uuid: string;
  /** uuid of the node the container sits on. */
  node: string;
  /** uuid of the service the container belongs to. */
  service: string;
  /** Starting | Running | Stopping | Stopped | Terminating | Terminated */
  state: string;
  /** The container is named `<service>-<number>`. */
  number: number;
  /** What it claims on its node; absent: nothing. */
  demand?: Demand;
}

export interface PlacementRequest {
  service: string;
  strategy: Strategy;
  serviceTags: string[];
  /** New containers wanted; ignored for EVERY_NODE, whose count follows from the nodes. */
  count: number;
  nodes: NodeSnapshot[];
  containers: ContainerSnapshot[];
  /** What each new container claims; absent: nothing. */
  demand?: Demand;
}

export type PlacementPlan =
  | {
      ok: true;
      /** Node uuid per new container, in order. */
      placements: string[];
      /**
       * Set when fewer containers fit than were asked for: a summary line, then one line per
       * node saying why it cannot take one more.
       */
      shortfall?: string[];
    }
  | {
      ok: false;
      /** A summary line first, then one line per node saying why it cannot take a container. */
      reasons: string[];
    };

export interface RemovalRequest {
  service: string;
  count: number;
  containers: ContainerSnapshot[];
  nodes: NodeSnapshot[];
}
