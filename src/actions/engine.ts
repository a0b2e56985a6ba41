// The action engine (CONTRACT §7): every platform call is recorded as an action, and
// asynchronous operations run as registered action kinds made of idempotent steps.
//
// Durability: an async action row is written before the 202 is sent. Workers claim actions
// with a lease that a heartbeat renews; a lapsed lease (the worker died) makes the action
// claimable again and it resumes at the step it was on. Every step has a timeout, and an
// action interrupted too many times is failed with a log line, so nothing stays In progress.
//
// Here: recording, cancel and retry, and the workers that claim actions. A claimed action's steps
// run in execute.ts, its log lines are written by action-log.ts, the kinds' types are in types.ts.
import { randomUUID } from "node:crypto";
import { type BodyCheck, bodyCheck } from "../contract/check.ts";
import { ApiError, conflict, VersionConflict } from "../domain/errors.ts";
import { actionEnded } from "../domain/states.ts";
import { paramsOf } from "../store/codec.ts";
import type { ActionRow, Store } from "../store/store.ts";
import { ActionLogs } from "./action-log.ts";
import { type Execution, executeAction } from "./execute.ts";
import type { ActionEngineOptions, ActionKind, CallMeta, StepContext } from "./types.ts";

// The states are a domain table (the dashboard and the actions list filter share it).
export { ACTION_STATES, type ActionState } from "../domain/states.ts";

const POLL_BACKOFF_MAX = 8;
/**
 * Actions run at once by one worker. Their steps mostly wait for engines, so many services
 * started together progress together instead of queueing behind a few.
 */
const DEFAULT_CONCURRENCY = 32;

/** A synchronous call's action: what the call did, recorded as it ends. */
export interface SyncCall {
  uuid: string;
  namespace: string;
  object: string;
  name: string;
  meta: CallMeta;
  state: "Success" | "Failed";
  logLine?: string;
}

export class ActionEngine {
  private readonly kinds = new Map<string, ActionKind<never>>();
  private readonly paramChecks = new Map<string, BodyCheck<unknown>>();
  private readonly inFlight = new Map<string, AbortController>();
  /** The objects of the actions this process runs now, with how many run on each. */
  private readonly heldObjects = new Map<string, number>();
  private readonly instanceId: string;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private stopped = true;
  private scanning = false;
  private rescan = false;
  private readonly idleWaiters = new Set<() => void>();
  /** The actions' logs (their lines batched across actions). */
  private readonly logs: ActionLogs;
  /** What a claimed action's run needs of this engine (execute.ts). */
  private readonly execution: Execution;
  /** Polls in a row that found nothing (the back-off of the safety poll). */
  private idlePolls = 0;

  constructor(private readonly opts: ActionEngineOptions) {
    this.instanceId = opts.instanceId ?? randomUUID();
    this.logs = new ActionLogs(opts.store, opts.clock);
    this.execution = {
      opts,
      instanceId: this.instanceId,
      kinds: this.kinds,
      paramProblem: (kind, params) => this.paramProblem(kind, params),
      context: <P>(action: ActionRow, signal: AbortSignal) => this.context<P>(action, signal),
    };
  }

  /** Whether workers claim actions now (readiness). */
  get running(): boolean {
    return !this.stopped;
  }

  register<P>(kind: ActionKind<P>): void {
    if (this.kinds.has(kind.kind)) throw new Error(`action kind ${kind.kind} registered twice`);
    if (typeof kind.params !== "object" || kind.params === null)
      throw new Error(`action kind ${kind.kind} declares no schema for its parameters`);
    this.kinds.set(kind.kind, kind as ActionKind<never>);
    this.paramChecks.set(kind.kind, bodyCheck(kind.params));
  }

  /** What is wrong with parameters for a kind, in one sentence; undefined when they fit. */
  /**
   * Whether an action this process runs now works on one of `objects` (URIs), from its own
   * bookkeeping, without a read. Such an action is active in the store too (Store.activeActionOn),
   * so whoever leaves busy objects alone may skip these without asking the store.
   */
  runsOnAny(objects: readonly string[]): boolean {
    if (this.heldObjects.size === 0) return false;
    return objects.some((o) => this.heldObjects.has(o));
  }

  private paramProblem(kind: string, params: unknown): string | undefined {
    const problems = this.paramChecks.get(kind)?.problems(params) ?? [];
    if (problems.length === 0) return undefined;
    const list = problems.map((p) => `${p.field} ${p.problem}`).join("; ");
    return `the parameters of action kind ${kind} do not fit its schema: ${list}`;
  }

