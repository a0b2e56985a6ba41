// A start that tells the truth (issue 29): a container an action started counts as started only
// once it is running and healthy (with a health check, its own or its image's), or has stayed up
// for a minimum time (without one). A container that exits with an error, restarts (a crash loop
// under autorestart) or turns unhealthy fails the action's work with its exit code, the reason and
// its last log lines. A command that ends with code 0 at once finished its work: a job, not a
// failure. Without a check the engine is asked once more, when the minimum time has passed; with
// one, until it decides (more often at first, never more than twice a second).
import { type HealthCheck, healthView } from "../domain/health.ts";
import type { Clock } from "../domain/time.ts";
import type { ContainerView, Engine } from "../drivers/engine.ts";
import { decodeSpec } from "../store/codec.ts";
import { exitCodeMessage } from "./container-patches.ts";
import type { Log } from "./log.ts";

export interface ReadinessOptions {
  /** How long a container without a health check must stay up to count as started. */
  minUpMs: number;
  /** The longest a container with a check may stay "starting" when its timing is unknown (an image's check). */
  maxWaitMs: number;
  clock: Clock;
  log: Log;
  /** Waits (tests may pass a fake); setTimeout by default. */
  sleep?: (ms: number) => Promise<void>;
  signal?: AbortSignal;
}

/** Why a started container does not count as started: its message names it and the reason. */
export class NotReadyError extends Error {
  override readonly name = "NotReadyError";
  constructor(
    message: string,
    /** The engine's last view of it, to record. */
    readonly view: ContainerView | undefined,
  ) {
    super(message);
  }
}

const LOG_LINES = 10;
const FIRST_POLL_MS = 100;
const MAX_POLL_MS = 500;
/** Timers may fire a little early: a container up this much less than the minimum has stayed up. */
const CLOCK_SLACK_MS = 5;

/** The longest a check of this timing can take to say healthy or unhealthy after a start, with slack. */
export function checkBudgetMs(check: HealthCheck): number {
  const s = check.start_period + (check.retries + 1) * (check.interval + check.timeout);
  return Math.ceil(s * 1000) + 2000;
}

/**
 * Waits until the container `first` shows (just started by the caller, or found running) counts
 * as started; answers the engine's last view of it. Throws NotReadyError with the reason, after
 * writing the reason and the container's last log lines to the action's log.
 */
export async function awaitReady(
  engine: Engine,
  container: { name: string; check: HealthCheck | null | undefined },
  first: ContainerView,
  opts: ReadinessOptions,
): Promise<ContainerView> {
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const began = opts.clock.now();
  const ownCheck = container.check && container.check.type !== "none" ? container.check : undefined;
  const deadline = began + Math.max(opts.minUpMs, ownCheck ? checkBudgetMs(ownCheck) : opts.maxWaitMs);
  const restartsBefore = first.restartCount;
  let lastExit: number | undefined;
  let view: ContainerView | undefined = first;
  let poll = FIRST_POLL_MS;
  let said = false;
  for (;;) {
    if (!view) return fail(`${container.name} vanished from its engine while it started`, undefined);
    if (view.exitCode !== undefined) lastExit = view.exitCode;
    const now = opts.clock.now();
    const restarts = view.restartCount - restartsBefore;
    if (restarts > 0 || view.state === "restarting") {
      const code =
        lastExit === undefined ? "" : `; last exit code ${lastExit} (${exitCodeMessage(lastExit)})`;
      return fail(
        `${container.name} is crash-looping: its engine restarted it ${Math.max(restarts, 1)} time(s) within ${seconds(now - began)} s of its start${code}`,
        view,
      );
    }
    if (!view.running) {
      if (view.exitCode === 0 && view.state === "exited") {
        await opts.log(`${container.name} ran to completion (exit code 0)`);
        return view;
      }
      const why = view.error || exitCodeMessage(view.exitCode ?? null) || `it is ${view.state}`;
      const oom = view.oomKilled ? " (killed for using too much memory)" : "";
      return fail(
        `${container.name} did not stay running: ${why}${oom}${view.exitCode === undefined ? "" : ` (exit code ${view.exitCode})`}`,
        view,
      );
    }
    const health = view.health;
    if (health) {
      if (health.status === "healthy") {
        if (said) await opts.log(`${container.name} is healthy`);
        return view;
      }
      if (health.status === "unhealthy") {
        const out = health.lastOutput ? `: ${health.lastOutput.split("\n").slice(-3).join(" / ")}` : "";
        return fail(
          `${container.name} is unhealthy: its health check failed ${health.failingStreak} time(s) in a row${out}`,
          view,
        );
      }
      if (!said) {
        said = true;
        await opts.log(`Waiting for ${container.name} to be healthy`);
      }
    } else if (now - (view.startedAt ?? began) >= opts.minUpMs - CLOCK_SLACK_MS) {
      return view;
    }
    if (now >= deadline) {
      return fail(
        `${container.name} is not healthy ${seconds(now - began)} s after its start (its health check still says ${healthView(health?.status)})`,
        view,
      );
    }
    const upFor = now - (view.startedAt ?? began);
    // Without a check one look once the minimum time has passed says it all: an exit or a restart
    // meanwhile shows then (the exit code, the engine's restart count).
    const wait = health ? poll : Math.max(opts.minUpMs - upFor, 10);
    await sleep(Math.min(wait, Math.max(deadline - now, 10)));
    if (opts.signal?.aborted) throw new Error(`the wait for ${container.name} was canceled`);
    poll = Math.min(poll * 2, MAX_POLL_MS);
    view = await engine.inspectContainer(view.id);
  }

  async function fail(reason: string, v: ContainerView | undefined): Promise<never> {
    await opts.log(reason);
    if (v) {
      const lines = await lastLines(engine, v.id);
      if (lines.length) {
        await opts.log(`Last ${lines.length} log line(s) of ${container.name}:`);
        for (const line of lines) await opts.log(`  ${line}`);
      }
    }
    throw new NotReadyError(reason, v);
  }
}

/**
 * awaitReady for a record's container that the runtime started, recording (`record`) what its
 * engine said last, its health or why it failed, whatever the outcome.
 */
export async function awaitStarted(
  engine: Engine,
  c: { name: string; spec: string },
  view: ContainerView,
  opts: ReadinessOptions,
  record: (last: ContainerView | undefined, now: number) => Promise<unknown>,
): Promise<void> {
  let last: ContainerView | undefined = view;
  try {
    last = await awaitReady(engine, { name: c.name, check: decodeSpec(c.spec).health_check }, view, opts);
  } catch (err) {
    if (err instanceof NotReadyError) last = err.view;
    throw err;
  } finally {
    await record(last, opts.clock.now());
  }
}

async function lastLines(engine: Engine, id: string): Promise<string[]> {
  const out: string[] = [];
  try {
    for await (const l of engine.logs(id, { tail: LOG_LINES, follow: false }))
      out.push(l.line.replace(/\r?\n$/, ""));
  } catch {
    // The logs are a help, not the reason: an engine that cannot give them leaves them out.
  }
  return out.slice(-LOG_LINES);
}

const seconds = (ms: number) => (ms / 1000).toFixed(1);
