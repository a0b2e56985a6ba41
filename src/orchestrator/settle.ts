// The one writer of a service's `state`: an operation's transitional state, written with its
// action (`beginOperation`, from the kinds' and stacks' prepare), the state its containers give
// (`settleService`: when an operation ends, and when containers change, from the settle
// controller), and Terminated (`terminated`). A settle reads the service row first and its
// containers after, and writes only if the row is still the one it read: what it writes is never
// older than what another settle wrote before it (test/services/settle-order.test.ts).
import { SERVICE_TRANSITIONAL, type ServiceState, settledServiceState } from "../domain/states.ts";
import type { Clock } from "../domain/time.ts";
import { specOf } from "../store/codec.ts";
import type { ServiceRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import type { ContainerRuntime, Log } from "./runtime.ts";

export type ContainerHead = Awaited<ReturnType<Store["services"]["containerHeadsOfService"]>>[number];

/** An operation begins: the service's transitional state, in the transaction that records its action. */
export function beginOperation(tx: Store, s: ServiceRow, state: ServiceState): Promise<ServiceRow> {
  return tx.services.updateService(s, { state });
}

/** The states a container in an action's phase shows (domain/states.ts containerState). */
const IN_PHASE_STATES = new Set<string>(["Starting", "Stopping", "Terminating"]);

/** The service's live containers, without their definitions (those who work on them read them once, marking them). */
export async function liveContainers(store: Store, serviceUuid: string): Promise<ContainerHead[]> {
  return (await store.services.containerHeadsOfService(serviceUuid)).filter((c) => c.state !== "Terminated");
}

export class Settler {
  constructor(
    private readonly d: {
      store: Store;
      clock: Clock;
      runtime: ContainerRuntime;
      /** Engine calls in flight per node while observing. */
      perNode: number;
    },
  ) {}

  private get store() {
    return this.d.store;
  }

  /**
   * The service's state from its containers, with the timestamps that go with reaching it.
   * `keepTransitional`: leave a service an operation is working on alone (observers such as the
   * reconciler, which may have read the service before the operation began).
   */
  async settleService(
    uuid: string,
    opts: { keepTransitional?: boolean } = {},
  ): Promise<ServiceRow | undefined> {
    const now = this.d.clock.now();
    return this.store.mutate("service", uuid, async (s) => {
      if (s.state === "Terminated") return undefined;
      if (opts.keepTransitional && SERVICE_TRANSITIONAL.includes(s.state as ServiceState)) return undefined;
      // Read after the row (and again on each retry): containers as new as the state it holds.
      const containers = await this.store.services.containerHeadsOfService(uuid);
      const state = settledServiceState(
        containers.map((c) => c.state),
        specOf(s).deployment_strategy === "EVERY_NODE" ? 0 : s.target_num_containers,
      );
      const patch: Partial<ServiceRow> = { state };
      if ((state === "Running" || state === "Partly running") && s.state !== state) patch.started_at = now;
      if (state === "Stopped" && s.state !== "Stopped") patch.stopped_at = now;
      return state === s.state ? undefined : patch;
    });
  }

  /** A terminate's end: the service is gone once no container of it is left. */
  async terminated(uuid: string): Promise<void> {
    const now = this.d.clock.now();
    await this.store.mutate("service", uuid, () => ({ state: "Terminated", destroyed_at: now }));
  }

  /**
   * The operation is over: containers a failed or canceled step left in a phase are observed
   * again and their phase ends, then the service settles. (The others hold what their engines
   * answered last, which the engine watcher and the reconciler keep so: asking every engine again
   * would cost a call per container.)
   */
  async settleAfter(serviceUuid: string, log?: Log): Promise<void> {
    const live = await liveContainers(this.store, serviceUuid);
    const observed = await this.d.runtime.observeMany(
      // A container in a phase shows its phase's state (a restarting one shows Starting too).
      await this.store.services.containersByUuid(
        live.filter((c) => IN_PHASE_STATES.has(c.state)).map((c) => c.uuid),
      ),
      { perNode: this.d.perNode },
    );
    // Never created on its engine (its image could not be pulled, its node refused it): no record
    // is kept of a container that never ran; the service's state follows from the others.
    const never = new Set(
      live
        .map((c) => observed.get(c.uuid) ?? c)
        .filter((r) => r.state !== "Terminated" && !r.engine_id)
        .map((r) => r.uuid),
    );
    const now = this.d.clock.now();
    const ended = await this.store.services.patchContainers(
      [...new Set([...observed.keys(), ...never])],
      (r) => {
        if (r.destroyed_at !== null) return undefined;
        if (never.has(r.uuid) && !r.engine_id) {
          return { phase: null, desired: "terminated", destroyed_at: now };
        }
        return r.phase !== null ? { phase: null } : undefined;
      },
    );
    for (const uuid of never) {
      const r = ended.get(uuid);
      if (r?.state === "Terminated")
        await log?.(`Container ${r.name} never reached its engine; its record is removed`);
    }
    await this.settleService(serviceUuid);
  }
}
