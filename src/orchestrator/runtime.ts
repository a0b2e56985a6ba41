// Idempotent operations on one container record against its node's engine. Each `ensure*`
// may be repeated after a crash: it looks at what the engine has (by the Berth labels it put
// there) before acting, and records what it observed.
import { addTo } from "../domain/collections.ts";
import { LABELS, type ServiceSpec } from "../domain/service.ts";
import { DEFAULT_STOP_SIGNAL } from "../domain/stop.ts";
import type { Clock } from "../domain/time.ts";
import {
  type ContainerSpec,
  type ContainerState,
  type ContainerSummary,
  type ContainerView,
  type Engine,
  isEngineError,
  type RegistryAuth,
} from "../drivers/engine.ts";
import type { EngineSource } from "../nodes/provisioners.ts";
import { linkHostsOf, specOf } from "../store/codec.ts";
import type { NodeRow } from "../store/nodes.ts";
import type { ContainerRow, ServiceRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import { BatchListings } from "./batch-listings.ts";
import {
  engineRecord,
  exitCodeMessage,
  observedPatch,
  redeployPatch,
  removedPatch,
  stepDonePatch,
} from "./container-patches.ts";
import { sameEntries } from "./links.ts";
import type { Limits } from "./per-node.ts";
import { eachWithCommit, RecordBatches } from "./record-batches.ts";

export type Log = (line: string) => Promise<void>;

/** Which deployment of a container record an engine container belongs to (see ContainerRow.generation). */
export const GENERATION_LABEL = "io.berth.generation";

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
}

export class ContainerRuntime {
  /** Engine containers (with the entries asked for) whose image could not rewrite its hosts. */
  private readonly hostsRefused = new Set<string>();
  /** The group commit every batched operation in flight shares (see record-batches.ts). */
  private readonly commit: RecordBatches;

