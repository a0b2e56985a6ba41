// Dashboard sign-in sessions (issue 12). A browser signs in with username and password and gets a
// random token in an HttpOnly cookie; the database keeps only the token's SHA-256. The session's
// CSRF token is derived from the session token (HMAC), so it needs no storage, cannot be guessed
// without the cookie, and dies with the session.
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { ApiError } from "../domain/errors.ts";
import type { Clock } from "../domain/time.ts";
import { ALL_SCOPES, type IdentityService, type Principal } from "../identity/service.ts";
import type { Store } from "../store/store.ts";
import type { LoginLimiter } from "./limiter.ts";

export interface SignedIn {
  token: string;
  csrfToken: string;
  expiresMs: number;
  principal: Principal;
}

export interface SessionCheck {
  principal: Principal;
  csrfToken: string;
  expiresMs: number;
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/** The CSRF token of a session: a keyed hash of its token, so the server can recompute it. */
export function csrfTokenOf(sessionToken: string): string {
  return createHmac("sha256", sessionToken).update("berth-csrf").digest("base64url");
}

export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export class SessionService {
  constructor(
    private readonly o: {
      store: Store;
      identity: IdentityService;
      clock: Clock;
      logins: LoginLimiter;
      ttlS: number;
    },
  ) {}

  /**
   * Signs in with a password (an API key is not a password here: keys are for programs). Failed
   * attempts count against the same limits as every password sign-in; 429 while locked out.
   */
  async signIn(input: {
    username: string;
    password: string;
    address: string;
    userAgent: string;
  }): Promise<SignedIn> {
    const principal = await this.o.logins.guard(input.username, input.address, async () => {
      const p = await this.o.identity.authenticateBasic(input.username, input.password, {
        allowPassword: true,
      });
      return p?.via === "password" ? p : undefined;
    });
    if (!principal)
      throw new ApiError("unauthorized", "invalid_credentials", "The username or password is wrong.");
    const now = this.o.clock.now();
    await this.o.store.accounts.purgeExpiredTokens(now);
    const token = randomBytes(32).toString("base64url");
    const expiresMs = now + this.o.ttlS * 1000;
    await this.o.store.accounts.insertSession({
      token_hash: sha256(token),
      user_id: principal.user.id,
      created: now,
      expires: expiresMs,
      user_agent: input.userAgent.slice(0, 500),
    });
    return {
      token,
      csrfToken: csrfTokenOf(token),
      expiresMs,
      principal: { ...principal, via: "session", sessionHash: sha256(token), expiresMs },
    };
  }

  /** The session of a cookie token, or undefined when unknown, expired or its user is inactive. */
  async check(token: string): Promise<SessionCheck | undefined> {
    const row = await this.o.store.accounts.findSession(sha256(token));
    if (!row || row.expires <= this.o.clock.now()) return undefined;
    const user = await this.o.store.identity.findUserById(row.user_id);
    if (!user?.is_active) return undefined;
    return {
      principal: {
        user,
        via: "session",
        namespaceLimit: null,
        scopes: ALL_SCOPES,
        sessionHash: row.token_hash,
        expiresMs: row.expires,
      },
      csrfToken: csrfTokenOf(token),
      expiresMs: row.expires,
    };
  }

  /** Sign-out: the token stops working everywhere at once (API, streams, on every replica). */
  async signOut(token: string): Promise<void> {
    await this.o.store.accounts.deleteSession(sha256(token));
  }

  /** Sign-out everywhere: every session of the user ends at once; how many ended. */
  async signOutEverywhere(userId: number): Promise<number> {
    return this.o.store.accounts.deleteSessionsOf(userId);
  }
}
