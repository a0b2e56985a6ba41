// The action kinds of services: start, stop, scale, redeploy, terminate, each one step of
// idempotent work over the service's containers (placement through the plan applier, engine work
// through the runtime in batches), and the same work run inline by another action (stacks).
import type { ActionEngine } from "../../actions/engine.ts";
import type { ActionKind, Outcome, StepContext } from "../../actions/types.ts";
import { ServiceActionParams, ServiceTerminateParams } from "../../contract/action-params.ts";
import { conflict, notFound } from "../../domain/errors.ts";
import {
  assertAllowed,
  type ContainerPhase,
  SERVICE_OPERATIONS,
  type ServiceState,
} from "../../domain/states.ts";
import type { Clock } from "../../domain/time.ts";
import { planRemoval } from "../../scheduler/index.ts";
import { specOf, tagsOf } from "../../store/codec.ts";
import type { ContainerPatch, ContainerRow, ServiceRow } from "../../store/services.ts";
import type { Store } from "../../store/store.ts";
import { waitForLinkTargets } from "../link-wait.ts";
import type { PlanApplier } from "../plan-applier.ts";
import { rollingRedeploy } from "../rollout.ts";
import type { ContainerRuntime, Log } from "../runtime.ts";
import { beginOperation, type ContainerHead, liveContainers, type Settler } from "../settle.ts";

type Ctx<P> = StepContext<P>;

/** Service operations another action may run inline (see `ServiceKinds.runOperation`). */
export type InlineOperation = "start" | "stop" | "redeploy" | "terminate";

/** Container operations in flight per action, over all of its nodes. */
export const ACTION_PARALLELISM = 32;

export interface ServiceKindsDeps {
  store: Store;
  clock: Clock;
  runtime: ContainerRuntime;
  placer: PlanApplier;
  settler: Settler;
  /** Revokes the PLATFORM_AUTH key of a terminated service. */
  revokeServiceKey(serviceUuid: string): Promise<void>;
  /** Parallel container operations per node and action (sequential_deployment forces 1). */
  parallelism?: number;
  /** How long a start waits for the services it links to to have a running container. */
  linkWaitMs?: number;
}

export class ServiceKinds {
  constructor(private readonly d: ServiceKindsDeps) {}

  private get store() {
    return this.d.store;
  }

  /** Fails the step (after what fits has started) when placement fell short. */
  private static failShort(shortfall: string[] | undefined): void {
    if (shortfall?.length) throw new Error(shortfall.join("; "));
  }

  /** One at a time for sequential_deployment; otherwise `parallelism` per node. */
  private limit(s: ServiceRow): { perNode: number; total: number } {
    return specOf(s).sequential_deployment ? { perNode: 1, total: 1 } : this.parallel();
  }

  private parallel(): { perNode: number; total: number } {
    return { perNode: this.d.parallelism ?? 4, total: ACTION_PARALLELISM };
  }

  /** Starts every live container of the service (engine work in parallel, records written in batches). */
  private async startAll(s: ServiceRow, log: Log, placed: ContainerRow[] = []): Promise<void> {
    const containers = (await liveContainers(this.store, s.uuid)).filter((c) => c.desired !== "terminated");
    const marked = await this.markDesired(containers, "running", "starting", placed);
    const errors = await this.d.runtime.ensureRunningMany(ServiceKinds.liveOf(containers, marked), {
      limits: this.limit(s),
      log,
    });
    if (errors.length) throw new Error(errors.map((e) => e.message).join("; "));
  }

  /** The records as marked, in the order listed, without those that ended meanwhile. */
  private static liveOf(listed: ContainerHead[], marked: Map<string, ContainerRow>): ContainerRow[] {
    return listed.flatMap((c) => {
      const r = marked.get(c.uuid);
      return r && r.state !== "Terminated" ? [r] : [];
    });
  }

  /**
   * Records what the user wants of the containers and, for those not already there, the phase the
   * operation puts them in (the API shows it until their engine step ends it). `known`: records
   * the operation has just written (its placements), read again only if they moved since.
   */
  private async markDesired(
    containers: ContainerHead[],
    desired: string,
    phase?: ContainerPhase,
    known: ContainerRow[] = [],
  ): Promise<Map<string, ContainerRow>> {
    return this.store.services.patchContainers(
      containers.map((c) => c.uuid),
      (r) => {
        const p: ContainerPatch = {};
        if (r.desired !== desired) p.desired = desired;
        if (
          phase &&
          r.phase !== phase &&
          r.state !== "Terminated" &&
          r.state !== (desired === "running" ? "Running" : "Stopped")
        ) {
          p.phase = phase;
        }
        return p;
      },
      { known: new Map(known.map((r) => [r.uuid, r])) },
    );
  }

