// Images on nodes: pulled when missing (or again when a redeploy asks and the tag may have moved),
// each once per node and batch.
import type { Engine, RegistryAuth } from "../drivers/engine.ts";
import type { Log } from "./log.ts";

/** What pulling needs to know of Berth (ContainerRuntime's deps). */
export interface ImageSource {
  /** Registry credentials for an image pulled for a container of the namespace, when Berth knows some. */
  pullAuth?(image: string, namespace: string): Promise<RegistryAuth | undefined>;
  /** Whether a redeploy pulls the image again although the node has it. */
  refreshesOnRedeploy?(image: string, namespace: string): Promise<boolean>;
}

/**
 * The image on the node, pulled when missing (or, with `refresh`, again when its tag may have
 * moved). `shared`: the images a batch has ensured so far, by node and image, so a batch asks
 * each node for an image once, not once per container.
 */
export function ensureImage(
  d: ImageSource,
  engine: Engine,
  image: string,
  log: Log,
  opts: { namespace: string; refresh?: boolean; node: string; shared?: Map<string, Promise<void>> },
): Promise<void> {
  if (!opts.shared) return pullIfNeeded(d, engine, image, log, opts);
  const key = `${opts.node}\u0000${image}`;
  let done = opts.shared.get(key);
  if (!done) {
    done = pullIfNeeded(d, engine, image, log, opts);
    opts.shared.set(key, done);
  }
  return done;
}

async function pullIfNeeded(
  d: ImageSource,
  engine: Engine,
  image: string,
  log: Log,
  opts: { namespace: string; refresh?: boolean },
): Promise<void> {
  const present = await engine.hasImage(image);
  if (present && !(opts.refresh && (await d.refreshesOnRedeploy?.(image, opts.namespace)))) return;
  await log(`Pulling image ${image}`);
  try {
    const auth = await d.pullAuth?.(image, opts.namespace);
    await engine.pullImage(image, { auth });
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    if (!present) throw new Error(`could not pull ${image}: ${reason}`);
    await log(`Could not pull ${image} again (${reason}); using the image the node has`);
    return;
  }
  await log(`Pulled image ${image}`);
}
