// The action kinds of one container: start, stop, redeploy, terminate. Each marks the container
// with its phase when recorded, does its engine work as one step, and settles the service after.
import type { ActionEngine } from "../../actions/engine.ts";
import type { ActionKind, StepContext } from "../../actions/types.ts";
import { ContainerActionParams } from "../../contract/action-params.ts";
import { conflict, notFound } from "../../domain/errors.ts";
import {
  assertAllowed,
  CONTAINER_OPERATIONS,
  type ContainerPhase,
  type ContainerState,
} from "../../domain/states.ts";
import type { ContainerRow } from "../../store/services.ts";
import type { Store } from "../../store/store.ts";
import type { ContainerRuntime } from "../runtime.ts";
import type { Settler } from "../settle.ts";

/** One container: one engine call at a time. */
const ONE = { perNode: 1, total: 1 };

export class ContainerKinds {
  constructor(private readonly d: { store: Store; runtime: ContainerRuntime; settler: Settler }) {}

  private get store() {
    return this.d.store;
  }

  /** A container's operation is the runtime's batched operation over a batch of one. */
  private static one(row: ContainerRow | undefined): ContainerRow[] {
    if (!row) throw new Error("the container no longer exists");
    return [row];
  }

  /** The step fails with the engine's error of the one container. */
  private static failed(errors: Error[]): void {
    if (errors.length) throw new Error(errors.map((e) => e.message).join("; "));
  }

  register(actions: ActionEngine): void {
    const kinds: ActionKind<never>[] = [
      this.kind("container.start", "Container Start", "start", "starting", async (c, ctx) => {
        const row = await this.store.mutate("container", c.uuid, () => ({ desired: "running" }));
        ContainerKinds.failed(
          await this.d.runtime.ensureRunningMany(ContainerKinds.one(row), { limits: ONE, log: ctx.log }),
        );
      }),
      this.kind("container.stop", "Container Stop", "stop", "stopping", async (c, ctx) => {
        const row = await this.store.mutate("container", c.uuid, () => ({ desired: "stopped" }));
        ContainerKinds.failed(
          await this.d.runtime.ensureStoppedMany(ContainerKinds.one(row), { limits: ONE, log: ctx.log }),
        );
      }),
      this.kind("container.redeploy", "Container Redeploy", "redeploy", "redeploying", async (c, ctx) => {
        const s = (await this.store.services.findService(c.service_uuid))!;
        const row = await this.store.mutate("container", c.uuid, () => ({ desired: "running" }));
        ContainerKinds.failed(
          await this.d.runtime.redeployMany(ContainerKinds.one(row), {
            limits: ONE,
            log: ctx.log,
            reuseVolumes: ctx.params.reuse_volumes !== false,
            specJson: s.spec,
            specVersion: s.spec_version,
          }),
        );
      }),
      this.kind("container.terminate", "Container Terminate", "terminate", "terminating", async (c, ctx) => {
        const row = await this.store.mutate("container", c.uuid, () => ({ desired: "terminated" }));
        ContainerKinds.failed(
          await this.d.runtime.ensureRemovedMany(ContainerKinds.one(row), {
            limits: ONE,
            log: ctx.log,
            removeVolumes: true,
          }),
        );
        // The service now wants one container fewer, so it does not put it back.
        await this.store.mutate("service", c.service_uuid, (s) => ({
          target_num_containers: Math.max(0, s.target_num_containers - 1),
        }));
      }),
    ];
    for (const k of kinds) actions.register(k);
  }

  private kind(
    kind: string,
    name: string,
    operation: string,
    phase: ContainerPhase,
    work: (c: ContainerRow, ctx: StepContext<ContainerActionParams>) => Promise<void>,
  ): ActionKind<never> {
    const k: ActionKind<ContainerActionParams> = {
      kind,
      name,
      params: ContainerActionParams,
      prepare: async (tx, { container }) => {
        const c = await tx.services.findContainer(container);
        if (!c) throw notFound("container");
        assertAllowed(CONTAINER_OPERATIONS, `container ${c.name}`, c.state as ContainerState, operation);
        const s = await tx.services.findService(c.service_uuid);
        if (s && ["Starting", "Stopping", "Scaling", "Redeploying", "Terminating"].includes(s.state)) {
          throw conflict(
            `service ${s.name} is ${s.state}; wait until it settles to ${operation} one of its containers`,
            "invalid_state",
          );
        }
        await tx.services.updateContainer(c, { phase });
      },
      steps: [
        {
          name: operation,
          timeoutMs: 5 * 60_000,
          run: async (ctx) => {
            const c = await this.store.services.findContainer(ctx.params.container);
            if (!c) throw new Error("the container no longer exists");
            await work(c, ctx);
          },
        },
      ],
      finish: async (ctx) => {
        const c = await this.store.services.findContainer(ctx.params.container);
        if (!c) return;
        // A failed or canceled step may have left the phase: the engine is asked again, then the
        // action's phase ends (the API shows what the engine said).
        if (c.state !== "Terminated") await this.d.runtime.observe(c.uuid).catch(() => undefined);
        await this.store.mutate("container", c.uuid, (r) =>
          r.phase === phase ? { phase: null } : undefined,
        );
        await this.d.settler.settleService(c.service_uuid, { keepTransitional: true });
      },
    };
    return k as unknown as ActionKind<never>;
  }
}