  private get store(): Store {
    return this.opts.store;
  }

  // ---- recording -----------------------------------------------------------------------------

  /** Records a synchronous call, already finished (in a transaction of its own). */
  async recordSync(input: SyncCall): Promise<ActionRow> {
    return this.store.transaction((tx) => this.recordSyncIn(tx, input));
  }

  /**
   * Records a synchronous call, already finished, in the caller's transaction: a call that writes
   * records its action with its write, so the action commits (or rolls back) with it.
   */
  async recordSyncIn(tx: Store, input: SyncCall): Promise<ActionRow> {
    const now = this.opts.clock.now();
    const row = await tx.actions.insertAction({
      uuid: input.uuid,
      namespace: input.namespace,
      object: input.object,
      action: input.name,
      kind: null,
      params: null,
      method: input.meta.method,
      path: input.meta.path,
      user: input.meta.user,
      user_agent: input.meta.userAgent,
      ip: input.meta.ip,
      location: "",
      start_date: now,
      end_date: now,
      state: input.state,
      is_user_action: input.meta.isUserAction === false ? 0 : 1,
    });
    if (input.logLine) await tx.actions.appendActionLog(row.uuid, now, input.logLine);
    tx.whenCommitted(() => this.opts.onEnded?.("call", row.state, 0));
    return row;
  }

  /**
   * Marks a synchronous call recorded as a success with its write (recordSyncIn) as failed: what
   * the call did after its write's commit failed, and its answer is an error.
   */
  async failRecordedCall(uuid: string, logLine: string): Promise<void> {
    const now = this.opts.clock.now();
    await this.store.retrying(async (tx) => {
      const a = await tx.actions.findAction(uuid);
      if (!a || a.state === "Failed") return;
      await tx.actions.updateAction(a, { state: "Failed", end_date: now });
      await tx.actions.appendActionLog(uuid, now, logLine);
    });
  }

  /**
   * Records an asynchronous operation and queues it: In progress when the object is free,
   * Pending behind the action that holds it. Runs `prepare` in the same transaction; call it
   * inside the caller's transaction so the object's transitional state commits with the action.
   */
  async enqueue<P>(
    tx: Store,
    input: {
      uuid?: string;
      kind: string;
      params: P;
      namespace: string;
      object: string;
      meta: CallMeta;
      /** The object as the caller just read it (the kind's `prepare` may start from it). */
      read?: unknown;
      /** Told the object as the kind's `prepare` wrote it. */
      prepared?: (object: unknown) => void;
    },
  ): Promise<ActionRow> {
    const kind = this.kinds.get(input.kind) as ActionKind<P> | undefined;
    if (!kind) throw new Error(`unknown action kind ${input.kind}`);
    // The caller built these parameters: a mismatch is a bug of the caller, never the user's.
    const wrong = this.paramProblem(kind.kind, input.params);
    if (wrong) throw new Error(wrong);
    const row = await tx.transaction(async (t) => {
      const written = await kind.prepare?.(t, input.params, input.object, input.read);
      if (written !== undefined) input.prepared?.(written);
      const busy = await t.actions.busyOn(input.object);
      const now = this.opts.clock.now();
      // The replica that accepted the request runs it (its log and engine connections are here):
      // the action is reserved for this worker for one lease; were it to die first, the
      // reservation lapses like any lease and another replica takes the action.
      const reserve = !busy && !this.stopped;
      const action = await t.actions.insertAction(
        {
          uuid: input.uuid ?? randomUUID(),
          namespace: input.namespace,
          object: input.object,
          action: kind.name,
          kind: kind.kind,
          params: JSON.stringify(input.params ?? null),
          method: input.meta.method,
          path: input.meta.path,
          user: input.meta.user,
          user_agent: input.meta.userAgent,
          ip: input.meta.ip,
          location: "",
          start_date: now,
          end_date: null,
          state: busy ? "Pending" : "In progress",
          is_user_action: input.meta.isUserAction === false ? 0 : 1,
        },
        reserve ? { owner: this.instanceId, until: now + this.opts.leaseMs } : undefined,
      );
      if (busy)
        await t.actions.appendActionLog(
          action.uuid,
          now,
          `Waiting for action ${busy.uuid} on the same object`,
        );
      return action;
    });
    this.wake();
    return row;
  }

  // ---- cancel and retry ----------------------------------------------------------------------

