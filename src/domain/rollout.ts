// How a redeploy replaces a service's containers (issue 29): the service's `rollout` strategy.
// Containers are replaced in batches, each waited for (a start tells the truth) before the next:
// stop-first takes up to `max_unavailable` containers down at a time; start-first starts up to
// `max_surge` new ones beside the old, which go only once the new ones are ready, so as many
// containers serve as before at every moment. What a failed batch does: `rollback` (the previous
// definition comes back), `pause` (the rollout stops, the rest keep the old definition) or
// `continue`. A service without a strategy is redeployed as before: every container at once
// (per node in parallel), or one after the other with sequential_deployment.
import type { FieldProblem } from "./errors.ts";

export type RolloutOrder = "stop-first" | "start-first";
export type FailureAction = "rollback" | "pause" | "continue";

export interface RolloutStrategy {
  order: RolloutOrder;
  /** stop-first: containers replaced (so down) at once. */
  max_unavailable: number;
  /** start-first: new containers started beside the old at once. */
  max_surge: number;
  /** Seconds between two batches. */
  delay: number;
  failure_action: FailureAction;
}

export const ROLLOUT_DEFAULTS: RolloutStrategy = {
  order: "stop-first",
  max_unavailable: 1,
  max_surge: 1,
  delay: 0,
  failure_action: "rollback",
};

export interface RolloutInput {
  order?: string | null;
  max_unavailable?: number | null;
  max_surge?: number | null;
  delay?: number | null;
  failure_action?: string | null;
}

/** The stored strategy of a body's `rollout`; null: redeploys as before. */
export function normalizeRollout(
  input: RolloutInput | null | undefined,
  field: string,
  problems: FieldProblem[],
): RolloutStrategy | null {
  if (input === null || input === undefined) return null;
  const out: RolloutStrategy = {
    order: (input.order ?? ROLLOUT_DEFAULTS.order) as RolloutOrder,
    max_unavailable: input.max_unavailable ?? ROLLOUT_DEFAULTS.max_unavailable,
    max_surge: input.max_surge ?? ROLLOUT_DEFAULTS.max_surge,
    delay: input.delay ?? ROLLOUT_DEFAULTS.delay,
    failure_action: (input.failure_action ?? ROLLOUT_DEFAULTS.failure_action) as FailureAction,
  };
  if (out.order === "start-first" && out.max_surge < 1)
    problems.push({ field: `${field}.max_surge`, problem: "must be at least 1 for a start-first rollout" });
  if (out.order === "stop-first" && out.max_unavailable < 1)
    problems.push({
      field: `${field}.max_unavailable`,
      problem: "must be at least 1 for a stop-first rollout (0 would never replace anything)",
    });
  return out;
}

/** How many containers one batch replaces. */
export function batchSize(strategy: RolloutStrategy): number {
  return Math.max(1, strategy.order === "start-first" ? strategy.max_surge : strategy.max_unavailable);
}

/**
 * The strategy a redeploy follows: the service's own; sequential_deployment without one means one
 * container at a time, stop-first, going on past a failure as before; undefined: all at once.
 */
export function effectiveRollout(spec: {
  rollout?: RolloutStrategy | null;
  sequential_deployment: boolean;
}): RolloutStrategy | undefined {
  if (spec.rollout) return spec.rollout;
  if (spec.sequential_deployment)
    return { order: "stop-first", max_unavailable: 1, max_surge: 0, delay: 0, failure_action: "continue" };
  return undefined;
}