  register(actions: ActionEngine): void {
    const kinds: ActionKind<never>[] = [
      this.serviceKind("service.start", "Service Start", "start", "Starting", (s, ctx) =>
        this.startSteps(s, ctx),
      ),
      this.serviceKind("service.stop", "Service Stop", "stop", "Stopping", (s, ctx) =>
        this.stopSteps(s, ctx),
      ),
      this.serviceKind("service.scale", "Service Scale", "scale", "Scaling", (s, ctx) =>
        this.scaleSteps(s, ctx),
      ),
      this.serviceKind("service.redeploy", "Service Redeploy", "redeploy", "Redeploying", (s, ctx) =>
        this.redeploySteps(s, ctx),
      ),
      this.terminateServiceKind(),
    ];
    for (const k of kinds) actions.register(k);
  }

  private serviceKind(
    kind: string,
    name: string,
    operation: string,
    transitional: ServiceState,
    work: (s: ServiceRow, ctx: Ctx<{ service: string; reuse_volumes?: boolean }>) => Promise<void>,
  ): ActionKind<never> {
    // `new_nodes`: a scale the reconciler enqueues so an EVERY_NODE service reaches new nodes
    // (routes never set it, so a user's scale of such a service is still refused).
    const k: ActionKind<ServiceActionParams> = {
      kind,
      name,
      params: ServiceActionParams,
      prepare: async (tx, { service, new_nodes }, _object, read) => {
        const known = read as ServiceRow | undefined;
        const s = known?.uuid === service ? known : await tx.services.findService(service);
        if (!s) throw notFound("service");
        assertAllowed(SERVICE_OPERATIONS, `service ${s.name}`, s.state as ServiceState, operation);
        if (operation === "scale" && specOf(s).deployment_strategy === "EVERY_NODE" && !new_nodes) {
          throw conflict(
            `service ${s.name} is deployed on EVERY_NODE and cannot be scaled by hand`,
            "every_node",
          );
        }
        return beginOperation(tx, s, transitional);
      },
      steps: [
        {
          name: operation,
          timeoutMs: 10 * 60_000,
          run: async (ctx) => {
            const s = await this.store.services.findService(ctx.params.service);
            if (!s) throw new Error("the service no longer exists");
            await work(s, ctx);
          },
        },
      ],
      finish: async (ctx) => {
        await this.d.settler.settleAfter(ctx.params.service, ctx.log);
      },
    };
    return k as unknown as ActionKind<never>;
  }

  private async startSteps(s: ServiceRow, ctx: Ctx<{ service: string }>): Promise<void> {
    await waitForLinkTargets(this.store, s, ctx, { timeoutMs: this.d.linkWaitMs });
    const { shortfall, placed } = await this.d.placer.place(s, ctx.log);
    await this.startAll(s, ctx.log, placed);
    const now = this.d.clock.now();
    await this.store.mutate("service", s.uuid, (r) =>
      r.deployed_at === null ? { deployed_at: now } : undefined,
    );
    ServiceKinds.failShort(shortfall);
  }

  private async stopSteps(s: ServiceRow, ctx: Ctx<{ service: string }>): Promise<void> {
    const containers = await liveContainers(this.store, s.uuid);
    const marked = await this.markDesired(containers, "stopped", "stopping");
    const errors = await this.d.runtime.ensureStoppedMany(ServiceKinds.liveOf(containers, marked), {
      limits: this.parallel(),
      log: ctx.log,
    });
    if (errors.length) throw new Error(errors.map((e) => e.message).join("; "));
  }

  private async scaleSteps(s: ServiceRow, ctx: Ctx<{ service: string }>): Promise<void> {
    const live = await liveContainers(this.store, s.uuid);
    // EVERY_NODE services record a target of 0: they only ever grow onto new nodes here.
    const everyNode = specOf(s).deployment_strategy === "EVERY_NODE";
    if (!everyNode && live.length > s.target_num_containers) {
      const nodes = (await this.store.nodes.liveNodeSummaries(s.namespace)).map((n) => ({
        uuid: n.uuid,
        name: n.nickname,
        state: n.state,
        tags: tagsOf(n),
      }));
      const doomed = planRemoval({
        service: s.uuid,
        count: live.length - s.target_num_containers,
        nodes,
        containers: live.map((c) => ({
          uuid: c.uuid,
          node: c.node_uuid,
          service: s.uuid,
          state: c.state,
          number: c.number,
        })),
      });
      await ctx.log(`Removing ${doomed.length} container(s) of ${s.name}`);
      const marked = await this.store.services.patchContainers(doomed, () => ({
        desired: "terminated",
        phase: "terminating",
      }));
      const errors = await this.d.runtime.ensureRemovedMany([...marked.values()], {
        limits: this.parallel(),
        log: ctx.log,
        removeVolumes: true,
      });
      if (errors.length) throw new Error(errors.map((e) => e.message).join("; "));
      return;
    }
    // New containers run only if the service runs; a stopped service gets them at its next start.
    const wasRunning = live.some((c) => c.desired === "running");
    if (!wasRunning && live.length > 0) return;
    if (live.length === 0 && s.deployed_at === null) return;
    const { shortfall, placed } = await this.d.placer.place(s, ctx.log);
    await this.startAll(s, ctx.log, placed);
    ServiceKinds.failShort(shortfall);
  }

