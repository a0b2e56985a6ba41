// Idempotent operations on container records against their nodes' engines, in batches (a single
// record is a batch of one: there is one path). Each `ensure*Many` may be repeated after a crash:
// it looks at what the engine has (by the Berth labels it put there) before acting, and records
// what it observed through the group commit every batch in flight shares (record-batches.ts).
// This class holds what the operations share and names them; each lives with its kind:
// start-records.ts (start, scale, redeploy; generation-start.ts is the engine's half),
// stop-records.ts (stop, removal), observe-records.ts, host-entries.ts (link host entries). What a
// start waits for before it counts (issue 29) lives in readiness.ts.
import type { ContainerRow } from "../store/services.ts";
import { GENERATION_LABEL } from "./engine-containers.ts";
import { HostEntries } from "./host-entries.ts";
import type { Log } from "./log.ts";
import { observeMany } from "./observe-records.ts";
import type { Limits } from "./per-node.ts";
import { RecordBatches } from "./record-batches.ts";
import type { RuntimeDeps, RuntimeParts } from "./runtime-deps.ts";
import { ensureRunningMany, type RedeployOptions, redeployMany } from "./start-records.ts";
import { ensureRemovedMany, ensureStoppedMany } from "./stop-records.ts";

export { GENERATION_LABEL, type Log, type RuntimeDeps };

export class ContainerRuntime {
  private readonly hostEntries: HostEntries;
  private readonly rt: RuntimeParts;

  constructor(private readonly d: RuntimeDeps) {
    this.hostEntries = new HostEntries(d);
    this.rt = {
      d,
      commit: new RecordBatches((uuids, fn, known) => d.store.services.patchContainers(uuids, fn, { known })),
      // Seconds a stop waits when the definition names no stop_grace_period.
      stopTimeoutS: d.stopTimeoutS ?? 10,
    };
  }

  /** Starts the records' engine containers (a service's start or scale; see start-records.ts). */
  ensureRunningMany(rows: ContainerRow[], opts: { limits: Limits; log: Log }): Promise<Error[]> {
    return ensureRunningMany(this.rt, rows, opts);
  }

  /** Moves the records to a new definition and generation (a redeploy; see start-records.ts). */
  redeployMany(rows: ContainerRow[], opts: RedeployOptions): Promise<Error[]> {
    return redeployMany(this.rt, rows, opts);
  }

  /** The records' rollout paused after a failure: their old containers stay routed while it is paused (router/drains.ts). */
  async pauseHolds(containerUuids: readonly string[]): Promise<void> {
    await this.d.pause?.(containerUuids);
  }

  /** Stops the records' engine containers (a service's stop; see stop-records.ts). */
  ensureStoppedMany(rows: ContainerRow[], opts: { limits: Limits; log: Log }): Promise<Error[]> {
    return ensureStoppedMany(this.rt, rows, opts);
  }

  /** Removes the records' engine containers and ends the records (see stop-records.ts). */
  ensureRemovedMany(
    rows: ContainerRow[],
    opts: { limits: Limits; log: Log; removeVolumes: boolean },
  ): Promise<Error[]> {
    return ensureRemovedMany(this.rt, rows, opts);
  }

  /** What the records' engines report, recorded in one transaction (see observe-records.ts). */
  observeMany(rows: ContainerRow[], opts: { perNode: number }): Promise<Map<string, ContainerRow>> {
    return observeMany(this.d, rows, opts);
  }

  /**
   * Makes a running container's link host entries follow its links (see Engine.replaceHostEntries):
   * when the entries it should hold differ from the ones written into it, they are rewritten in
   * place and recorded. `mayAct` is asked before the engine is (the reconciler leaves containers an
   * action works on alone). Returns false when the engine could not do it (an image without a
   * shell): the container then stays unsynchronized until a redeploy. Environment variables cannot
   * follow: an engine cannot change a running container's environment.
   */
  ensureLinkHosts(
    uuid: string,
    opts: { mayAct?: (c: ContainerRow) => Promise<boolean> } = {},
  ): Promise<boolean> {
    return this.hostEntries.ensure(uuid, opts);
  }

  /**
   * What the engine reports about one container, recorded: `observeMany` of a batch of one (only
   * what the runtime owns, `observed` and the engine's facts, never an action's phase). Answers the
   * record as it is now.
   */
  async observe(uuid: string): Promise<ContainerRow | undefined> {
    const c = await this.d.store.services.findContainer(uuid);
    if (!c || c.destroyed_at !== null) return c;
    return (await this.observeMany([c], { perNode: 1 })).get(uuid);
  }
}