  constructor(private readonly d: RuntimeDeps) {
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
    if (rows.length === 0) return [];
    const services = await this.servicesOf(rows);
    const images = new Map<string, Promise<void>>();
    const listings = new BatchListings(rows);
    return eachWithCommit(
      this.d.store,
      this.commit,
      rows,
      opts.limits,
      async (c, node, commit, engineDone) => {
        if (!node) throw new Error("the node of the container no longer exists");
        await this.runAndRecord(c, node, commit, {
          service: services.get(c.service_uuid),
          log: opts.log,
          images,
          listings,
          engineDone,
        });
      },
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
    opts: { limits: Limits; log: Log; reuseVolumes: boolean; specJson: string; specVersion: number },
  ): Promise<Error[]> {
    if (rows.length === 0) return [];
    const services = await this.servicesOf(rows);
    const images = new Map<string, Promise<void>>();
    // Listed before some records move to their new generation: what each record's listing shows of
    // the old one is stale to it then, as it should be.
    const listings = new BatchListings(rows);
    return eachWithCommit(
      this.d.store,
      this.commit,
      rows,
      opts.limits,
      async (c, node, commit, engineDone) => {
        if (!node) throw new Error("the node of the container no longer exists");
        const now = this.d.clock.now();
        const moved = await commit.record(
          c.uuid,
          (r) => (r.state === "Terminated" ? undefined : redeployPatch(opts, now)),
          c,
        );
        if (!moved || moved.state === "Terminated") return;
        await this.runAndRecord(moved, node, commit, {
          service: services.get(c.service_uuid),
          log: opts.log,
          reuseVolumes: opts.reuseVolumes,
          refreshImage: true,
          images,
          listings,
          engineDone,
        });
      },
    );
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
    // The node's next container starts while this record waits for its batch (the old containers
    // of a redeploy are removed only once the new one is recorded running: the slot is kept).
    if (staleLeft.length === 0) opts.engineDone();
    const row = await recorded;
    if (row && row.state !== "Running" && row.state !== "Starting") {
      const v = view ? await engine.inspectContainer(view.id) : undefined;
      throw new Error(
        `did not stay running: ${v?.error || exitCodeMessage(v?.exitCode ?? null) || "unknown reason"}`,
      );
    }
    // The previous containers' volumes are mounted by the new one now; the containers can go (the
    // ones the batch's listing showed: only this record's work makes containers of it).
    await removeAll(engine, staleLeft, { removeVolumes: false });
  }

  /**
   * `ensureStopped` over many records (a service's stop): engines stopped in parallel (per-node
   * limit), what they report then recorded in group-committed batches (see ensureRunningMany).
   */
  async ensureStoppedMany(rows: ContainerRow[], opts: { limits: Limits; log: Log }): Promise<Error[]> {
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
        const view = current ? await this.stopListed(c, engine, current, opts.log) : undefined;
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
    listings: BatchListings = new BatchListings([c]),
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
       * Called once a container this call made has been started and no older one is left to
       * remove: what remains is a look at it (a read), so the node's next container may start.
       */
      started?: () => void;
    },
  ): Promise<{ view: ContainerView | undefined; staleLeft: string[] }> {
    const { current, stale, staleRunning } = byGeneration(c, await opts.listings.of(c, engine));
    let view = current ? await this.startListed(c, engine, current, log) : undefined;
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
      if (staleLeft.length === 0) opts.started?.();
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
      if (reuse) {
        const running = opts.staleRunning?.has(id) ?? true;
        await this.stopGracefully(c, engine, id, running ? log : undefined).catch(() => {});
      } else await engine.removeContainer(id, { force: true, removeVolumes: true });
    }
    const staleLeft = reuse ? stale : [];
    const spec = await this.d.specFor(c, { volumesFrom: staleLeft, service: opts.service, node: opts.node });
    spec.labels = { ...spec.labels, [GENERATION_LABEL]: c.generation };
    spec.name = engineName(spec.name ?? c.name, c.generation);
    await this.ensureImage(engine, spec.image, log, {
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
   * A listed engine container of the record's generation, started unless it runs; undefined when
   * it is gone. The listing may be older than the record's turn, so what it said is checked by the
   * calls made anyway (a running one is inspected, a stopped one started).
   */
  private async startListed(
    c: ContainerRow,
    engine: Engine,
    listed: ContainerSummary,
    log: Log,
  ): Promise<ContainerView | undefined> {
    if (PROCESS_STATES.has(listed.state)) {
      const view = await engine.inspectContainer(listed.id);
      if (!view || view.running) return view;
    }
    try {
      await engine.startContainer(listed.id);
    } catch (err) {
      if (isEngineError(err, "not_found")) return undefined;
      throw err;
    }
    const [, view] = await Promise.all([log(`Started ${c.name}`), engine.inspectContainer(listed.id)]);
    return view;
  }

  /**
   * Stops an engine container of the record as its definition says (stop_signal and
   * stop_grace_period, domain/stop.ts; the platform's timeout when it names none). A stop may wait
   * the whole grace period, so the action log first says how long and for which signal, and then
   * whether the engine had to kill the command (`log` undefined: the container is not running, the
   * stop waits for nothing and says nothing).
   */
  private async stopGracefully(
    c: ContainerRow,
    engine: Engine,
    id: string,
    log: Log | undefined,
  ): Promise<void> {
    const spec: Pick<ServiceSpec, "stop_signal" | "stop_grace_period"> = specOf(c);
    const timeoutS = spec.stop_grace_period ?? this.d.stopTimeoutS ?? 10;
    const signal = spec.stop_signal ?? `${DEFAULT_STOP_SIGNAL} unless the image sets another`;
    // The line is written while the engine works: it is said before the wait, not a reason to wait.
    const [, outcome] = await Promise.all([
      log?.(`Waiting up to ${timeoutS} s for ${c.name} to stop (stop signal ${signal})`),
      engine.stopContainer(id, { timeoutS }),
    ]);
    if (outcome.killed)
      await log?.(
        `${c.name} did not stop within ${timeoutS} s of its stop signal: the engine killed it (SIGKILL)`,
      );
  }

  /**
   * A listed engine container of the record's generation, stopped if it runs (or restarts); what
   * the engine says of it then, undefined when it is gone. A container listed as stopped is
   * inspected first (a restart policy may have started it since the listing).
   */
  private async stopListed(
    c: ContainerRow,
    engine: Engine,
    listed: ContainerSummary,
    log: Log,
  ): Promise<ContainerView | undefined> {
    if (!PROCESS_STATES.has(listed.state) && listed.state !== "restarting") {
      const view = await engine.inspectContainer(listed.id);
      if (!view || !(view.running || view.state === "restarting")) return view;
    }
    try {
      await this.stopGracefully(c, engine, listed.id, log);
    } catch (err) {
      if (isEngineError(err, "not_found")) return undefined;
      throw err;
    }
    const [, view] = await Promise.all([log(`Stopped ${c.name}`), engine.inspectContainer(listed.id)]);
    return view;
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

  async engineOf(c: Pick<ContainerRow, "node_uuid">): Promise<Engine> {
    const node = await this.d.store.nodes.knownNode(c.node_uuid);
    if (!node) throw new Error(`node ${c.node_uuid} of the container no longer exists`);
    return this.d.engines.forNode(node);
  }

  /**
   * The engine containers of a record, found by Berth's label: `current` belongs to the record's
   * generation, `stale` to older ones (a redeploy that has not finished).
   */
  async engineContainers(
    c: ContainerRow,
    engine?: Engine,
  ): Promise<{ current?: ContainerView; stale: string[]; staleRunning: ReadonlySet<string> }> {
    const e = engine ?? (await this.engineOf(c));
    const found = await e.listContainers({ labels: { [LABELS.container]: c.uuid }, all: true });
    const { current, stale, staleRunning } = byGeneration(c, found);
    return { current: current ? await e.inspectContainer(current.id) : undefined, stale, staleRunning };
  }

  async find(c: ContainerRow, engine?: Engine): Promise<ContainerView | undefined> {
    return (await this.engineContainers(c, engine)).current;
  }

  /**
   * The image on the node, pulled when missing (or, with `refresh`, again when its tag may have
   * moved). `shared`: the images a batch has ensured so far, by node and image, so a batch asks
   * each node for an image once, not once per container.
   */
  private ensureImage(
    engine: Engine,
    image: string,
    log: Log,
    opts: { namespace: string; refresh?: boolean; node: string; shared?: Map<string, Promise<void>> },
  ): Promise<void> {
    if (!opts.shared) return this.pullIfNeeded(engine, image, log, opts);
    const key = `${opts.node}\u0000${image}`;
    let done = opts.shared.get(key);
    if (!done) {
      done = this.pullIfNeeded(engine, image, log, opts);
      opts.shared.set(key, done);
    }
    return done;
  }

  private async pullIfNeeded(
    engine: Engine,
    image: string,
    log: Log,
    opts: { namespace: string; refresh?: boolean },
  ): Promise<void> {
    const present = await engine.hasImage(image);
    if (present && !(opts.refresh && (await this.d.refreshesOnRedeploy?.(image, opts.namespace)))) return;
    await log(`Pulling image ${image}`);
    try {
      const auth = await this.d.pullAuth?.(image, opts.namespace);
      await engine.pullImage(image, { auth });
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      if (!present) throw new Error(`could not pull ${image}: ${reason}`);
      await log(`Could not pull ${image} again (${reason}); using the image the node has`);
      return;
    }
    await log(`Pulled image ${image}`);
  }

  /**
   * Creates the engine container of the record's definition if it does not exist yet. Older
   * ones are stopped first; with `reuseVolumes` the new one mounts their volumes, otherwise they
   * are removed with their volumes before it is made.
   */
  async ensureCreated(
    c: ContainerRow,
    log: Log,
    opts: { reuseVolumes?: boolean; refreshImage?: boolean } = {},
  ): Promise<ContainerView> {
    return (await this.create(c, log, opts)).view;
  }

  /** ensureCreated, also telling which engine it used and which older containers it left in place. */
  private async create(
    c: ContainerRow,
    log: Log,
    opts: { reuseVolumes?: boolean; refreshImage?: boolean },
  ): Promise<{ view: ContainerView; engine: Engine; staleLeft: string[] }> {
    const engine = await this.engineOf(c);
    const { current, stale, staleRunning } = await this.engineContainers(c, engine);
    if (current) {
      if (current.id !== c.engine_id || c.environment === null)
        await this.d.store.mutate("container", c.uuid, (r) => engineRecord(r, current));
      return { view: current, engine, staleLeft: stale };
    }
    const { id, staleLeft } = await this.createOfGeneration(c, engine, log, stale, { ...opts, staleRunning });
    const view = await engine.inspectContainer(id);
    if (!view) throw new Error(`container ${c.name} vanished right after it was created`);
    await this.d.store.mutate("container", c.uuid, (r) => engineRecord(r, view));
    await log(`Created ${c.name}${staleLeft.length ? " with the volumes of its previous container" : ""}`);
    return { view, engine, staleLeft };
  }

  async ensureRunning(
    c: ContainerRow,
    log: Log,
    opts: { reuseVolumes?: boolean; refreshImage?: boolean } = {},
  ): Promise<ContainerRow> {
    const { view, engine, staleLeft } = await this.create(c, log, opts);
    if (!view.running) {
      await engine.startContainer(view.id);
      await log(`Started ${c.name}`);
    }
    const row = await this.stepDone(c, { engine, id: view.id });
    if (row && row.state !== "Running" && row.state !== "Starting") {
      const v = await engine.inspectContainer(view.id);
      throw new Error(
        `${c.name} did not stay running: ${v?.error || exitCodeMessage(v?.exitCode ?? null) || "unknown reason"}`,
      );
    }
    // The previous containers' volumes are mounted by the new one now; the containers can go.
    // (Only when there were any: the engine is not listed again for nothing.)
    if (staleLeft.length) {
      const { stale } = await this.engineContainers(c, engine);
      for (const id of stale) await engine.removeContainer(id, { force: true, removeVolumes: false });
    }
    return row!;
  }

  async ensureStopped(c: ContainerRow, log: Log): Promise<ContainerRow> {
    const engine = await this.engineOf(c);
    const view = await this.find(c, engine);
    if (view?.running || view?.state === "restarting") {
      await this.stopGracefully(c, engine, view.id, log);
      await log(`Stopped ${c.name}`);
    }
    return (await this.stepDone(c, { engine }))!;
  }

  /** Removes the engine containers (and their anonymous volumes when asked) and marks the record Terminated. */
  async ensureRemoved(c: ContainerRow, log: Log, opts: { removeVolumes: boolean }): Promise<ContainerRow> {
    const node = await this.d.store.nodes.knownNode(c.node_uuid);
    if (node && node.state !== "Terminated") await this.removeFromEngine(c, node, { log, ...opts });
    const now = this.d.clock.now();
    return (await this.d.store.mutate("container", c.uuid, (r) => removedPatch(r, now)))!;
  }

  /**
   * Moves the record to the current definition and replaces its engine container (see ensureCreated).
   * Safe to repeat: a retry after a crash finds the new generation's container if it was made.
   */
  async redeploy(
    c: ContainerRow,
    log: Log,
    opts: { reuseVolumes: boolean; specJson: string; specVersion: number },
  ) {
    const row = await this.d.store.mutate("container", c.uuid, () => redeployPatch(opts, this.d.clock.now()));
    // With the new definition version recorded, the old engine container counts as stale:
    // ensureRunning makes the new one (reusing or dropping volumes) and then removes the old.
    // A redeploy takes the image's current content: a moved tag is pulled again.
    return this.ensureRunning(row!, log, { ...opts, refreshImage: true });
  }

  /**
   * Makes a running container's link host entries follow its links (see Engine.replaceHostEntries):
   * when the entries it should hold differ from the ones written into it, they are rewritten in
   * place and recorded. `mayAct` is asked before the engine is (the reconciler leaves containers an
   * action works on alone). Returns false when the engine could not do it (an image without a
   * shell): the container then stays unsynchronized until a redeploy. Environment variables cannot
   * follow: an engine cannot change a running container's environment.
   */
  async ensureLinkHosts(
    uuid: string,
    opts: { mayAct?: (c: ContainerRow) => Promise<boolean> } = {},
  ): Promise<boolean> {
    const c = await this.d.store.services.findContainer(uuid);
    if (c?.state !== "Running" || !c.engine_id || c.link_hosts === null) return true;
    const desired = await this.d.linkHostsFor?.(c);
    if (!desired) return true;
    const written = linkHostsOf(c);
    if (sameEntries(written, desired)) return true;
    const key = `${c.engine_id}\u0000${JSON.stringify(desired)}`;
    if (this.hostsRefused.has(key)) return false;
    if (opts.mayAct && !(await opts.mayAct(c))) return true;
    const engine = await this.engineOf(c);
    try {
      await engine.replaceHostEntries(c.engine_id, { remove: written, add: desired });
    } catch (err) {
      if (isEngineError(err, "other")) {
        // Not retried for the same container and entries: the image cannot do it.
        this.hostsRefused.add(key);
        return false;
      }
      throw err;
    }
    await this.d.store.mutate("container", c.uuid, (r) =>
      r.engine_id === c.engine_id ? { link_hosts: JSON.stringify(desired) } : undefined,
    );
    return true;
  }

  /**
   * Records what the engine reports about the container (the engine watcher's write path): only
   * what the runtime owns (`observed` and the engine's facts), never an action's phase, so an
   * observation made while an action works on the container is kept (the API shows the action's
   * state until its phase ends, then this). What the engine said answers the record as it was
   * read: when anything wrote the record meanwhile (version-checked in the store), the engine is
   * asked again, so that an older report never overwrites a newer one.
   */
  async observe(
    uuid: string,
    opts: {
      engine?: Engine;
      /** The engine container of the record's generation, when the caller just made or started it. */
      id?: string;
    } = {},
  ): Promise<ContainerRow | undefined> {
    for (let attempt = 1; ; attempt++) {
      const c = await this.d.store.services.findContainer(uuid);
      if (!c || c.destroyed_at !== null) return c;
      let view: ContainerView | undefined;
      try {
        if (opts.id && opts.engine) view = await opts.engine.inspectContainer(opts.id);
        view ??= await this.find(c, opts.engine);
      } catch (err) {
        if (isEngineError(err, "unreachable")) return c; // the node's health is the health watcher's business
        throw err;
      }
      const now = this.d.clock.now();
      let moved = false;
      const row = await this.d.store.mutate("container", uuid, (r) => {
        moved = r.version !== c.version;
        return moved ? undefined : observedPatch(r, view, now);
      });
      if (!moved || attempt >= OBSERVE_ATTEMPTS) return row;
    }
  }

  /**
   * An action's engine step on the container is done: what the engine reports is recorded and the
   * phase the action set (as read in `c`) ends, in one write.
   */
  private async stepDone(
    c: ContainerRow,
    opts: { engine: Engine; id?: string },
  ): Promise<ContainerRow | undefined> {
    const view = opts.id ? await opts.engine.inspectContainer(opts.id) : await this.find(c, opts.engine);
    const now = this.d.clock.now();
    return this.d.store.mutate("container", c.uuid, (r) => stepDonePatch(c, r, view, now));
  }
}

/** How a record's engine container of a new generation is made (ContainerRuntime.createOfGeneration). */
interface GenerationOptions {
  /** The record's service and node, when the caller has read them (the spec reads them otherwise). */
  service?: ServiceRow;
  node?: NodeRow;
  /** Older generations lend their volumes to the new one (the default), or go with theirs. */
  reuseVolumes?: boolean;
  /** Pull the image again even when the node has it (its tag may have moved). */
  refreshImage?: boolean;
  /** Images a batch has ensured so far, by node and image. */
  images?: Map<string, Promise<void>>;
}

/** How many times `observe` asks the engine again when the record moved while it asked. */
const OBSERVE_ATTEMPTS = 5;

/** Removes the engine containers, one after the other; one gone already (since a listing) is no error. */
async function removeAll(engine: Engine, ids: readonly string[], opts: { removeVolumes: boolean }) {
  for (const id of ids) {
    try {
      await engine.removeContainer(id, { force: true, removeVolumes: opts.removeVolumes });
    } catch (err) {
      if (!isEngineError(err, "not_found")) throw err;
    }
  }
}

/** Listed states in which a container has a process (ContainerView.running). */
const PROCESS_STATES: ReadonlySet<ContainerState> = new Set(["running", "paused"]);

/** What observeMany saw of a record: its engine container, and the one it held when it was read. */
interface Observed {
  uuid: string;
  generation: string;
  engineId: string | null;
  view: ContainerView | undefined;
}

/**
 * The record's engine containers, listed: `current` belongs to the record's generation, `stale`
 * to older ones (a redeploy that has not finished). Two current ones exist only if a crash hit
 * between create and record before engine names were per generation: the newest wins.
 */
function byGeneration(
  c: Pick<ContainerRow, "generation">,
  found: readonly ContainerSummary[],
): { current?: ContainerSummary; stale: string[]; staleRunning: ReadonlySet<string> } {
  const sorted = [...found].sort((a, b) => b.createdAt - a.createdAt);
  const current = sorted.find((x) => x.labels[GENERATION_LABEL] === c.generation);
  const stale = sorted.filter((x) => x !== current);
  const staleRunning = new Set(
    stale.filter((x) => PROCESS_STATES.has(x.state) || x.state === "restarting").map((x) => x.id),
  );
  return { current, stale: stale.map((x) => x.id), staleRunning };
}

/**
 * The engine's name of a record's container in one generation: its base name (see
 * engineContainerName) and the generation's first 12 hex digits. During a redeploy the old
 * container keeps its own name beside the new one; within a generation the name is the engine's
 * guard against a second container (ContainerRuntime.createOnce).
 */
function engineName(base: string, generation: string): string {
  return `${base}-${generation
    .replace(/[^0-9a-f]/gi, "")
    .slice(0, 12)
    .toLowerCase()}`;
}
