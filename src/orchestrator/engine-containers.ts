// A record's engine containers as an engine lists them: which generation each belongs to, the
// engine name of a generation, starting, stopping and removing the ones a listing showed.

import type { ServiceSpec } from "../domain/service.ts";
import { DEFAULT_STOP_SIGNAL } from "../domain/stop.ts";
import {
  type ContainerState,
  type ContainerSummary,
  type ContainerView,
  type Engine,
  isEngineError,
} from "../drivers/engine.ts";
import { specOf } from "../store/codec.ts";
import type { ContainerRow } from "../store/services.ts";
import type { Log } from "./log.ts";

/** Which deployment of a container record an engine container belongs to (see ContainerRow.generation). */
export const GENERATION_LABEL = "io.berth.generation";

/** Removes the engine containers, one after the other; one gone already (since a listing) is no error. */
export async function removeAll(engine: Engine, ids: readonly string[], opts: { removeVolumes: boolean }) {
  for (const id of ids) {
    try {
      await engine.removeContainer(id, { force: true, removeVolumes: opts.removeVolumes });
    } catch (err) {
      if (!isEngineError(err, "not_found")) throw err;
    }
  }
}

/** Listed states in which a container has a process (ContainerView.running). */
export const PROCESS_STATES: ReadonlySet<ContainerState> = new Set(["running", "paused"]);

/**
 * The record's engine containers, listed: `current` belongs to the record's generation, `stale`
 * to older ones (a redeploy that has not finished). Two current ones exist only if a crash hit
 * between create and record before engine names were per generation: the newest wins.
 */
export function byGeneration(
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
 * guard against a second container (generation-start.ts, createOnce).
 */
export function engineName(base: string, generation: string): string {
  return `${base}-${generation
    .replace(/[^0-9a-f]/gi, "")
    .slice(0, 12)
    .toLowerCase()}`;
}

/**
 * A listed engine container of the record's generation, started unless it runs; undefined when
 * it is gone. The listing may be older than the record's turn, so what it said is checked by the
 * calls made anyway (a running one is inspected, a stopped one started).
 */
export async function startListed(
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
 * A listed engine container of the record's generation, stopped if it runs (or restarts); what
 * the engine says of it then, undefined when it is gone. A container listed as stopped is
 * inspected first (a restart policy may have started it since the listing).
 */
export async function stopListed(
  c: ContainerRow,
  engine: Engine,
  listed: ContainerSummary,
  opts: { log: Log; defaultTimeoutS: number },
): Promise<ContainerView | undefined> {
  if (!PROCESS_STATES.has(listed.state) && listed.state !== "restarting") {
    const view = await engine.inspectContainer(listed.id);
    if (!view || !(view.running || view.state === "restarting")) return view;
  }
  try {
    await stopGracefully(c, engine, listed.id, { log: opts.log, defaultTimeoutS: opts.defaultTimeoutS });
  } catch (err) {
    if (isEngineError(err, "not_found")) return undefined;
    throw err;
  }
  const [, view] = await Promise.all([opts.log(`Stopped ${c.name}`), engine.inspectContainer(listed.id)]);
  return view;
}

/**
 * Stops an engine container of the record as its definition says (stop_signal and
 * stop_grace_period, domain/stop.ts; the platform's timeout when it names none). A stop may wait
 * the whole grace period, so the action log first says how long and for which signal, and then
 * whether the engine had to kill the command (`log` undefined: the container is not running, the
 * stop waits for nothing and says nothing).
 */
export async function stopGracefully(
  c: ContainerRow,
  engine: Engine,
  id: string,
  opts: { log: Log | undefined; defaultTimeoutS: number },
): Promise<void> {
  const spec: Pick<ServiceSpec, "stop_signal" | "stop_grace_period"> = specOf(c);
  const timeoutS = spec.stop_grace_period ?? opts.defaultTimeoutS;
  const signal = spec.stop_signal ?? `${DEFAULT_STOP_SIGNAL} unless the image sets another`;
  const log = opts.log;
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