  private async redeploySteps(
    s: ServiceRow,
    ctx: Ctx<{ service: string; reuse_volumes?: boolean }>,
  ): Promise<void> {
    const { shortfall, placed } = await this.d.placer.place(s, ctx.log);
    const containers = await liveContainers(this.store, s.uuid);
    // Every container moves to the definition as it is when the redeploy begins.
    const fresh = (await this.store.services.findService(s.uuid)) ?? s;
    const strategy = specOf(fresh).rollout;
    if (strategy) {
      // A rolling redeploy: each batch is marked redeploying when its turn comes (rollout.ts).
      const marked = await this.markDesired(containers, "running", undefined, placed);
      await rollingRedeploy(this.d, {
        service: fresh,
        rows: ServiceKinds.liveOf(containers, marked),
        strategy,
        reuseVolumes: ctx.params.reuse_volumes !== false,
        ctx,
        mark: async (batch) =>
          ServiceKinds.liveOf(batch, await this.markDesired(batch, "running", "redeploying")),
      });
      await this.store.mutate("service", s.uuid, () => ({ deployed_at: this.d.clock.now() }));
      ServiceKinds.failShort(shortfall);
      return;
    }
    const marked = await this.markDesired(containers, "running", "redeploying", placed);
    const errors = await this.d.runtime.redeployMany(ServiceKinds.liveOf(containers, marked), {
      limits: this.limit(s),
      log: ctx.log,
      reuseVolumes: ctx.params.reuse_volumes !== false,
      specJson: fresh.spec,
      specVersion: fresh.spec_version,
    });
    if (errors.length) throw new Error(errors.map((e) => e.message).join("; "));
    const now = this.d.clock.now();
    await this.store.mutate("service", s.uuid, () => ({ deployed_at: now }));
    ServiceKinds.failShort(shortfall);
  }

  private terminateServiceKind(): ActionKind<never> {
    const k: ActionKind<ServiceTerminateParams> = {
      kind: "service.terminate",
      params: ServiceTerminateParams,
      name: "Service Terminate",
      prepare: async (tx, { service }) => {
        const s = await tx.services.findService(service);
        if (!s) throw notFound("service");
        assertAllowed(SERVICE_OPERATIONS, `service ${s.name}`, s.state as ServiceState, "terminate");
        await beginOperation(tx, s, "Terminating");
      },
      steps: [
        {
          name: "remove containers",
          timeoutMs: 10 * 60_000,
          run: (ctx) => this.removeAll(ctx.params.service, ctx.log),
        },
        {
          name: "revoke the service's key",
          run: async (ctx) => {
            await this.d.revokeServiceKey(ctx.params.service);
          },
        },
      ],
      finish: (ctx, outcome) => this.finishTerminate(ctx.params.service, outcome),
    };
    return k as unknown as ActionKind<never>;
  }

  private async removeAll(serviceUuid: string, log: Log): Promise<void> {
    const containers = await liveContainers(this.store, serviceUuid);
    const marked = await this.markDesired(containers, "terminated", "terminating");
    const errors = await this.d.runtime.ensureRemovedMany(ServiceKinds.liveOf(containers, marked), {
      limits: this.parallel(),
      log,
      removeVolumes: true,
    });
    if (errors.length) throw new Error(errors.map((e) => e.message).join("; "));
  }

  private async finishTerminate(serviceUuid: string, outcome: Outcome): Promise<void> {
    const live = await liveContainers(this.store, serviceUuid);
    if (outcome === "Success" && live.length === 0) {
      await this.d.settler.terminated(serviceUuid);
    } else {
      await this.d.settler.settleAfter(serviceUuid);
    }
  }

  // ---- service operations inside another action (stacks) ------------------------------------------

  /**
   * Does the work of a service operation inside another action's step: a stack runs its services'
   * work in its own action, whose log then shows it. The caller has already moved the service to
   * the operation's transitional state (as the kind's `prepare` does) and calls `finishOperation`
   * afterwards, whatever happened. Idempotent, like the kinds' steps.
   */
  async runOperation(
    operation: InlineOperation,
    serviceUuid: string,
    ctx: StepContext<unknown>,
    opts: { reuseVolumes?: boolean } = {},
  ): Promise<void> {
    const s = await this.store.services.findService(serviceUuid);
    if (!s) throw new Error("the service no longer exists");
    const sctx = { ...ctx, params: { service: s.uuid, reuse_volumes: opts.reuseVolumes } };
    if (operation === "start") await this.startSteps(s, sctx);
    else if (operation === "stop") await this.stopSteps(s, sctx);
    else if (operation === "redeploy") await this.redeploySteps(s, sctx);
    else {
      await this.removeAll(s.uuid, ctx.log);
      await this.d.revokeServiceKey(s.uuid);
    }
  }

  /** Leaves the service in a truthful state after `runOperation`, as the operation's kind does when it ends. */
  async finishOperation(operation: InlineOperation, serviceUuid: string, outcome: Outcome): Promise<void> {
    if (operation === "terminate") await this.finishTerminate(serviceUuid, outcome);
    else await this.d.settler.settleAfter(serviceUuid);
  }
}
