// Failed sign-in limits for password checks (Basic with a password on the accounts API, and the
// password grant of POST /oauth/token), over a fixed window: per username-and-address pair, and
// per client address. There is deliberately no limit per username alone: it would let anyone
// lock a user out from anywhere. A guesser is held to `maxFailuresPerUser` tries per address and
// user, and `maxFailuresPerAddress` tries per address over all users.
//
// Where the counters live is behind `FailureCounters`: in memory for a single process (SQLite), in
// the database when replicas share PostgreSQL, so that the limits hold across every replica behind
// a load balancer instead of multiplying by their number.
import { createHash } from "node:crypto";
import { ApiError } from "../domain/errors.ts";
import type { Clock } from "../domain/time.ts";
import type { Store } from "../store/store.ts";

export interface LoginLimits {
  /** Failures allowed per username from one address. */
  maxFailuresPerUser: number;
  maxFailuresPerAddress: number;
  windowS: number;
}

export interface Counter {
  failures: number;
  resetAt: number;
}

/** Storage of failure counters over fixed windows. */
export interface FailureCounters {
  /**
   * Counts one failure of `key` unless it already has `max` in its running window, in one step
   * (parallel guesses cannot all pass the check before any is counted). When refused, says when
   * the window ends.
   */
  tryCount(
    key: string,
    max: number,
    now: number,
    windowMs: number,
  ): Promise<{ counted: true } | { counted: false; resetAt: number }>;
  /**
   * Adds `delta`; a key without a running window starts one of `windowMs`. Never below 0, and a
   * negative delta never starts a window.
   */
  add(key: string, delta: number, now: number, windowMs: number): Promise<void>;
  delete(key: string): Promise<void>;
}

/** Above this many counters, expired ones are dropped, then the oldest (memory stays bounded). */
const MAX_COUNTERS = 50_000;

export function tooManyFailures(retryAfterS: number): ApiError {
  return new ApiError(
    "rate_limited",
    "rate_limited",
    `Too many failed sign-ins; try again in ${retryAfterS} seconds.`,
    undefined,
    { "Retry-After": String(retryAfterS) },
  );
}

/** Counters of one process (memory stays bounded: expired, then oldest, counters are dropped). */
export class MemoryCounters implements FailureCounters {
  private readonly counters = new Map<string, Counter>();

  async tryCount(key: string, max: number, now: number, windowMs: number) {
    // No await before the count: the check and the count happen in one turn of the event loop.
    const c = this.counters.get(key);
    if (c && c.resetAt > now && c.failures >= max) return { counted: false as const, resetAt: c.resetAt };
    this.addNow(key, 1, now, windowMs);
    return { counted: true as const };
  }

  async add(key: string, delta: number, now: number, windowMs: number): Promise<void> {
    this.addNow(key, delta, now, windowMs);
  }

  private addNow(key: string, delta: number, now: number, windowMs: number): void {
    let c = this.counters.get(key);
    if (!c || c.resetAt <= now) {
      if (delta < 0) return;
      c = { failures: 0, resetAt: now + windowMs };
      this.counters.delete(key);
      this.counters.set(key, c);
      this.prune(now);
    }
    c.failures = Math.max(0, c.failures + delta);
  }

  async delete(key: string): Promise<void> {
    this.counters.delete(key);
  }

  private prune(now: number): void {
    if (this.counters.size <= MAX_COUNTERS) return;
    for (const [k, c] of this.counters) if (c.resetAt <= now) this.counters.delete(k);
    // Map iteration is insertion order: the first keys are the oldest windows.
    for (const k of this.counters.keys()) {
      if (this.counters.size <= MAX_COUNTERS) break;
      this.counters.delete(k);
    }
  }
}

/**
 * Counters every replica sharing the database sees (each change is one atomic statement). Keys are
 * stored as their SHA-256: a key holds a NUL separator and whatever username a client sent, which
 * PostgreSQL's text refuses, and the table then names no user or address in clear.
 */
export class DatabaseCounters implements FailureCounters {
  constructor(private readonly store: Store) {}

  private static row(key: string): string {
    return createHash("sha256").update(key).digest("hex");
  }

  async tryCount(key: string, max: number, now: number, windowMs: number) {
    const k = DatabaseCounters.row(key);
    if (await this.store.replicas.countLoginFailure(k, max, now, now + windowMs))
      return { counted: true as const };
    const row = await this.store.replicas.findLoginFailures(k);
    return { counted: false as const, resetAt: row?.reset_at ?? now + 1000 };
  }

  async add(key: string, delta: number, now: number, windowMs: number): Promise<void> {
    await this.store.replicas.addLoginFailures(DatabaseCounters.row(key), delta, now, now + windowMs);
    // Ended windows are swept now and then rather than on every call.
    if (delta > 0 && Math.random() < 0.01) await this.store.replicas.pruneLoginFailures(now);
  }

  async delete(key: string): Promise<void> {
    await this.store.replicas.deleteLoginFailures(DatabaseCounters.row(key));
  }
}

export class LoginLimiter {
  constructor(
    private readonly limits: LoginLimits,
    private readonly clock: Clock,
    private readonly counters: FailureCounters = new MemoryCounters(),
  ) {}