  async cancel(uuid: string): Promise<ActionRow> {
    const now = () => this.opts.clock.now();
    let from: string | undefined;
    const row = await this.store.mutate(
      "action",
      uuid,
      (a): Partial<ActionRow> => {
        from = a.state;
        if (a.state === "Pending") return { state: "Canceled", end_date: now() };
        if (a.state === "In progress") return { state: "Canceling" };
        throw conflict(`action is ${a.state}; cancel is allowed in Pending, In progress`, "invalid_state");
      },
      {
        after: async (tx, _a, r) => {
          const line =
            r.state === "Canceled"
              ? "Canceled before it started"
              : "Cancel requested; stopping after the current step";
          await tx.actions.appendActionLog(uuid, now(), line);
        },
      },
    );
    if (!row) throw new ApiError("not_found", "not_found", "No such action.");
    if (from === "Pending") {
      await this.finishCanceledPending(row);
      this.wake();
    }
    return row;
  }

  /** A Pending action never ran, but its `prepare` may have moved the object: let the kind settle it. */
  private async finishCanceledPending(row: ActionRow): Promise<void> {
    const kind = row.kind ? this.kinds.get(row.kind) : undefined;
    if (!kind?.finish) return;
    const ctx = this.context(row, new AbortController().signal);
    await kind.finish(ctx as StepContext<never>, "Canceled").catch((err) => this.opts.onError?.(err));
  }

  /** Repeats a finished asynchronous action's operation as a new action (with `newUuid` when given). */
  async retry(uuid: string, meta: CallMeta, newUuid?: string): Promise<ActionRow> {
    const a = await this.store.actions.findAction(uuid);
    if (!a) throw new ApiError("not_found", "not_found", "No such action.");
    if (!a.kind || !this.kinds.has(a.kind)) {
      throw conflict(
        `action "${a.action}" is ${a.state} and was a synchronous call; retry is allowed only for asynchronous actions in Success, Failed, Canceled`,
        "not_retriable",
      );
    }
    if (!actionEnded(a.state)) {
      throw conflict(`action is ${a.state}; retry is allowed in Success, Failed, Canceled`, "invalid_state");
    }
    const params = paramsOf(a);
    const wrong = this.paramProblem(a.kind, params);
    if (wrong) throw conflict(`action "${a.action}" cannot be retried: ${wrong}`, "not_retriable");
    return this.store.transaction((tx) =>
      this.enqueue(tx, {
        uuid: newUuid,
        kind: a.kind!,
        params,
        namespace: a.namespace,
        object: a.object,
        meta,
      }),
    );
  }

  canBeCanceled(a: ActionRow): boolean {
    return a.kind !== null && (a.state === "Pending" || a.state === "In progress");
  }

  canBeRetried(a: ActionRow): boolean {
    return a.kind !== null && this.kinds.has(a.kind) && actionEnded(a.state);
  }

