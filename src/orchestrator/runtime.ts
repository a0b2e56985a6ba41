// Idempotent operations on container records against their nodes' engines, in batches (a single
// record is a batch of one: there is one path). Each `ensure*Many` may be repeated after a crash:
// it looks at what the engine has (by the Berth labels it put there) before acting, and records
// what it observed through the group commit every batch in flight shares. Long because start,
// redeploy, stop, removal and observation share that commit and one listing per batch; what a
// start waits for before it counts (issue 29) lives in readiness.ts.
import { addTo } from "../domain/collections.ts";
import { LABELS } from "../domain/service.ts";
import type { Clock } from "../domain/time.ts";
import {
  type ContainerSpec,
  type ContainerView,
  type Engine,
  isEngineError,
  type RegistryAuth,
} from "../drivers/engine.ts";
import type { EngineSource } from "../nodes/provisioners.ts";
import type { NodeRow } from "../store/nodes.ts";
import type { ContainerRow, ServiceRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import { BatchListings } from "./batch-listings.ts";
import {
  exitCodeMessage,
  observedPatch,
  redeployPatch,
  removedPatch,
  stepDonePatch,
} from "./container-patches.ts";
import {
  byGeneration,
  engineName,
  GENERATION_LABEL,
  removeAll,
  startListed,
  stopGracefully,
  stopListed,
} from "./engine-containers.ts";
import { HostEntries } from "./host-entries.ts";
import { ensureImage } from "./images.ts";
import type { Log } from "./log.ts";
import type { Limits } from "./per-node.ts";
import { awaitStarted } from "./readiness.ts";
import { eachWithCommit, RecordBatches } from "./record-batches.ts";

export { GENERATION_LABEL, type Log };
export interface RuntimeDeps {
  store: Store;
  engines: EngineSource;
  clock: Clock;
  /** The engine spec of a container, from the definition it is deployed with. */
  specFor(
    c: ContainerRow,
    opts: { volumesFrom: string[]; service?: ServiceRow; node?: NodeRow },
  ): Promise<ContainerSpec>;
  /** Registry credentials for an image pulled for a container of the namespace, when Berth knows some. */
  pullAuth?(image: string, namespace: string): Promise<RegistryAuth | undefined>;
  /**
   * Whether a redeploy pulls the image again although the node has it (a tag on a registry Berth
   * knows may have moved); otherwise only missing images are pulled.
   */
  refreshesOnRedeploy?(image: string, namespace: string): Promise<boolean>;
  /** Seconds an engine waits between SIGTERM and SIGKILL when stopping. */
  stopTimeoutS?: number;
  /** The link host entries a container should hold now (its service's current links); undefined: none to follow. */
  linkHostsFor?(c: ContainerRow): Promise<string[] | undefined>;
  /** Takes containers out of their routers before their engines stop them (router/drains.ts). */
  drain?(rows: readonly ContainerRow[]): Promise<void>;
  /**
   * Keeps the records' engine containers routed while the records move to a new generation (a
   * start-first redeploy) until release(), which drains them before they stop (router/drains.ts).
   */
  hold?(rows: readonly ContainerRow[]): Promise<void>;
  release?(rows: readonly ContainerRow[]): Promise<void>;
  /** When a started container counts as started (readiness.ts); undefined: once its engine says it runs. */
  readiness?: { minUpMs: number; maxWaitMs: number };
}

/** What the records of one batch share (ContainerRuntime.eachRecord). */
interface BatchShared {
  service: ServiceRow | undefined;
  images: Map<string, Promise<void>>;
  listings: BatchListings;
  engineDone: () => void;
}

export class ContainerRuntime {
  private readonly hostEntries: HostEntries;
  /** The group commit every batched operation in flight shares (see record-batches.ts). */
  private readonly commit: RecordBatches;

  /** Seconds a stop waits when the definition names no stop_grace_period. */
  private get stopTimeoutS(): number {
    return this.d.stopTimeoutS ?? 10;
  }

  constructor(private readonly d: RuntimeDeps) {
    this.hostEntries = new HostEntries(d);
    this.commit = new RecordBatches((uuids, fn, known) =>
      d.store.services.patchContainers(uuids, fn, { known }),
    );
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
  async ensureRunningMany(rows: ContainerRow[], opts: { limits: Limits; log: Log }): Promise<Error[]> {
    return this.eachRecord(rows, opts.limits, (c, node, commit, shared) =>
      this.runAndRecord(c, node, commit, { ...shared, log: opts.log }),
    );
  }

  /**
   * `redeploy` over many records (a service's redeploy), batched as ensureRunningMany: each record
   * moves to the definition `specJson` with a new generation (in group-committed batches, just
   * before its engine work, so a record says it is redeployed only once its turn came), then its
   * new engine container is made and started (volumes of the old one reused or dropped), what the
   * engine reports recorded in batches, and the old engine container removed. Engines work in
   * parallel, `limits.perNode` at a time on one node (1 in all: one container after the other).
   * Answers the errors of the containers that failed; the others are redeployed.
   */
  async redeployMany(
    rows: ContainerRow[],
    opts: {
      limits: Limits;
      log: Log;
      reuseVolumes: boolean;
      specJson: string;
      specVersion: number;
      /** The old container keeps running until the new one is ready (a start-first rollout). */
      startFirst?: boolean;
    },
  ): Promise<Error[]> {
    // Listed (eachRecord) before some records move to their new generation: what each record's
    // listing shows of the old one is stale to it then, as it should be.
    return this.eachRecord(rows, opts.limits, async (c, node, commit, shared) => {
      // Start-first: the old engine container keeps serving until the new one is ready.
      if (opts.startFirst && this.d.hold) await this.d.hold([c]);
      else await this.d.drain?.([c]);
      const now = this.d.clock.now();
      const moved = await commit.record(
        c.uuid,
        (r) => (r.state === "Terminated" ? undefined : redeployPatch(opts, now)),
        c,
      );
      if (!moved || moved.state === "Terminated") return;
      await this.runAndRecord(moved, node, commit, {
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
  private async eachRecord(
    rows: ContainerRow[],
    limits: Limits,
    work: (c: ContainerRow, node: NodeRow, commit: RecordBatches, shared: BatchShared) => Promise<void>,
  ): Promise<Error[]> {
    if (rows.length === 0) return [];
    const services = await this.servicesOf(rows);
    const images = new Map<string, Promise<void>>();
    const listings = new BatchListings(rows);
    return eachWithCommit(this.d.store, this.commit, rows, limits, async (c, node, commit, engineDone) => {
      if (!node) throw new Error("the node of the container no longer exists");
      await work(c, node, commit, { service: services.get(c.service_uuid), images, listings, engineDone });
    });
  }

  private async servicesOf(rows: ContainerRow[]): Promise<Map<string, ServiceRow>> {
    const services = await this.d.store.services.servicesByUuid(rows.map((c) => c.service_uuid));
    return new Map(services.map((x) => [x.uuid, x]));
  }

  /**
   * The work of one record of ensureRunningMany or redeployMany: its engine container made (if
   * need be) and started, what the engine reports parked in the group commit, then the engine
   * containers of older generations removed.
   */
  private async runAndRecord(
    c: ContainerRow,
    node: NodeRow,
    commit: RecordBatches,
    opts: {
      service: ServiceRow | undefined;
      log: Log;
      reuseVolumes?: boolean;
      startFirst?: boolean;
      refreshImage?: boolean;
      images: Map<string, Promise<void>>;
      listings: BatchListings;
      engineDone: () => void;
    },
  ): Promise<void> {
    const engine = this.d.engines.forNode(node);
    const { view, staleLeft } = await this.startOnEngine(c, engine, opts.log, {
      ...opts,
      node,
      started: opts.engineDone,
    });
    const now = this.d.clock.now();
    const recorded = commit.record(c.uuid, (r) => stepDonePatch(c, r, view, now), c);
    // The node's next container starts while this record waits for its batch, its readiness and
    // (a redeploy's) the removal of its old container: the engine's work on it is done.
    opts.engineDone();
    const row = await recorded;
    if (view && row && this.d.readiness) {
      const ready = { ...this.d.readiness, clock: this.d.clock, log: opts.log };
      await awaitStarted(engine, c, view, ready, (last, now) =>
        commit.record(
          c.uuid,
          (r) =>
            r.generation === c.generation && r.destroyed_at === null
              ? observedPatch(r, last, now)
              : undefined,
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
    if (opts.startFirst && staleLeft.length > 0) await this.d.release?.([c]);
    for (const id of opts.startFirst ? staleLeft : [])
      await stopGracefully(c, engine, id, { log: opts.log, defaultTimeoutS: this.stopTimeoutS }).catch(
        () => {},
      );
    await removeAll(engine, staleLeft, { removeVolumes: opts.reuseVolumes === false });
  }

  /**
   * `ensureStopped` over many records (a service's stop): engines stopped in parallel (per-node
   * limit), what they report then recorded in group-committed batches (see ensureRunningMany).
   */
  async ensureStoppedMany(rows: ContainerRow[], opts: { limits: Limits; log: Log }): Promise<Error[]> {
    await this.d.drain?.(rows);
    const listings = new BatchListings(rows);
    return eachWithCommit(
      this.d.store,
      this.commit,
      rows,
      opts.limits,
      async (c, node, commit, engineDone) => {
        if (!node) throw new Error("the node of the container no longer exists");
        const engine = this.d.engines.forNode(node);
        const { current } = byGeneration(c, await listings.of(c, engine));
        const view = current
          ? await stopListed(c, engine, current, { log: opts.log, defaultTimeoutS: this.stopTimeoutS })
          : undefined;
        const now = this.d.clock.now();
        const recorded = commit.record(c.uuid, (r) => stepDonePatch(c, r, view, now), c);
        engineDone();
        await recorded;
      },
    );
  }

  /**
   * `ensureRemoved` over many records (a service's terminate, a scale down): engine containers
   * removed in parallel (per-node limit), the records marked Terminated in group-committed batches.
   */
  async ensureRemovedMany(
    rows: ContainerRow[],
    opts: { limits: Limits; log: Log; removeVolumes: boolean },
  ): Promise<Error[]> {
    await this.d.drain?.(rows);
    const listings = new BatchListings(rows);
    return eachWithCommit(
      this.d.store,
      this.commit,
      rows,
      opts.limits,
      async (c, node, commit, engineDone) => {
        if (node && node.state !== "Terminated") await this.removeFromEngine(c, node, opts, listings);
        const now = this.d.clock.now();
        const recorded = commit.record(c.uuid, (r) => removedPatch(r, now), c);
        engineDone();
        await recorded;
      },
    );
  }

  /**
   * The engine's half of ensureRemoved: every engine container of the record goes. `listings`: the
   * batch's (see BatchListings). An engine container of the record made after that listing (by an
   * actor that still held an older view of it) is not removed here, but it does not outlive the
   * record: once the record is Terminated the reconciler's orphan sweep removes every engine
   * container carrying its label (Reconciler.sweepOrphans).
   */
  private async removeFromEngine(
    c: ContainerRow,
    node: NodeRow,
    opts: { log: Log; removeVolumes: boolean },
    listings: BatchListings,
  ): Promise<void> {
    const engine = this.d.engines.forNode(node);
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

  /**
   * The engine's half of ensureRunning: finds or creates the engine container of the record's
   * generation and starts it; writes nothing to the store (the caller records what it answers).
   */
  private async startOnEngine(
    c: ContainerRow,
    engine: Engine,
    log: Log,
    opts: GenerationOptions & {
      listings: BatchListings;
      /**
       * Called once a container this call made has been started: what remains is a look at it,
       * the wait for it to count as started (reads), and the removal of the older ones it
       * replaced, none of which holds the node's next container back.
       */
      started?: () => void;
    },
  ): Promise<{ view: ContainerView | undefined; staleLeft: string[] }> {
    const { current, stale, staleRunning } = byGeneration(c, await opts.listings.of(c, engine));
    let view = current ? await startListed(c, engine, current, log) : undefined;
    let staleLeft = stale;
    if (!view) {
      const made = await this.createOfGeneration(c, engine, log, stale, { ...opts, staleRunning });
      staleLeft = made.staleLeft;
      // A new container is not running: start it and look once, after the start. Each log line is
      // written while the engine works (lines keep their order; none is a reason to wait).
      await Promise.all([
        log(
          made.found
            ? `Found ${c.name} made meanwhile`
            : `Created ${c.name}${staleLeft.length ? " with the volumes of its previous container" : ""}`,
        ),
        engine.startContainer(made.id),
      ]);
      opts.started?.();
      [, view] = await Promise.all([log(`Started ${c.name}`), engine.inspectContainer(made.id)]);
      if (!view) throw new Error(`container ${c.name} vanished right after it was started`);
    }
    return { view, staleLeft };
  }

  /**
   * Makes the engine container of the record's generation: older generations (`stale`) are
   * stopped to lend their volumes to the new one (`reuseVolumes`, a redeploy's default) or removed
   * with theirs; the spec is labelled with the generation and named after it, its image pulled when
   * missing, and the container created once (createOnce). Answers which older ones are left.
   */
  private async createOfGeneration(
    c: ContainerRow,
    engine: Engine,
    log: Log,
    stale: string[],
    opts: GenerationOptions & {
      /** The stale containers listed as running; undefined: not known, each may be. */
      staleRunning?: ReadonlySet<string>;
    },
  ): Promise<{ id: string; found: boolean; staleLeft: string[] }> {
    const reuse = opts.reuseVolumes ?? true;
    for (const id of stale) {
      if (opts.startFirst) continue;
      if (reuse) {
        const running = opts.staleRunning?.has(id) ?? true;
        await stopGracefully(c, engine, id, {
          log: running ? log : undefined,
          defaultTimeoutS: this.stopTimeoutS,
        }).catch(() => {});
      } else await engine.removeContainer(id, { force: true, removeVolumes: true });
    }
    const staleLeft = reuse || opts.startFirst ? stale : [];
    const volumesFrom = reuse ? staleLeft : [];
    const spec = await this.d.specFor(c, { volumesFrom, service: opts.service, node: opts.node });
    spec.labels = { ...spec.labels, [GENERATION_LABEL]: c.generation };
    spec.name = engineName(spec.name ?? c.name, c.generation);
    await ensureImage(this.d, engine, spec.image, log, {
      namespace: c.namespace,
      refresh: opts.refreshImage,
      node: c.node_uuid,
      shared: opts.images,
    });
    return { ...(await this.createOnce(c, engine, spec)), staleLeft };
  }

  /**
   * Creates the engine container of the record's generation under its name (engineName), or
   * answers the one that holds that name already. An engine refuses a second container of one
   * name, so two creators of a record's generation never make two, whatever they listed before:
   * a batch decides from one listing per node taken before the record's turn (BatchListings), and a
   * step run again after its lease lapsed may overlap the first run. Nothing else creates engine
   * containers: the reconciler only observes them and removes those without a live record.
   */
  private async createOnce(
    c: ContainerRow,
    engine: Engine,
    spec: ContainerSpec,
  ): Promise<{ id: string; found: boolean }> {
    try {
      return { id: await engine.createContainer(spec), found: false };
    } catch (err) {
      if (!isEngineError(err, "conflict") || spec.name === undefined) throw err;
      const holder = await engine.inspectContainer(spec.name);
      const ours =
        holder?.labels[LABELS.container] === c.uuid && holder.labels[GENERATION_LABEL] === c.generation;
      if (!ours) throw err;
      return { id: holder.id, found: true };
    }
  }

  /**
   * `observe` over many records: their engines are asked in parallel (at most `perNode` at a time
   * on one node), and what they report is written in one transaction. A record whose node cannot
   * be reached, or whose engine answers with an error, is left as it is. Answers the records as
   * they are now.
   */
  async observeMany(rows: ContainerRow[], opts: { perNode: number }): Promise<Map<string, ContainerRow>> {
    const live = rows.filter((c) => c.state !== "Terminated");
    const nodes = await this.d.store.nodes.knownNodes(live.map((c) => c.node_uuid));
    const seen: Observed[] = [];
    const byNode = new Map<string, ContainerRow[]>();
    for (const c of live) {
      addTo(byNode, c.node_uuid, c);
    }
    // One listing per node for all its records. An engine container made after it is not in it:
    // its record, once it holds that container, is left alone (recordObserved).
    const listings = new BatchListings(live);
    await Promise.all(
      [...byNode].map(async ([nodeUuid, list]) => {
        const node = nodes.get(nodeUuid);
        if (!node) return;
        const engine = this.d.engines.forNode(node);
        for (let i = 0; i < list.length; i += opts.perNode) {
          await Promise.all(
            list.slice(i, i + opts.perNode).map(async (c) => {
              try {
                const { current } = byGeneration(c, await listings.of(c, engine));
                const view = current ? await engine.inspectContainer(current.id) : undefined;
                seen.push({ uuid: c.uuid, generation: c.generation, engineId: c.engine_id, view });
              } catch {
                // unreachable or failing: the health watcher and the reconciler look again later
              }
            }),
          );
        }
      }),
    );
    const out = new Map(rows.map((c) => [c.uuid, c]));
    for (const [uuid, r] of await this.recordObserved(seen)) out.set(uuid, r);
    return out;
  }

  /** What engines reported about many records, written in one transaction (see ensureRunningMany). */
  private async recordObserved(items: readonly Observed[]): Promise<Map<string, ContainerRow>> {
    const now = this.d.clock.now();
    const seen = new Map(items.map((i) => [i.uuid, i]));
    // A record removed, or moved to another generation (a redeploy), since it was read is left
    // alone: the engine spoke of a container it no longer has. So is a record found without its
    // container that holds another one now than when it was read: that one was made (and
    // recorded) after the listing, which could not show it. Phases are the action's to end.
    return this.d.store.services.patchContainers([...seen.keys()], (r) => {
      const item = seen.get(r.uuid);
      if (!item || r.destroyed_at !== null || r.generation !== item.generation) return undefined;
      if (!item.view && r.engine_id !== item.engineId) return undefined;
      return observedPatch(r, item.view, now);
    });
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

/** How a record's engine container of a new generation is made (ContainerRuntime.createOfGeneration). */
interface GenerationOptions {
  /** The record's service and node, when the caller has read them (the spec reads them otherwise). */
  service?: ServiceRow;
  node?: NodeRow;
  /** Older generations lend their volumes to the new one (the default), or go with theirs. */
  reuseVolumes?: boolean;
  /** Older generations keep running beside the new one until it is ready (start-first). */
  startFirst?: boolean;
  /** Pull the image again even when the node has it (its tag may have moved). */
  refreshImage?: boolean;
  /** Images a batch has ensured so far, by node and image. */
  images?: Map<string, Promise<void>>;
}

/** What observeMany saw of a record: its engine container, and the one it held when it was read. */
interface Observed {
  uuid: string;
  generation: string;
  engineId: string | null;
  view: ContainerView | undefined;
}