  /**
   * Runs a password check under the limits. `attempt` answers undefined for wrong credentials.
   * Throws 429 (with Retry-After) while this username from this address, or the address, is locked out, without
   * running the check. The failure is counted before the check runs, so that many parallel
   * guesses cannot all slip in before the first one is counted; a success takes it back.
   */
  async guard<T>(
    username: string,
    address: string,
    attempt: () => Promise<T | undefined>,
  ): Promise<T | undefined> {
    const userKey = `user:${address}\u0000${username}`;
    const addressKey = `address:${address}`;
    const now = this.clock.now();
    const windowMs = this.limits.windowS * 1000;
    const user = await this.counters.tryCount(userKey, this.limits.maxFailuresPerUser, now, windowMs);
    if (!user.counted) throw tooManyFailures(secondsUntil(user.resetAt, now));
    const addr = await this.counters.tryCount(addressKey, this.limits.maxFailuresPerAddress, now, windowMs);
    if (!addr.counted) {
      await this.count(userKey, -1);
      throw tooManyFailures(secondsUntil(addr.resetAt, now));
    }
    let result: T | undefined;
    try {
      result = await attempt();
    } catch (err) {
      // An internal error is not a wrong password: do not hold it against the caller.
      await this.count(userKey, -1);
      await this.count(addressKey, -1);
      throw err;
    }
    if (result !== undefined) {
      // The right password clears the user's failures from this address; the address keeps its count, so that one
      // known account cannot be used to reset an address that is guessing at others.
      await this.counters.delete(userKey);
      await this.count(addressKey, -1);
    }
    return result;
  }

  private async count(key: string, delta: number): Promise<void> {
    await this.counters.add(key, delta, this.clock.now(), this.limits.windowS * 1000);
  }
}

function secondsUntil(resetAt: number, now: number): number {
  return Math.max(1, Math.ceil((resetAt - now) / 1000));
}

export interface MailLimits {
  /** Confirmation messages one user may have sent per window, whatever the addresses. */
  maxPerUser: number;
  /** Confirmation messages one mailbox may receive per window, whichever users asked. */
  maxPerAddress: number;
  windowS: number;
}

/**
 * The mailbox an address reaches, for counting: lower case, without a `+tag` on the local part
 * (most mail servers deliver `victim+1@…` and `Victim@…` to the same person).
 */
export function mailboxOf(address: string): string {
  const at = address.lastIndexOf("@");
  const local = address.slice(0, at).split("+")[0]!;
  return `${local}@${address.slice(at + 1)}`.toLowerCase();
}

/**
 * Limits on confirmation messages (POST …/emails/verify/), so that the endpoint cannot be used to
 * send mail to third parties in bulk: per user and per receiving mailbox, over a fixed window, in
 * the same counters as failed sign-ins (shared by replicas on PostgreSQL). A message that could not
 * be sent is not counted.
 */
export class MailLimiter {
  constructor(
    private readonly limits: MailLimits,
    private readonly clock: Clock,
    private readonly counters: FailureCounters = new MemoryCounters(),
  ) {}

  async guard<T>(
    user: { id: number; username: string },
    address: string,
    send: () => Promise<T>,
  ): Promise<T> {
    const userKey = `mail-user:${user.id}`;
    const addressKey = `mail-to:${mailboxOf(address)}`;
    const now = this.clock.now();
    const windowMs = this.limits.windowS * 1000;
    const per = describeWindow(this.limits.windowS);
    const mine = await this.counters.tryCount(userKey, this.limits.maxPerUser, now, windowMs);
    if (!mine.counted) {
      const wait = secondsUntil(mine.resetAt, now);
      throw mailLimited(
        `${user.username} has asked for the most confirmation messages allowed (${this.limits.maxPerUser} ${per}); try again in ${wait} seconds.`,
        wait,
        `at most ${this.limits.maxPerUser} confirmation messages per user ${per}`,
      );
    }
    const to = await this.counters.tryCount(addressKey, this.limits.maxPerAddress, now, windowMs);
    if (!to.counted) {
      await this.counters.add(userKey, -1, now, windowMs);
      const wait = secondsUntil(to.resetAt, now);
      throw mailLimited(
        `${address} has been sent the most confirmation messages allowed (${this.limits.maxPerAddress} ${per}); try again in ${wait} seconds.`,
        wait,
        `at most ${this.limits.maxPerAddress} confirmation messages per address ${per}`,
      );
    }
    try {
      return await send();
    } catch (err) {
      await this.counters.add(userKey, -1, this.clock.now(), windowMs);
      await this.counters.add(addressKey, -1, this.clock.now(), windowMs);
      throw err;
    }
  }
}

function describeWindow(windowS: number): string {
  if (windowS === 3600) return "per hour";
  return windowS % 60 === 0 ? `per ${windowS / 60} minutes` : `per ${windowS} seconds`;
}

function mailLimited(message: string, retryAfterS: number, problem: string): ApiError {
  return new ApiError("rate_limited", "rate_limited", message, [{ field: "email", problem }], {
    "Retry-After": String(retryAfterS),
  });
}
