// A rolling redeploy (issue 29): a service with a `rollout` strategy (domain/rollout.ts) has its
// containers replaced in batches, each batch waited for (runtime + readiness.ts) before the next.
// Start-first keeps the old container of each record serving until its replacement is ready;
// stop-first replaces up to max_unavailable at once. A failed batch rolls the replaced containers
// back to the definition they ran (its revision: the spec_version they were deployed with) and
// restores it as the service's, pauses, or goes on, as the strategy says. A rollout canceled
// between two batches is rolled back the same way, so every container ends on one definition.
import { StepCanceled, type StepContext } from "../actions/types.ts";
import { batchSize, type RolloutStrategy } from "../domain/rollout.ts";
import type { Clock } from "../domain/time.ts";
import { decodeSpec } from "../store/codec.ts";
import type { ContainerRow, ServiceRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import type { ContainerRuntime } from "./runtime.ts";

export interface RolloutDeps {
  store: Store;
  clock: Clock;
  runtime: ContainerRuntime;
  sleep?: (ms: number) => Promise<void>;
}

export interface RolloutRun {
  service: ServiceRow;
  /** The records to replace, as marked for the redeploy. */
  rows: ContainerRow[];
  strategy: RolloutStrategy;
  reuseVolumes: boolean;
  ctx: StepContext<unknown>;
  /** Marks a batch's records redeploying when its turn comes; answers them as marked. */
  mark(batch: ContainerRow[]): Promise<ContainerRow[]>;
}

/** Why a rollout ended early; its message is the action's failure. */
export class RolloutStopped extends Error {
  override readonly name = "RolloutStopped";
}

/** Whether every published port of the definition lets the engine pick the host port. */
function startFirstPossible(specJson: string): boolean {
  return !decodeSpec(specJson).container_ports.some((p) => p.published && p.outer_port !== null);
}

export async function rollingRedeploy(d: RolloutDeps, run: RolloutRun): Promise<void> {
  const { service: s, strategy, ctx } = run;
  const log = ctx.log;
  const sleep = d.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const rows = [...run.rows].sort((a, b) => a.number - b.number);
  let startFirst = strategy.order === "start-first";
  if (startFirst && !startFirstPossible(s.spec)) {
    startFirst = false;
    await log(
      `${s.name} publishes a fixed host port, which an old and a new container cannot hold at once: replacing stop-first`,
    );
  }
  const size = batchSize(strategy);
  const order = startFirst ? "start-first" : "stop-first";
  const batches = Math.ceil(rows.length / size);
  await log(
    `Rolling out revision ${s.spec_version} of ${s.name}: ${rows.length} container(s), ${order}, ${size} at a time`,
  );
  const moved: ContainerRow[] = [];
  const failures: string[] = [];
  for (let i = 0; i < rows.length; i += size) {
    const batch = rows.slice(i, i + size);
    const n = i / size + 1;
    if (i > 0 && (await canceling(ctx))) {
      await rollBack(d, run, moved, startFirst, "the rollout was canceled");
      throw new StepCanceled(
        `canceled after ${moved.length} of ${rows.length} container(s); ${rolledBackTo(moved)}`,
      );
    }
    await log(`Batch ${n} of ${batches}: ${batch.map((c) => c.name).join(", ")}`);
    moved.push(...batch);
    const errors = await d.runtime.redeployMany(await run.mark(batch), {
      limits: { perNode: size, total: size },
      log,
      reuseVolumes: run.reuseVolumes,
      specJson: s.spec,
      specVersion: s.spec_version,
      startFirst,
    });
    if (errors.length) {
      const reason = errors.map((e) => e.message).join("; ");
      if (strategy.failure_action === "continue") {
        failures.push(reason);
      } else if (strategy.failure_action === "pause") {
        // The old containers still held keep serving while the rollout is paused; a redeploy,
        // a rollback, a stop or a terminate of the service releases them (router/drains.ts).
        await d.runtime.pauseHolds(moved.map((c) => c.uuid));
        throw new RolloutStopped(
          `${reason}; the rollout is paused after ${moved.length} of ${rows.length} container(s): the others keep their definition`,
        );
      } else {
        await rollBack(d, run, moved, startFirst, reason);
        throw new RolloutStopped(`${reason}; ${rolledBackTo(moved)}`);
      }
    }
    if (strategy.delay > 0 && i + size < rows.length) {
      await log(`Waiting ${strategy.delay} s before the next batch`);
      await sleep(strategy.delay * 1000);
    }
  }
  if (failures.length) throw new Error(failures.join("; "));
}

function rolledBackTo(moved: ContainerRow[]): string {
  const versions = [...new Set(moved.map((c) => c.spec_version))].sort((a, b) => a - b);
  return `rolled back to revision ${versions.join(", ")}`;
}

async function canceling(ctx: StepContext<unknown>): Promise<boolean> {
  const a = await ctx.store.actions.findAction(ctx.action.uuid);
  return a?.state === "Canceling";
}

/**
 * The replaced records go back to the definition each ran before (`moved` as read before the
 * rollout), and the service's definition back to theirs when nobody changed it meanwhile.
 */
async function rollBack(
  d: RolloutDeps,
  run: RolloutRun,
  moved: ContainerRow[],
  startFirst: boolean,
  reason: string,
): Promise<void> {
  const { service: s, ctx } = run;
  const previous = moved[0];
  if (!previous) return;
  await ctx.log(`${reason}: rolling ${moved.length} container(s) back to revision ${previous.spec_version}`);
  await d.store.mutate("service", s.uuid, (cur) =>
    cur.spec_version === s.spec_version
      ? { spec: previous.spec, spec_version: previous.spec_version }
      : undefined,
  );
  const byVersion = new Map<number, ContainerRow[]>();
  for (const c of moved) byVersion.set(c.spec_version, [...(byVersion.get(c.spec_version) ?? []), c]);
  for (const [version, group] of byVersion) {
    const now = await d.store.services.containersByUuid(group.map((c) => c.uuid));
    const errors = await d.runtime.redeployMany(await run.mark(now.filter((c) => c.destroyed_at === null)), {
      limits: { perNode: group.length, total: group.length },
      log: ctx.log,
      reuseVolumes: run.reuseVolumes,
      specJson: group[0]!.spec,
      specVersion: version,
      startFirst,
    });
    if (errors.length)
      await ctx.log(
        `The rollback to revision ${version} failed too: ${errors.map((e) => e.message).join("; ")}`,
      );
  }
}
