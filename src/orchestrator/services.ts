// Services and containers, assembled by role: placement by the plan applier (plan-applier.ts), the
// action kinds of services and containers (kinds/), waiting for linked services (link-wait.ts), and
// a service's state settled from its containers (settle.ts). What the rest of Berth calls is here.
import type { ActionEngine } from "../actions/engine.ts";
import type { Outcome, StepContext } from "../actions/types.ts";
import type { Duties } from "../domain/duties.ts";
import type { ServiceState } from "../domain/states.ts";
import type { Clock } from "../domain/time.ts";
import type { PlacementPlan } from "../scheduler/index.ts";
import type { ServiceRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import { ContainerKinds } from "./kinds/container.ts";
import { type InlineOperation, ServiceKinds } from "./kinds/service.ts";
import { PlanApplier } from "./plan-applier.ts";
import type { ContainerRuntime } from "./runtime.ts";
import { beginOperation, Settler } from "./settle.ts";

export type { InlineOperation };

export interface OrchestratorDeps {
  store: Store;
  clock: Clock;
  runtime: ContainerRuntime;
  /** Revokes the PLATFORM_AUTH key of a terminated service. */
  revokeServiceKey(serviceUuid: string): Promise<void>;
  /** Parallel container operations per node and action (sequential_deployment forces 1). */
  parallelism?: number;
  /** How long a start waits for the services it links to to have a running container. */
  linkWaitMs?: number;
  /** This replica's share of the nodes (placement prefers them among equally empty ones). */
  duties?: Duties;
}

export class Orchestrator {
  /** The one writer of placements. */
  private readonly placer: PlanApplier;
  private readonly settler: Settler;
  private readonly services: ServiceKinds;
  private readonly containers: ContainerKinds;

  constructor(d: OrchestratorDeps) {
    this.placer = new PlanApplier(d);
    this.settler = new Settler({ ...d, perNode: d.parallelism ?? 4 });
    this.services = new ServiceKinds({ ...d, placer: this.placer, settler: this.settler });
    this.containers = new ContainerKinds({ ...d, settler: this.settler });
  }

  register(actions: ActionEngine): void {
    this.services.register(actions);
    this.containers.register(actions);
  }

  /**
   * The service's state from its containers, with the timestamps that go with reaching it.
   * `keepTransitional`: leave a service an operation is working on alone (observers such as the
   * reconciler, which may have read the service before the operation began).
   */
  settleService(uuid: string, opts: { keepTransitional?: boolean } = {}): Promise<ServiceRow | undefined> {
    return this.settler.settleService(uuid, opts);
  }

  /** An operation another action runs on the service begins: its transitional state (settle.ts). */
  beginOperation(tx: Store, s: ServiceRow, state: ServiceState): Promise<ServiceRow> {
    return beginOperation(tx, s, state);
  }

  /** Plans placements to reach the target (or every eligible node) without making them; the plan explains refusals. */
  planFor(s: ServiceRow, wanted: number): Promise<PlacementPlan> {
    return this.placer.planFor(s, wanted);
  }

  /**
   * Does the work of a service operation inside another action's step: a stack runs its services'
   * work in its own action, whose log then shows it. The caller has already moved the service to
   * the operation's transitional state (as the kind's `prepare` does) and calls `finishOperation`
   * afterwards, whatever happened. Idempotent, like the kinds' steps.
   */
  runOperation(
    operation: InlineOperation,
    serviceUuid: string,
    ctx: StepContext<unknown>,
    opts: { reuseVolumes?: boolean } = {},
  ): Promise<void> {
    return this.services.runOperation(operation, serviceUuid, ctx, opts);
  }

  /** Leaves the service in a truthful state after `runOperation`, as the operation's kind does when it ends. */
  finishOperation(operation: InlineOperation, serviceUuid: string, outcome: Outcome): Promise<void> {
    return this.services.finishOperation(operation, serviceUuid, outcome);
  }
}
