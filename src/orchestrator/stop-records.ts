// Stopping and removing container records in batches (a service's stop, terminate, scale down):
// each record's routes drained first, its engine containers stopped or removed in parallel
// (per-node limit), what the engines report recorded through the group commit.
import { isEngineError } from "../drivers/engine.ts";
import type { NodeRow } from "../store/nodes.ts";
import type { ContainerRow } from "../store/services.ts";
import { BatchListings } from "./batch-listings.ts";
import { removedPatch, stepDonePatch } from "./container-patches.ts";
import { byGeneration, removeAll, stopGracefully, stopListed } from "./engine-containers.ts";
import type { Log } from "./log.ts";
import type { Limits } from "./per-node.ts";
import { eachWithCommit } from "./record-batches.ts";
import type { RuntimeParts } from "./runtime-deps.ts";

/**
 * `ensureStopped` over many records (a service's stop): engines stopped in parallel (per-node
 * limit), what they report then recorded in group-committed batches (see ensureRunningMany).
 */
export async function ensureStoppedMany(
  rt: RuntimeParts,
  rows: ContainerRow[],
  opts: { limits: Limits; log: Log },
): Promise<Error[]> {
  await rt.d.drain?.(rows);
  const listings = new BatchListings(rows);
  return eachWithCommit(rt.d.store, rt.commit, rows, opts.limits, async (c, node, commit, engineDone) => {
    if (!node) throw new Error("the node of the container no longer exists");
    const engine = rt.d.engines.forNode(node);
    const { current, stale, staleRunning } = byGeneration(c, await listings.of(c, engine));
    const view = current
      ? await stopListed(c, engine, current, { log: opts.log, defaultTimeoutS: rt.stopTimeoutS })
      : undefined;
    // An older engine container still running (the old one a paused start-first rollout held,
    // drained above) stops with its record.
    for (const id of stale.filter((x) => staleRunning.has(x)))
      await stopGracefully(c, engine, id, { log: opts.log, defaultTimeoutS: rt.stopTimeoutS }).catch(
        () => {},
      );
    const now = rt.d.clock.now();
    const recorded = commit.record(c.uuid, (r) => stepDonePatch(c, r, view, now), c);
    engineDone();
    await recorded;
  });
}

/**
 * `ensureRemoved` over many records (a service's terminate, a scale down): engine containers
 * removed in parallel (per-node limit), the records marked Terminated in group-committed batches.
 */
export async function ensureRemovedMany(
  rt: RuntimeParts,
  rows: ContainerRow[],
  opts: { limits: Limits; log: Log; removeVolumes: boolean },
): Promise<Error[]> {
  await rt.d.drain?.(rows);
  const listings = new BatchListings(rows);
  return eachWithCommit(rt.d.store, rt.commit, rows, opts.limits, async (c, node, commit, engineDone) => {
    if (node && node.state !== "Terminated") await removeFromEngine(rt, c, node, opts, listings);
    const now = rt.d.clock.now();
    const recorded = commit.record(c.uuid, (r) => removedPatch(r, now), c);
    engineDone();
    await recorded;
  });
}

/**
 * The engine's half of ensureRemoved: every engine container of the record goes. `listings`: the
 * batch's (see BatchListings). An engine container of the record made after that listing (by an
 * actor that still held an older view of it) is not removed here, but it does not outlive the
 * record: once the record is Terminated the reconciler's orphan sweep removes every engine
 * container carrying its label (Reconciler.sweepOrphans).
 */
async function removeFromEngine(
  rt: RuntimeParts,
  c: ContainerRow,
  node: NodeRow,
  opts: { log: Log; removeVolumes: boolean },
  listings: BatchListings,
): Promise<void> {
  const engine = rt.d.engines.forNode(node);
  try {
    const { current, stale } = byGeneration(c, await listings.of(c, engine));
    await removeAll(engine, [...(current ? [current.id] : []), ...stale], opts);
    if (current) await opts.log(`Removed ${c.name}`);
  } catch (err) {
    // An engine that cannot be reached cannot be cleaned now; the orphan sweep removes leftovers
    // when the node answers again, since nothing on it carries a live record any more.
    if (!isEngineError(err, "unreachable")) throw err;
    await opts.log(
      `Node of ${c.name} is unreachable; its engine container will be removed when it answers again`,
    );
  }
}
