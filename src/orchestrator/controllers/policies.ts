// Service policies that ask for work: an EVERY_NODE service gets a container on every new
// eligible node while it runs, and a container that exited as its autodestroy policy says is
// terminated. Both controllers only record actions (through the action engine's public enqueue);
// the action kinds do the work.
import type { ServiceSpec } from "../../domain/service.ts";
import { containerUri, serviceUri } from "../../domain/uri.ts";
import type { ServiceRow } from "../../store/services.ts";
import { WorkQueue } from "../work-queue.ts";
import { CONTROLLER_BACKOFF, type ControllerContext, held, SYSTEM, serviceObjects } from "./context.ts";

/** An EVERY_NODE service to compare with the nodes it could run on. */
export interface EveryNodeKey {
  service: string;
}

export interface EveryNodeDeps extends ControllerContext {
  /** Whether placing the service on every eligible node would add containers (the scheduler's dry run). */
  placesMore(s: ServiceRow): Promise<boolean>;
}

export class EveryNodeController {
  private readonly queue: WorkQueue<EveryNodeKey>;

  constructor(private readonly d: EveryNodeDeps) {
    this.queue = new WorkQueue({
      id: (k) => k.service,
      workers: 2,
      backoff: CONTROLLER_BACKOFF,
      onError: d.onError,
      work: async ([k]) => {
        await this.reconcile(k!.service);
        return undefined;
      },
    });
  }

  add(service: string): void {
    this.queue.add({ service });
  }

  /** Keys queued or being worked on. */
  get length(): number {
    return this.queue.length;
  }

  idle(): Promise<void> {
    return this.queue.idle();
  }

  start(): void {
    this.queue.reopen();
  }

  stop(): void {
    void this.queue.shutdown();
  }

  private async reconcile(uuid: string): Promise<void> {
    const { store } = this.d;
    const s = await store.services.findService(uuid);
    if (!s || (s.state !== "Running" && s.state !== "Partly running")) return;
    if (await held(store, serviceObjects(s))) return;
    const spec = JSON.parse(s.spec) as ServiceSpec;
    if (spec.deployment_strategy !== "EVERY_NODE") return;
    if (!(await this.d.placesMore(s))) return;
    await store.transaction((tx) =>
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

/** A stopped container whose autodestroy policy may end it. */
export interface AutodestroyKey {
  container: string;
}

export class AutodestroyController {
  private readonly queue: WorkQueue<AutodestroyKey>;

  constructor(private readonly d: ControllerContext) {
    this.queue = new WorkQueue({
      id: (k) => k.container,
      batch: 100,
      backoff: CONTROLLER_BACKOFF,
      onError: d.onError,
      work: (keys) => this.work(keys),
    });
  }

  add(container: string): void {
    this.queue.add({ container });
  }

  /** Keys queued or being worked on. */
  get length(): number {
    return this.queue.length;
  }

  idle(): Promise<void> {
    return this.queue.idle();
  }

  start(): void {
    this.queue.reopen();
  }

  stop(): void {
    void this.queue.shutdown();
  }

  /**
   * A container that exited while it should run is terminated when its policy says so (the
   * engine's own restart policy has already had its say: an exited container is not coming back).
   */
  private async work(keys: AutodestroyKey[]): Promise<AutodestroyKey[]> {
    const { store } = this.d;
    const failed: AutodestroyKey[] = [];
    for (const row of await store.services.containersByUuid(keys.map((k) => k.container))) {
      if (row.state !== "Stopped" || row.desired !== "running" || row.exit_code === null) continue;
      const spec = JSON.parse(row.spec) as ServiceSpec;
      const destroy =
        spec.autodestroy === "ALWAYS" || (spec.autodestroy === "ON_SUCCESS" && row.exit_code === 0);
      if (!destroy || (await held(store, [containerUri(row)]))) continue;
      await store
        .transaction((tx) =>
          this.d.actions.enqueue(tx, {
            kind: "container.terminate",
            params: { container: row.uuid },
            namespace: row.namespace,
            object: containerUri(row),
            meta: SYSTEM,
          }),
        )
        .catch((err: unknown) => {
          this.d.onError(err);
          failed.push({ container: row.uuid });
        });
    }
    return failed;
  }
}
