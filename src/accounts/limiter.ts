// Failed sign-in limits for password checks (Basic with a password on the accounts API, and the
// password grant of POST /oauth/token): per username and per client address, over a fixed window.
//
// The counters live in memory, per process: with several Berth processes behind one address
// (PostgreSQL scale-out) each counts on its own, so the effective limit is the configured one
// times the number of processes. That still bounds guessing to a small, fixed rate, and keeps a
// failed sign-in from costing a database write.
import { ApiError } from "../domain/errors.ts";
import type { Clock } from "../domain/time.ts";

export interface LoginLimits {
  maxFailuresPerUser: number;
  maxFailuresPerAddress: number;
  windowS: number;
}

interface Counter {
  failures: number;
  resetAt: number;
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

export class LoginLimiter {
  private readonly counters = new Map<string, Counter>();

  constructor(
    private readonly limits: LoginLimits,
    private readonly clock: Clock,
  ) {}

  /**
   * Runs a password check under the limits. `attempt` answers undefined for wrong credentials.
   * Throws 429 (with Retry-After) while the username or the address is locked out, without
   * running the check. The failure is counted before the check runs, so that many parallel
   * guesses cannot all slip in before the first one is counted; a success takes it back.
   */
  async guard<T>(
    username: string,
    address: string,
    attempt: () => Promise<T | undefined>,
  ): Promise<T | undefined> {
    const userKey = `user:${username}`;
    const addressKey = `address:${address}`;
    const wait = Math.max(
      this.retryAfterS(userKey, this.limits.maxFailuresPerUser),
      this.retryAfterS(addressKey, this.limits.maxFailuresPerAddress),
    );
    if (wait > 0) throw tooManyFailures(wait);
    this.count(userKey, 1);
    this.count(addressKey, 1);
    let result: T | undefined;
    try {
      result = await attempt();
    } catch (err) {
      // An internal error is not a wrong password: do not hold it against the caller.
      this.count(userKey, -1);
      this.count(addressKey, -1);
      throw err;
    }
    if (result !== undefined) {
      // The right password clears the user's failures; the address keeps its count, so that one
      // known account cannot be used to reset an address that is guessing at others.
      this.counters.delete(userKey);
      this.count(addressKey, -1);
    }
    return result;
  }

  /** Seconds until the key may try again; 0 when it may now. */
  private retryAfterS(key: string, max: number): number {
    const c = this.counters.get(key);
    const now = this.clock.now();
    if (!c || c.resetAt <= now || c.failures < max) return 0;
    return Math.max(1, Math.ceil((c.resetAt - now) / 1000));
  }

  private count(key: string, delta: number): void {
    const now = this.clock.now();
    let c = this.counters.get(key);
    if (!c || c.resetAt <= now) {
      if (delta < 0) return;
      c = { failures: 0, resetAt: now + this.limits.windowS * 1000 };
      this.counters.delete(key);
      this.counters.set(key, c);
      this.prune(now);
    }
    c.failures = Math.max(0, c.failures + delta);
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
