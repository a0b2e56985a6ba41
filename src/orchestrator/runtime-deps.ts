// What the container runtime needs of Berth (RuntimeDeps, given by the orchestrator's module) and
// what its parts share (RuntimeParts): the deps, the group commit of every batched operation in
// flight, and the stop timeout. The parts: start-records.ts (start, redeploy), generation-start.ts
// (the engine's half of a start), stop-records.ts (stop, removal), observe-records.ts.
import type { Clock } from "../domain/time.ts";
import type { ContainerSpec, RegistryAuth } from "../drivers/engine.ts";
import type { EngineSource } from "../nodes/provisioners.ts";
import type { NodeRow } from "../store/nodes.ts";
import type { ContainerRow, ServiceRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import type { RecordBatches } from "./record-batches.ts";

export interface RuntimeDeps {
  store: Store;
  engines: EngineSource;
  clock: Clock;
  /** The engine spec of a container, from the definition it is deployed with. */
  specFor(
    c: ContainerRow,
    opts: { volumesFrom: string[]; service?: ServiceRow; node?: NodeRow },
  ): Promise<ContainerSpec>;
  /** Registry credentials for an image pulled for a container of the namespace, when Berth knows some. */
  pullAuth?(image: string, namespace: string): Promise<RegistryAuth | undefined>;
  /**
   * Whether a redeploy pulls the image again although the node has it (a tag on a registry Berth
   * knows may have moved); otherwise only missing images are pulled.
   */
  refreshesOnRedeploy?(image: string, namespace: string): Promise<boolean>;
  /** Seconds an engine waits between SIGTERM and SIGKILL when stopping. */
  stopTimeoutS?: number;
  /** The link host entries a container should hold now (its service's current links); undefined: none to follow. */
  linkHostsFor?(c: ContainerRow): Promise<string[] | undefined>;
  /** Takes containers out of their routers before their engines stop them (router/drains.ts). */
  drain?(rows: readonly ContainerRow[]): Promise<void>;
  /**
   * Keeps the records' engine containers routed while the records move to a new generation (a
   * start-first redeploy) until release(), which drains them before they stop (router/drains.ts).
   */
  hold?(rows: readonly ContainerRow[]): Promise<void>;
  release?(rows: readonly ContainerRow[]): Promise<void>;
  /** The records' holds belong to a paused rollout now: routed, without a time limit, while it is paused. */
  pause?(containerUuids: readonly string[]): Promise<void>;
  /** When a started container counts as started (readiness.ts); undefined: once its engine says it runs. */
  readiness?: { minUpMs: number; maxWaitMs: number };
}

/** What the runtime's parts share (ContainerRuntime makes it once). */
export interface RuntimeParts {
  d: RuntimeDeps;
  /** The group commit every batched operation in flight shares (see record-batches.ts). */
  commit: RecordBatches;
  /** Seconds a stop waits when the definition names no stop_grace_period. */
  stopTimeoutS: number;
}
