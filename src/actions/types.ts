// The action engine's types (CONTRACT §7): action kinds and their steps, the metadata of a call,
// and the engine's options.
import type { TSchema } from "typebox";
import type { Clock } from "../domain/time.ts";
import type { ActionRow, Store } from "../store/store.ts";

export type Outcome = "Success" | "Failed" | "Canceled";

export interface StepContext<P> {
  action: ActionRow;
  params: P;
  store: Store;
  signal: AbortSignal;
  log(line: string): Promise<void>;
}

/**
 * Thrown by a step that stopped because its action is being canceled, after leaving its object
 * consistent (a rolling redeploy rolled back): the action ends Canceled, its message logged.
 */
export class StepCanceled extends Error {
  override readonly name = "StepCanceled";
}

export interface Step<P> {
  name: string;
  timeoutMs?: number;
  run(ctx: StepContext<P>): Promise<void>;
}

export interface ActionKind<P = unknown> {
  /** Registry key, stored with the action, e.g. `service.start`. */
  kind: string;
  /** Readable action name shown in the audit log, e.g. `Service Start`. */
  name: string;
  /**
   * The schema of the kind's parameters (whose static type is `P`). Checked when an action is
   * enqueued (a mismatch there is a programming error: it throws) and when a stored action is run
   * or retried (a mismatch ends it Failed, or refuses the retry, with a message).
   */
  params: TSchema;
  /**
   * Checks that the operation is allowed now and moves the object to its transitional state.
   * Runs in the transaction that records the action (API call and retry alike); throwing refuses the call.
   * `read`: the object as the caller just read it, when it did (a kind may start from it rather than
   * read it again: its write checks the version). Answers the object as written, when it has one.
   */
  prepare?(tx: Store, params: P, object: string, read?: unknown): Promise<unknown>;
  steps: Step<P>[];
  /** Leaves the object in a truthful state once the action ended, whatever the outcome. */
  finish?(ctx: StepContext<P>, outcome: Outcome): Promise<void>;
}

export interface CallMeta {
  method: string;
  path: string;
  user: string;
  userAgent: string;
  ip: string;
  isUserAction?: boolean;
}

export interface ActionEngineOptions {
  store: Store;
  clock: Clock;
  leaseMs: number;
  stepTimeoutMs: number;
  pollMs: number;
  maxAttempts: number;
  concurrency?: number;
  /** This worker's name in leases (the replica id); random by default. */
  instanceId?: string;
  /** Called when an action recorded or run here ends (metrics); `kind` is "call" for synchronous calls. */
  onEnded?(kind: string, outcome: string, durationMs: number): void;
  onError?(err: unknown): void;
}
