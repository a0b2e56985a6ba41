// Starting and redeploying container records in batches (a service's start, scale, redeploy; a
// single record is a batch of one): the engine work in parallel (per-node limit), what the engines
// report recorded through the group commit, each new container waited for until it counts as
// started (readiness.ts), and a redeploy's older engine containers removed after that. A node's
// slot is its engine's work on a record: it goes to the node's next record once the new container
// has started, not after the wait that follows.
import type { NodeRow } from "../store/nodes.ts";
import type { ContainerRow, ServiceRow } from "../store/services.ts";
import { BatchListings } from "./batch-listings.ts";
import { exitCodeMessage, observedPatch, redeployPatch, stepDonePatch } from "./container-patches.ts";
import { removeAll, stopGracefully } from "./engine-containers.ts";
import { startOnEngine } from "./generation-start.ts";
import type { Log } from "./log.ts";
import type { Limits } from "./per-node.ts";
import { awaitStarted } from "./readiness.ts";
import { eachWithCommit, type RecordBatches } from "./record-batches.ts";
import type { RuntimeParts } from "./runtime-deps.ts";

/** What the records of one batch share (eachRecord). */
interface BatchShared {
  service: ServiceRow | undefined;
  images: Map<string, Promise<void>>;
  listings: BatchListings;
  engineDone: () => void;
}

/**
 * `ensureRunning` over many records (a service's start or scale): the engine work runs in
 * parallel, at most `limits.perNode` at a time on one node and `limits.total` in all, without a
 * statement per container; what the engines report is recorded in batches (group commit), each
 * batch one transaction with its change-feed entries. A batch is written as soon as every
 * container in flight waits for it, when it holds RECORD_BATCH_MAX, or RECORD_DELAY_MS after its
 * first entry. A record says Running only once its engine said so. Safe to repeat after a crash:
 * an engine container made but not yet recorded is found again by its labels (one listing per
 * node for the whole batch, see BatchListings) or, made after that listing, by its name.
 * Answers the errors of the containers that failed; the others run.
 */
export function ensureRunningMany(
  rt: RuntimeParts,
  rows: ContainerRow[],
  opts: { limits: Limits; log: Log },
): Promise<Error[]> {
  return eachRecord(rt, rows, opts.limits, (c, node, commit, shared) =>
    runAndRecord(rt, c, node, commit, { ...shared, log: opts.log }),
  );
}

export interface RedeployOptions {
  limits: Limits;
  log: Log;
  reuseVolumes: boolean;
  specJson: string;
  specVersion: number;
  /** The old container keeps running until the new one is ready (a start-first rollout). */
  startFirst?: boolean;
}

/**
 * `redeploy` over many records (a service's redeploy), batched as ensureRunningMany: each record
 * moves to the definition `specJson` with a new generation (in group-committed batches, just
 * before its engine work, so a record says it is redeployed only once its turn came), then its
 * new engine container is made and started (volumes of the old one reused or dropped), what the
 * engine reports recorded in batches, and the old engine container removed once the new one
 * counts as started. Engines work in parallel, `limits.perNode` at a time on one node (1 in all:
 * one container after the other). Answers the errors of the containers that failed; the others
 * are redeployed.
 */
export function redeployMany(
  rt: RuntimeParts,
  rows: ContainerRow[],
  opts: RedeployOptions,
): Promise<Error[]> {
  // Listed (eachRecord) before some records move to their new generation: what each record's
  // listing shows of the old one is stale to it then, as it should be.
  return eachRecord(rt, rows, opts.limits, async (c, node, commit, shared) => {
    // Start-first: the old engine container keeps serving until the new one is ready.
    if (opts.startFirst && rt.d.hold) await rt.d.hold([c]);
    else await rt.d.drain?.([c]);
    const now = rt.d.clock.now();
    const moved = await commit.record(
      c.uuid,
      (r) => (r.state === "Terminated" ? undefined : redeployPatch(opts, now)),
      c,
      // The node's slot is taken: its engine work waits for this write, not for a batch to fill.
      { urgent: true },
    );
    if (!moved || moved.state === "Terminated") return;
    await runAndRecord(rt, moved, node, commit, {
      ...shared,
      log: opts.log,
      reuseVolumes: opts.reuseVolumes,
      startFirst: opts.startFirst,
      refreshImage: true,
    });
  });
}

/**
 * Runs `work` over the records (ensureRunningMany, redeployMany) with what their batch shares:
 * their services read once, each image pulled once, one listing of engine containers per node.
 */
async function eachRecord(
  rt: RuntimeParts,
  rows: ContainerRow[],
  limits: Limits,
  work: (c: ContainerRow, node: NodeRow, commit: RecordBatches, shared: BatchShared) => Promise<void>,
): Promise<Error[]> {
  if (rows.length === 0) return [];
  const services = new Map(
    (await rt.d.store.services.servicesByUuid(rows.map((c) => c.service_uuid))).map((x) => [x.uuid, x]),
  );
  const images = new Map<string, Promise<void>>();
  const listings = new BatchListings(rows);
  return eachWithCommit(rt.d.store, rt.commit, rows, limits, async (c, node, commit, engineDone) => {
    if (!node) throw new Error("the node of the container no longer exists");
    await work(c, node, commit, { service: services.get(c.service_uuid), images, listings, engineDone });
  });
}

/**
 * The work of one record of ensureRunningMany or redeployMany: its engine container made (if
 * need be) and started, what the engine reports parked in the group commit, then the engine
 * containers of older generations removed.
 */
async function runAndRecord(
  rt: RuntimeParts,
  c: ContainerRow,
  node: NodeRow,
  commit: RecordBatches,
  opts: BatchShared & { log: Log; reuseVolumes?: boolean; startFirst?: boolean; refreshImage?: boolean },
): Promise<void> {
  const engine = rt.d.engines.forNode(node);
  const { view, staleLeft } = await startOnEngine(rt, c, engine, opts.log, {
    ...opts,
    node,
    started: opts.engineDone,
  });
  const now = rt.d.clock.now();
  const recorded = commit.record(c.uuid, (r) => stepDonePatch(c, r, view, now), c);
  // The node's next container starts while this record waits for its batch, its readiness and
  // (a redeploy's) the removal of its old container: the engine's work on it is done.
  opts.engineDone();
  const row = await recorded;
  if (view && row && rt.d.readiness) {
    const ready = { ...rt.d.readiness, clock: rt.d.clock, log: opts.log };
    await awaitStarted(engine, c, view, ready, (last, now) =>
      commit.record(
        c.uuid,
        (r) =>
          r.generation === c.generation && r.destroyed_at === null ? observedPatch(r, last, now) : undefined,
        c,
      ),
    );
  } else if (row && row.state !== "Running" && row.state !== "Starting") {
    const v = view ? await engine.inspectContainer(view.id) : undefined;
    throw new Error(
      `did not stay running: ${v?.error || exitCodeMessage(v?.exitCode ?? null) || "unknown reason"}`,
    );
  }
  // The previous containers' volumes are mounted by the new one now; the containers can go (the
  // ones the batch's listing showed: only this record's work makes containers of it).
  // Start-first: the old container served until now; it leaves its routers, then stops as its
  // definition says.
  if (opts.startFirst && staleLeft.length > 0) await rt.d.release?.([c]);
  for (const id of opts.startFirst ? staleLeft : [])
    await stopGracefully(c, engine, id, { log: opts.log, defaultTimeoutS: rt.stopTimeoutS }).catch(() => {});
  await removeAll(engine, staleLeft, { removeVolumes: opts.reuseVolumes === false });
}
