// Service policies that ask for work: an EVERY_NODE service gets a container on every new
// eligible node while it runs, and a container that exited as its autodestroy policy says is
// terminated. Both controllers only record actions (through the action engine's public enqueue);
// the action kinds do the work.
import { containerUri, serviceUri } from "../../domain/uri.ts";
import { specOf } from "../../store/codec.ts";
import type { ServiceRow } from "../../store/services.ts";
import {
  type ContainerKey,
  type ControllerContext,
  held,
  type ServiceKey,
  SYSTEM,
  serviceObjects,
} from "./context.ts";
import { Controller } from "./controller.ts";

export interface EveryNodeDeps extends ControllerContext {
  /** Whether placing the service on every eligible node would add containers (the scheduler's dry run). */
  placesMore(s: ServiceRow): Promise<boolean>;
}

export class EveryNodeController extends Controller<ServiceKey> {
  constructor(private readonly d: EveryNodeDeps) {
    super({ id: (k) => k.service, workers: 2, onError: d.onError });
  }

  protected async work([k]: ServiceKey[]): Promise<undefined> {
    if (k) await this.reconcile(k.service);
    return undefined;
  }

  private async reconcile(uuid: string): Promise<void> {
    const { store } = this.d;
    const s = await store.services.findService(uuid);
    if (!s || (s.state !== "Running" && s.state !== "Partly running")) return;
    if (await held(store, serviceObjects(s))) return;
    const spec = specOf(s);
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

export class AutodestroyController extends Controller<ContainerKey> {
  constructor(private readonly d: ControllerContext) {
    super({ id: (k) => k.container, batch: 100, onError: d.onError });
  }

  /**
   * A container that exited while it should run is terminated when its policy says so (the
   * engine's own restart policy has already had its say: an exited container is not coming back).
   */
  protected async work(keys: ContainerKey[]): Promise<ContainerKey[]> {
    const { store } = this.d;
    const failed: ContainerKey[] = [];
    for (const row of await store.services.containersByUuid(keys.map((k) => k.container))) {
      if (row.state !== "Stopped" || row.desired !== "running" || row.exit_code === null) continue;
      const spec = specOf(row);
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
