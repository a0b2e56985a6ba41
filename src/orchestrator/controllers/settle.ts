// The service settle controller: a service's state follows its containers, as a stack's follows
// its services (stacks/follower.ts). It follows the change feed: a container change no action holds
// (an engine's report, a container of a gone node ended) queues its service, which is settled
// unless an operation is under way (its action settles it when it ends). The periodic pass queues
// services whose state disagrees with their containers. Once per installation: the replica leading
// the reconcile job settles.
import { SERVICE_TRANSITIONAL, type ServiceState } from "../../domain/states.ts";
import { parseObjectUri } from "../../domain/uri.ts";
import { parentsOf } from "../../store/codec.ts";
import type { ChangeRow } from "../../store/store.ts";
import { type ControllerContext, type ServiceKey, serviceObjects } from "./context.ts";
import { Controller } from "./controller.ts";

export interface SettleDeps extends ControllerContext {
  /** Records the service's state from its containers, leaving a service in a transitional state alone. */
  settle(serviceUuid: string): Promise<unknown>;
}

export class SettleController extends Controller<ServiceKey> {
  constructor(private readonly d: SettleDeps) {
    super({ id: (k) => k.service, batch: 100, onError: d.onError });
  }

  /**
   * Queues the services of the container changes of a page of the change feed that no action
   * holds: those of this process are known without a read, the others' in one query per page.
   */
  async fromFeed(rows: readonly ChangeRow[]): Promise<void> {
    if (!this.d.duties.leads("reconcile")) return;
    const candidates = new Map<string, string>();
    for (const row of rows) {
      if (row.type !== "container") continue;
      const parents = parentsOf(row);
      if (this.d.actions.runsOnAny([row.resource_uri, ...parents])) continue;
      for (const parent of parents) {
        const p = parseObjectUri(parent);
        if (p?.resource === "service" && p.namespace !== undefined) candidates.set(row.resource_uri, p.id);
      }
    }
    if (candidates.size === 0) return;
    const busy = await this.d.store.actions.objectsWithActiveActions([...candidates.keys()]);
    for (const [uri, service] of candidates) if (!busy.has(uri)) this.add({ service });
  }

  protected async work(keys: ServiceKey[]): Promise<ServiceKey[]> {
    const { store } = this.d;
    const services = (await store.services.servicesByUuid(keys.map((k) => k.service))).filter(
      (s) => s.state !== "Terminated" && !SERVICE_TRANSITIONAL.includes(s.state as ServiceState),
    );
    if (services.length === 0) return [];
    const busy = await store.actions.objectsWithActiveActions(services.flatMap(serviceObjects));
    const failed: ServiceKey[] = [];
    for (const s of services) {
      if (serviceObjects(s).some((o) => busy.has(o))) continue;
      await this.d.settle(s.uuid).catch((err: unknown) => {
        this.d.onError(err);
        failed.push({ service: s.uuid });
      });
    }
    return failed;
  }
}
