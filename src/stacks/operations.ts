// Stack operations (spec "Stack states"): each is one action on the stack. Its `prepare` moves
// the stack and each service it concerns to their transitional states; its one step runs every
// service's own work inline (Orchestrator.runOperation) in link order, so the stack's log shows the
// work on each service. A service whose turn has come and gone is no longer in its transitional
// state, which is how a resumed step knows where to go on. A follower of the change feed
// (follower.ts) records a stack's state, with a change-feed entry, when its services change
// outside a stack action.

import type { ActionEngine } from "../actions/engine.ts";
import type { ActionKind, Outcome, StepContext } from "../actions/types.ts";
import { StackActionParams } from "../contract/action-params.ts";
import { notFound } from "../domain/errors.ts";
import { settledStackState, startOrder } from "../domain/stack.ts";
import { SERVICE_OPERATIONS, type ServiceState, type StackState } from "../domain/states.ts";
import type { Clock } from "../domain/time.ts";
import { serviceUri, stackUri } from "../domain/uri.ts";
import type { InlineOperation, Orchestrator } from "../orchestrator/services.ts";
import type { ServiceRow } from "../store/services.ts";
import type { StackRow } from "../store/stacks.ts";
import type { Store } from "../store/store.ts";
import { StackFollower } from "./follower.ts";
import { assertStackAllowed, dependencies, live, servicesOf, specOf } from "./state.ts";

export interface StackOperationDeps {
  store: Store;
  clock: Clock;
  orchestrator: Orchestrator;
  /** How often the change feed is read besides the in-process wake-ups (other processes' changes). */
  pollMs?: number;
  onError?(err: unknown): void;
}

export type StackOperation = "start" | "stop" | "redeploy" | "terminate";
type OpParams = StackActionParams;

const OPERATIONS: Record<StackOperation, { kind: string; name: string; state: StackState }> = {
  start: { kind: "stack.start", name: "Stack Start", state: "Starting" },
  stop: { kind: "stack.stop", name: "Stack Stop", state: "Stopping" },
  redeploy: { kind: "stack.redeploy", name: "Stack Redeploy", state: "Redeploying" },
  terminate: { kind: "stack.terminate", name: "Stack Terminate", state: "Terminating" },
};

/** The service operation a service's transitional state stands for while a stack action runs. */
const OPERATION_OF: Partial<Record<string, InlineOperation>> = {
  Starting: "start",
  Stopping: "stop",
  Redeploying: "redeploy",
  Terminating: "terminate",
};
const VERB: Record<InlineOperation, string> = {
  start: "Starting",
  stop: "Stopping",
  redeploy: "Redeploying",
  terminate: "Terminating",
};

/**
 * The state a stack operation moves one of its services to, or undefined when the operation leaves
 * it alone (a running service on start). A stack redeploy starts the services never deployed yet.
 */
function serviceTransition(op: StackOperation, state: ServiceState): ServiceState | undefined {
  if (op === "redeploy" && state === "Not running") return "Starting";
  // The stack's transitional states are the services' own.
  return (SERVICE_OPERATIONS[op] ?? []).includes(state) ? (OPERATIONS[op].state as ServiceState) : undefined;
}

export class StackOperations {
  private readonly follower: StackFollower;

  constructor(private readonly d: StackOperationDeps) {
    this.follower = new StackFollower({
      store: d.store,
      pollMs: d.pollMs,
      onError: d.onError,
      settle: (uuid) => this.settle(uuid),
    });
  }

  private get store() {
    return this.d.store;
  }

  register(actions: ActionEngine): void {
    for (const op of Object.keys(OPERATIONS) as StackOperation[]) actions.register(this.kind(op));
  }

  private kind(op: StackOperation): ActionKind<OpParams> {
    const { kind, name, state } = OPERATIONS[op];
    return {
      kind,
      name,
      params: StackActionParams,
      prepare: async (tx, { stack }) => {
        const st = await tx.stacks.findStack(stack);
        if (!st) throw notFound("stack");
        const services = await servicesOf(tx, st.uuid);
        assertStackAllowed(st, services, op);
        for (const s of services) {
          const next = serviceTransition(op, s.state as ServiceState);
          if (!next) continue;
          await this.d.orchestrator.beginOperation(tx, s, next);
        }
        await tx.stacks.updateStack(st, { state });
      },
      steps: [
        {
          name: `${op} services`,
          // Every service's work in one step: as long as the services' own steps together.
          timeoutMs: 30 * 60_000,
          run: (ctx) => this.runOperation(op, ctx),
        },
      ],
      finish: (ctx, outcome) => this.finishOperation(op, ctx, outcome),
    };
  }

  /** The stack's services in link order: each after the services it links to (creation order on a cycle). */
  private ordered(services: ServiceRow[]): { services: ServiceRow[]; cycle: boolean } {
    const result = startOrder(services.map((s) => ({ id: s.uuid, after: dependencies(specOf(s)) })));
    if (!("order" in result)) return { services, cycle: true };
    return { services: result.order.map((id) => services.find((s) => s.uuid === id)!), cycle: false };
  }

