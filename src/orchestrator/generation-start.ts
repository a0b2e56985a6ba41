// The engine's half of starting a container record: the engine container of the record's
// generation found (from the batch's listing) and started, or made and started: older generations
// stopped to lend their volumes, or removed with theirs; the spec labelled and named after the
// generation, its image pulled when missing, the container created once. Writes nothing to the
// store: the caller (start-records.ts) records what it answers.
import { LABELS } from "../domain/service.ts";
import { type ContainerSpec, type ContainerView, type Engine, isEngineError } from "../drivers/engine.ts";
import type { NodeRow } from "../store/nodes.ts";
import type { ContainerRow, ServiceRow } from "../store/services.ts";
import type { BatchListings } from "./batch-listings.ts";
import {
  byGeneration,
  engineName,
  GENERATION_LABEL,
  startListed,
  stopGracefully,
} from "./engine-containers.ts";
import { ensureImage } from "./images.ts";
import type { Log } from "./log.ts";
import type { RuntimeParts } from "./runtime-deps.ts";

/** How a record's engine container of a new generation is made (createOfGeneration). */
export interface GenerationOptions {
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

/**
 * Finds or creates the engine container of the record's generation and starts it; answers the
 * engine's view of it and the older engine containers of the record still left to remove.
 */
export async function startOnEngine(
  rt: RuntimeParts,
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
    const made = await createOfGeneration(rt, c, engine, log, stale, { ...opts, staleRunning });
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
async function createOfGeneration(
  rt: RuntimeParts,
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
        defaultTimeoutS: rt.stopTimeoutS,
      }).catch(() => {});
    } else await engine.removeContainer(id, { force: true, removeVolumes: true });
  }
  const staleLeft = reuse || opts.startFirst ? stale : [];
  const volumesFrom = reuse ? staleLeft : [];
  const spec = await rt.d.specFor(c, { volumesFrom, service: opts.service, node: opts.node });
  spec.labels = { ...spec.labels, [GENERATION_LABEL]: c.generation };
  spec.name = engineName(spec.name ?? c.name, c.generation);
  await ensureImage(rt.d, engine, spec.image, log, {
    namespace: c.namespace,
    refresh: opts.refreshImage,
    node: c.node_uuid,
    shared: opts.images,
  });
  return { ...(await createOnce(c, engine, spec)), staleLeft };
}

/**
 * Creates the engine container of the record's generation under its name (engineName), or
 * answers the one that holds that name already. An engine refuses a second container of one
 * name, so two creators of a record's generation never make two, whatever they listed before:
 * a batch decides from one listing per node taken before the record's turn (BatchListings), and a
 * step run again after its lease lapsed may overlap the first run. Nothing else creates engine
 * containers: the reconciler only observes them and removes those without a live record.
 */
async function createOnce(
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