  // ---- workers -------------------------------------------------------------------------------

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.idlePolls = 0;
    // An action recorded inside a caller's transaction is visible only once that commits: the
    // commit of an asynchronous action (one with a kind) in this process, or another replica's
    // notification, wakes the workers. A synchronous call's record (every PATCH leaves one) has
    // nothing to run and wakes nothing.
    const local = this.store.onCommittedWrites((type, written) => {
      if (type === "action" && written.some((w) => (w.row as ActionRow).kind !== null)) this.wake();
    });
    const remote = this.store.onRemoteChange((type) => {
      if (type === "action" || type === "") this.wake();
    });
    this.unsubscribe = () => {
      local();
      remote();
    };
    this.schedulePoll();
    this.wake();
  }

  /**
   * The poll is only a safety net (new actions wake the workers in this process, and other
   * replicas' through their notifications): while it finds nothing to do it backs off, up to
   * POLL_BACKOFF_MAX times `pollMs`; anything found resets it.
   */
  private schedulePoll(): void {
    if (this.stopped) return;
    const delay = this.opts.pollMs * Math.min(POLL_BACKOFF_MAX, 2 ** this.idlePolls);
    this.timer = setTimeout(() => {
      this.wake();
      this.schedulePoll();
    }, delay);
    this.timer.unref();
  }

  /**
   * Stops claiming work. Running actions get `graceMs` to finish; the rest are aborted between
   * steps and their leases given up at once, so another replica resumes them without waiting for
   * the leases to lapse (the step they were on runs again: steps are idempotent).
   */
  async stop(opts: { graceMs?: number } = {}): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    if (this.timer) clearTimeout(this.timer);
    const graceEnd = Date.now() + (opts.graceMs ?? 0);
    while (this.inFlight.size > 0 && Date.now() < graceEnd) await sleep(20);
    for (const c of this.inFlight.values()) c.abort(new Error("server shutting down"));
    const deadline = Date.now() + 5000;
    while (this.inFlight.size > 0 && Date.now() < deadline) await sleep(20);
    if (opts.graceMs !== undefined) {
      await this.store.actions.releaseActionLeases(this.instanceId).catch((err) => this.opts.onError?.(err));
    }
  }

  /** Resolves once no action is running or claimable (tests and graceful shutdown). */
  async idle(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.inFlight.size === 0 && (await this.store.actions.unfinishedActionCount()) === 0) return;
      await new Promise<void>((r) => {
        this.idleWaiters.add(r);
        setTimeout(r, 50);
      });
    }
    throw new Error("actions still running");
  }

  wake(): void {
    if (this.stopped) return;
    if (this.scanning) {
      this.rescan = true;
      return;
    }
    this.scanning = true;
    void this.scan()
      .catch((err) => this.opts.onError?.(err))
      .finally(() => {
        this.scanning = false;
        if (this.rescan) {
          this.rescan = false;
          this.wake();
        }
      });
  }

  private async scan(): Promise<void> {
    const free = (this.opts.concurrency ?? DEFAULT_CONCURRENCY) - this.inFlight.size;
    if (free <= 0) return;
    const candidates = await this.store.actions.claimableActions(this.opts.clock.now(), free * 2, {
      owner: this.instanceId,
      running: [...this.inFlight.keys()],
    });
    this.idlePolls = candidates.length === 0 && this.inFlight.size === 0 ? this.idlePolls + 1 : 0;
    for (const c of candidates) {
      if (this.inFlight.size >= (this.opts.concurrency ?? DEFAULT_CONCURRENCY)) break;
      if (this.inFlight.has(c.uuid)) continue;
      const claimed = await this.claim(c);
      if (claimed) void this.run(claimed);
    }
  }

  private async claim(a: ActionRow): Promise<ActionRow | undefined> {
    const now = this.opts.clock.now();
    try {
      return await this.store.transaction(async (tx) => {
        const r = await tx.actions.updateAction(a, {
          state: a.state === "Pending" ? "In progress" : a.state,
          lease_owner: this.instanceId,
          lease_until: now + this.opts.leaseMs,
          attempts: a.attempts + 1,
        });
        if (a.attempts > 0) {
          await tx.actions.appendActionLog(
            a.uuid,
            now,
            `Resuming at step ${a.step + 1} after the worker running it stopped (attempt ${a.attempts + 1})`,
          );
        }
        return r;
      });
    } catch (err) {
      if (err instanceof VersionConflict) return undefined; // another worker won
      throw err;
    }
  }

  private context<P>(action: ActionRow, signal: AbortSignal): StepContext<P> {
    return {
      action,
      params: paramsOf(action) as P,
      store: this.store,
      signal,
      log: this.logs.writer(action.uuid),
    };
  }

  private async run(claimed: ActionRow): Promise<void> {
    const controller = new AbortController();
    this.inFlight.set(claimed.uuid, controller);
    this.heldObjects.set(claimed.object, (this.heldObjects.get(claimed.object) ?? 0) + 1);
    const heartbeat = setInterval(
      () => {
        void this.heartbeat(claimed.uuid).catch((err) => this.opts.onError?.(err));
      },
      Math.max(50, Math.floor(this.opts.leaseMs / 3)),
    );
    heartbeat.unref();
    try {
      await executeAction(this.execution, claimed, controller.signal);
    } catch (err) {
      this.opts.onError?.(err);
    } finally {
      clearInterval(heartbeat);
      this.inFlight.delete(claimed.uuid);
      const held = (this.heldObjects.get(claimed.object) ?? 1) - 1;
      if (held > 0) this.heldObjects.set(claimed.object, held);
      else this.heldObjects.delete(claimed.object);
      for (const w of this.idleWaiters) w();
      this.idleWaiters.clear();
      this.wake();
    }
  }

  private async heartbeat(uuid: string): Promise<void> {
    const a = await this.store.actions.findAction(uuid);
    if (!a || a.lease_owner !== this.instanceId || actionEnded(a.state)) return;
    try {
      await this.store.actions.updateAction(a, { lease_until: this.opts.clock.now() + this.opts.leaseMs });
    } catch (err) {
      if (!(err instanceof VersionConflict)) throw err; // a concurrent cancel bumped the version; next beat renews
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