  private async runOperation(op: StackOperation, ctx: StepContext<OpParams>): Promise<void> {
    const st = await this.store.stacks.findStack(ctx.params.stack);
    if (!st) throw new Error("the stack no longer exists");
    const { services, cycle } = this.ordered(await servicesOf(this.store, st.uuid));
    if (cycle) await ctx.log("The services' links form a cycle; they are worked on in creation order");
    // Stopping and terminating go the other way: clients before the services they link to.
    const sequence = op === "stop" || op === "terminate" ? [...services].reverse() : services;
    const failures: string[] = [];
    for (const [i, listed] of sequence.entries()) {
      if (ctx.signal.aborted) throw ctx.signal.reason ?? new Error("aborted");
      const action = await this.store.actions.findAction(ctx.action.uuid);
      if (action?.state === "Canceling") {
        await ctx.log(`Canceled before service ${listed.name}`);
        return;
      }
      const s = await this.store.services.findService(listed.uuid);
      // Not part of this operation, or done before the step was resumed.
      const serviceOp = s ? OPERATION_OF[s.state] : undefined;
      if (!s || !serviceOp) continue;
      if (serviceOp === "start" || serviceOp === "redeploy") {
        const waiting = cycle ? undefined : await this.unstartedDependency(s, services);
        if (waiting) {
          const line = `Service ${s.name} is not started: ${waiting}, which it links to, has no running container`;
          await ctx.log(line);
          failures.push(line);
          break;
        }
      }
      await ctx.log(`${VERB[serviceOp]} service ${s.name} (${i + 1} of ${sequence.length})`);
      let outcome: Outcome = "Success";
      try {
        await this.d.orchestrator.runOperation(serviceOp, s.uuid, ctx, {
          reuseVolumes: ctx.params.reuse_volumes !== false,
        });
      } catch (err) {
        if (ctx.signal.aborted) throw err;
        outcome = "Failed";
        const message = err instanceof Error ? err.message : String(err);
        await ctx.log(`Service ${s.name}: ${message}`);
        failures.push(`service ${s.name}: ${message}`);
      }
      await this.d.orchestrator.finishOperation(serviceOp, s.uuid, outcome);
      const after = await this.store.services.findService(s.uuid);
      await ctx.log(`Service ${s.name} is ${after?.state ?? "gone"}`);
      // Services that link to a failed one would start without it: stop here.
      if (outcome === "Failed" && (op === "start" || op === "redeploy")) break;
    }
    if (failures.length) throw new Error(failures.join("; "));
  }

  /** A service of the stack that `s` links to (or mounts the volumes of) and that has no running container. */
  private async unstartedDependency(s: ServiceRow, services: ServiceRow[]): Promise<string | undefined> {
    for (const uuid of dependencies(specOf(s))) {
      const target = services.find((x) => x.uuid === uuid);
      if (!target) continue; // outside the stack: not this operation's business
      const containers = await this.store.services.containersOfService(uuid);
      if (!containers.some((c) => c.state === "Running")) return target.name;
    }
    return undefined;
  }

  private async finishOperation(op: StackOperation, ctx: StepContext<OpParams>, outcome: Outcome) {
    const st = await this.store.stacks.findStack(ctx.params.stack);
    if (!st) return;
    // Services whose turn never came (a failure, a cancel) leave their transitional state.
    for (const s of await servicesOf(this.store, st.uuid)) {
      const serviceOp = OPERATION_OF[s.state];
      if (!serviceOp || (await this.store.actions.activeActionOn(serviceUri(s)))) continue;
      await this.d.orchestrator.finishOperation(
        serviceOp,
        s.uuid,
        outcome === "Success" ? "Failed" : outcome,
      );
    }
    const now = this.d.clock.now();
    await this.patchStack(st.uuid, async (row) => {
      const all = await this.store.services.servicesOfStack(row.uuid);
      if (op === "terminate" && outcome === "Success" && all.every((s) => !live(s))) {
        return { state: "Terminated", destroyed_at: now };
      }
      const patch: Partial<StackRow> = { state: settledStackState(all.map((s) => s.state)) };
      if ((op === "start" || op === "redeploy") && outcome === "Success") patch.deployed_at = now;
      return patch;
    });
  }

  private async patchStack(
    uuid: string,
    fn: (st: StackRow) => Promise<Partial<StackRow> | undefined>,
  ): Promise<StackRow | undefined> {
    return this.store.mutate("stack", uuid, async (st) => {
      const patch = await fn(st);
      const unchanged = !patch || Object.entries(patch).every(([k, v]) => st[k as keyof StackRow] === v);
      return unchanged ? undefined : patch;
    });
  }

  // ---- following the services ------------------------------------------------------------------------

  /** Records the state a stack has from its services, unless an operation of the stack is under way. */
  async settle(uuid: string): Promise<void> {
    await this.patchStack(uuid, async (st) => {
      if (st.state === "Terminated") return undefined;
      const { rows } = await this.store.actions.listActions({
        namespaces: [st.namespace],
        objects: [stackUri(st.namespace, st.uuid)],
        states: ["Pending", "In progress", "Canceling"],
        limit: 1,
        offset: 0,
      });
      if (rows.length) return undefined; // its finish settles the stack
      return { state: settledStackState((await servicesOf(this.store, st.uuid)).map((s) => s.state)) };
    });
  }

  /** Follows the change feed (stacks/follower.ts): service changes and ended actions settle their stack. */
  start(): void {
    this.follower.start();
  }

  stop(): void {
    this.follower.stop();
  }
}
