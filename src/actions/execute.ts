// One claimed action's run (CONTRACT §7): its steps from the one it is on, each with a timeout,
// stopping between steps at a cancel, a lost lease or a shutdown; the kind's `finish` then settles
// the object whatever the outcome, and the action ends.
import { actionEnded } from "../domain/states.ts";
import type { ActionRow } from "../store/store.ts";
import {
  type ActionEngineOptions,
  type ActionKind,
  type Outcome,
  StepCanceled,
  type StepContext,
} from "./types.ts";

/** What a run needs of the engine that claimed the action (actions/engine.ts). */
export interface Execution {
  opts: ActionEngineOptions;
  instanceId: string;
  kinds: ReadonlyMap<string, ActionKind<never>>;
  paramProblem(kind: string, params: unknown): string | undefined;
  context<P>(action: ActionRow, signal: AbortSignal): StepContext<P>;
}

export async function executeAction(x: Execution, claimed: ActionRow, signal: AbortSignal): Promise<void> {
  const kind = claimed.kind ? x.kinds.get(claimed.kind) : undefined;
  const ctx = x.context<never>(claimed, signal);
  if (!kind) {
    await ctx.log(`This server does not know action kind "${claimed.kind}"; failing it`);
    await end(x, claimed.uuid, "Failed");
    return;
  }
  // Stored by an older server, or written by hand: the steps would work on something else.
  const wrong = x.paramProblem(kind.kind, ctx.params);
  if (wrong) {
    await ctx.log(`This action cannot run: ${wrong}; failing it`);
    await end(x, claimed.uuid, "Failed");
    return;
  }
  if (claimed.attempts > x.opts.maxAttempts) {
    await ctx.log(`Interrupted ${claimed.attempts - 1} times; giving up`);
    await settle(x, kind, ctx, "Failed");
    return;
  }
  for (let i = claimed.step; i < kind.steps.length; i++) {
    if (signal.aborted) return; // shutting down: the lease lapses and the action resumes elsewhere
    const current = await x.opts.store.actions.findAction(claimed.uuid);
    if (!current || current.lease_owner !== x.instanceId) return; // lost the lease
    if (current.state === "Canceling") {
      await ctx.log(`Canceled before step ${i + 1} of ${kind.steps.length}`);
      await settle(x, kind, ctx, "Canceled");
      return;
    }
    const step = kind.steps[i]!;
    const timeoutMs = step.timeoutMs ?? x.opts.stepTimeoutMs;
    const stepAbort = new AbortController();
    const onAbort = () => stepAbort.abort(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    let timer: NodeJS.Timeout | undefined;
    let finished = false;
    try {
      await Promise.race([
        step.run({ ...ctx, signal: stepAbort.signal }).finally(() => {
          finished = true;
        }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            // On a loaded machine this timer can come due together with the step's own last
            // timer: the work the step queued in that turn (its log, batched per turn) runs
            // first, and a step that ends there has not timed out.
            setImmediate(() => {
              if (finished) return;
              const err = new StepTimeout(`Step "${step.name}" timed out after ${formatMs(timeoutMs)}`);
              stepAbort.abort(err);
              reject(err);
            });
          }, timeoutMs);
        }),
      ]);
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof StepCanceled) {
        await ctx.log(`Canceled during step ${i + 1} of ${kind.steps.length}: ${err.message}`);
        await settle(x, kind, ctx, "Canceled");
        return;
      }
      await ctx.log(
        err instanceof StepTimeout ? err.message : `Step "${step.name}" failed: ${errorText(err)}`,
      );
      await settle(x, kind, ctx, "Failed");
      return;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
    }
    const after = await x.opts.store.actions.findAction(claimed.uuid);
    if (!after || after.lease_owner !== x.instanceId) return;
    await updateRetrying(x, claimed.uuid, { step: i + 1 });
  }
  const last = await x.opts.store.actions.findAction(claimed.uuid);
  // Every step ran: the work was done, even when a cancel came during the last one.
  if (last?.state === "Canceling")
    await ctx.log("The cancel came after the last step began; the work was done");
  await settle(x, kind, ctx, "Success");
}

async function settle(
  x: Execution,
  kind: ActionKind<never>,
  ctx: StepContext<never>,
  outcome: Outcome,
): Promise<void> {
  try {
    await kind.finish?.(ctx, outcome);
  } catch (err) {
    await ctx.log(`Could not settle the object's state: ${errorText(err)}`);
  }
  await end(x, ctx.action.uuid, outcome);
}

async function end(x: Execution, uuid: string, state: Outcome): Promise<void> {
  let ends = false;
  const ended = await x.opts.store.mutate("action", uuid, (a): Partial<ActionRow> | undefined => {
    ends = !actionEnded(a.state);
    return ends ? { state, end_date: x.opts.clock.now(), lease_owner: null, lease_until: null } : undefined;
  });
  if (ended && ends) {
    x.opts.onEnded?.(ended.kind ?? "call", state, x.opts.clock.now() - ended.start_date);
  }
}

async function updateRetrying(x: Execution, uuid: string, patch: Partial<ActionRow>): Promise<void> {
  await x.opts.store.mutate("action", uuid, () => patch);
}

class StepTimeout extends Error {}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}
