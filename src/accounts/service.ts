// The accounts API (spec accounts-api.md, CONTRACT §11): profiles, email addresses and their
// verification, and Bearer access tokens. Which account a caller may reach is decided by
// IdentityService.userForCaller (its own; any for admins; otherwise 404), which scopes it holds
// by the auth hook (scopes.ts).
import { createHash, randomBytes } from "node:crypto";
import { ApiError, conflict, invalidField, notFound } from "../domain/errors.ts";
import type { Clock } from "../domain/time.ts";
import type { IdentityService, Principal } from "../identity/service.ts";
import type { EmailRow, ProfilePatch } from "../store/accounts.ts";
import { type Store, UniqueViolation, type UserRow } from "../store/store.ts";
import type { LoginLimiter, MailLimiter } from "./limiter.ts";
import type { Outbox } from "./outbox.ts";
import { parseScopeParam } from "./scopes.ts";

/** The profile fields PATCH accepts (CONTRACT §11); any other field is refused. */
export const PATCHABLE_PROFILE_FIELDS = ["location", "profile_url", "company"] as const;

/**
 * An address: something@domain.tld, at most 254 characters, without spaces or the characters
 * that have a meaning in mail headers and SMTP commands (so it can be used in both verbatim).
 */
const EMAIL_RE = /^[^\s@<>()[\]\\,;:"]+@[^\s@<>()[\]\\,;:".]+(\.[^\s@<>()[\]\\,;:".]+)+$/;

/**
 * The stored form of an address: trimmed, domain in lower case (domains are case-insensitive;
 * the local part is left alone, as RFC 5321 asks). Undefined when it is not an address.
 */
export function normalizeEmail(value: string): string | undefined {
  const trimmed = value.trim();
  if (trimmed.length > 254 || !EMAIL_RE.test(trimmed)) return undefined;
  const at = trimmed.lastIndexOf("@");
  return trimmed.slice(0, at + 1) + trimmed.slice(at + 1).toLowerCase();
}

export function emailView(e: EmailRow) {
  return { email: e.email, verified: e.verified === 1, primary: e.primary === 1 };
}

/** A token endpoint refusal, shaped as RFC 6749 §5.2. */
export class OAuthError extends Error {
  constructor(
    readonly error: "invalid_request" | "invalid_grant" | "invalid_scope" | "unsupported_grant_type",
    readonly description: string,
  ) {
    super(description);
  }
}

function sha256(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** 256 bits of randomness, URL-safe. */
function newToken(): string {
  return randomBytes(32).toString("base64url");
}

export interface AccountsServiceOptions {
  store: Store;
  identity: IdentityService;
  clock: Clock;
  outbox: Outbox;
  logins: LoginLimiter;
  /** Confirmation messages per user and per mailbox. */
  mails: MailLimiter;
  publicUrl: string;
  tokenTtlS: number;
  emailTokenTtlS: number;
  /** Least time between two confirmation messages to one address; 0 = no limit. */
  verifyIntervalS: number;
  /** Unverified addresses a user may hold at once. */
  maxUnverifiedEmails: number;
}

export class AccountsService {
  constructor(private readonly o: AccountsServiceOptions) {}

  private get store() {
    return this.o.store.accounts;
  }

  // ---- access tokens ---------------------------------------------------------------------------

  /** The BearerVerifier of the auth hook: a live, unexpired token of an active user. */
  async verify(token: string): Promise<Principal | undefined> {
    const row = await this.store.findAccessToken(sha256(token));
    if (!row || row.expires <= this.o.clock.now()) return undefined;
    const user = await this.o.store.identity.findUserById(row.user_id);
    if (!user?.is_active) return undefined;
    return { user, via: "token", namespaceLimit: null, scopes: row.scopes.split(" ").filter(Boolean) };
  }

  /**
   * The password grant of POST /oauth/token (RFC 6749 §4.3). Throws OAuthError for the
   * refusals of §5.2, and 429 while the username or address is locked out.
   */
  async issueToken(
    params: Record<string, unknown>,
    address: string,
  ): Promise<{ access_token: string; token_type: "Bearer"; expires_in: number; scope: string }> {
    const str = (name: string): string | undefined => {
      const v = params[name];
      if (v === undefined || v === null) return undefined;
      if (typeof v !== "string") throw new OAuthError("invalid_request", `${name} must be a string.`);
      return v;
    };
    const grantType = str("grant_type");
    if (!grantType) throw new OAuthError("invalid_request", "grant_type is required.");
    if (grantType !== "password")
      throw new OAuthError("unsupported_grant_type", 'Only grant_type "password" is supported.');
    const username = str("username");
    const password = str("password");
    if (!username || password === undefined || password === "")
      throw new OAuthError("invalid_request", "username and password are required.");
    const scopeText = str("scope") ?? "";
    const parsed = parseScopeParam(scopeText);
    if ("unknown" in parsed)
      throw new OAuthError(
        "invalid_scope",
        `Unknown scope "${parsed.unknown}"; scopes are profile_read, profile_write, email_read, email_write.`,
      );
    if (parsed.scopes.length === 0)
      throw new OAuthError(
        "invalid_scope",
        "scope is required: one or more of profile_read, profile_write, email_read, email_write, separated by spaces.",
      );
    const principal = await this.o.logins.guard(username, address, () =>
      this.o.identity.authenticateBasic(username, password, { allowPassword: true }),
    );
    // A service key is confined to a namespace of the platform API: it may not mint account tokens.
    if (!principal || principal.namespaceLimit)
      throw new OAuthError("invalid_grant", "The username or password is wrong.");
    const now = this.o.clock.now();
    await this.store.purgeExpiredTokens(now);
    const token = newToken();
    await this.store.insertAccessToken({
      token_hash: sha256(token),
      user_id: principal.user.id,
      scopes: parsed.scopes.join(" "),
      created: now,
      expires: now + this.o.tokenTtlS * 1000,
    });
    return {
      access_token: token,
      token_type: "Bearer",
      expires_in: this.o.tokenTtlS,
      scope: parsed.scopes.join(" "),
    };
  }

  // ---- profile ---------------------------------------------------------------------------------

  async getProfile(p: Principal, username: string): Promise<UserRow> {
    return this.o.identity.userForCaller(p, username);
  }

  /**
   * Changes location, profile_url and company. Any other field is refused, all of them named,
   * before anything changes.
   */
  async updateProfile(p: Principal, username: string, body: Record<string, unknown>): Promise<UserRow> {
    const user = await this.o.identity.userForCaller(p, username);
    const refused = Object.keys(body).filter(
      (k) => !(PATCHABLE_PROFILE_FIELDS as readonly string[]).includes(k),
    );
    if (refused.length) {
      throw new ApiError(
        "bad_request",
        "invalid_field",
        `${refused.join(", ")} cannot be changed here; a profile accepts only ${PATCHABLE_PROFILE_FIELDS.join(", ")}.`,
        refused.map((field) => ({ field, problem: "cannot be changed through this API" })),
      );
    }
    const patch: ProfilePatch = {};
    for (const field of PATCHABLE_PROFILE_FIELDS) {
      const v = body[field];
      if (v === undefined) continue;
      if (typeof v !== "string") throw invalidField(field, "must be a string");
      patch[field] = v.trim();
    }
    if (patch.profile_url) {
      let ok = false;
      try {
        const u = new URL(patch.profile_url);
        ok = (u.protocol === "http:" || u.protocol === "https:") && u.hostname !== "";
      } catch {
        ok = false;
      }
      if (!ok) throw invalidField("profile_url", "must be an http:// or https:// URL (or empty)");
    }
    const updated = await this.store.updateProfile(user.id, patch);
    if (!updated) throw notFound("user");
    return updated;
  }

  // ---- email addresses -------------------------------------------------------------------------

  async listEmails(p: Principal, username: string): Promise<EmailRow[]> {
    const user = await this.o.identity.userForCaller(p, username);
    return this.store.listEmails(user.id);
  }

  /**
   * Adds an unverified, non-primary address; no message is sent (spec rule 1). A user holds at most
   * `maxUnverifiedEmails` unverified addresses (403 `too_many_unverified_emails`), so that the
   * per-address limit on confirmation messages cannot be walked around with ever new addresses.
   */
  async addEmail(p: Principal, username: string, value: string): Promise<EmailRow> {
    const user = await this.o.identity.userForCaller(p, username);
    const email = this.parseEmail(value);
    const duplicate = () => conflict(`${username} already has the address ${email}.`, "email_exists");
    if (await this.store.findEmail(user.id, value.trim())) throw duplicate();
    const row = { user_id: user.id, email, verified: 0, primary: 0, created: this.o.clock.now() };
    let added: boolean;
    try {
      added = await this.store.insertUnverifiedEmail(row, this.o.maxUnverifiedEmails);
    } catch (err) {
      if (err instanceof UniqueViolation) throw duplicate();
      throw err;
    }
    if (!added) {
      const max = this.o.maxUnverifiedEmails;
      throw new ApiError(
        "forbidden",
        "too_many_unverified_emails",
        `${username} already has ${max} unverified addresses, the most allowed; confirm or delete one before adding another.`,
        [{ field: "email", problem: `at most ${max} unverified addresses per user` }],
      );
    }
    return row;
  }

  async deleteEmail(p: Principal, username: string, value: string): Promise<void> {
    const user = await this.o.identity.userForCaller(p, username);
    const row = await this.findAddress(user, value);
    if (row.primary === 1 || !(await this.store.deleteNonPrimaryEmail(user.id, row.email))) {
      throw conflict(
        `${row.email} is the primary address of ${user.username} and cannot be deleted; make another verified address primary first.`,
        "primary_email",
      );
    }
  }

  /** Makes a verified address primary; the profile's `email` follows. */
  async makePrimary(p: Principal, username: string, value: string): Promise<EmailRow> {
    const user = await this.o.identity.userForCaller(p, username);
    const row = await this.findAddress(user, value);
    if (row.primary === 1) return row;
    if (row.verified !== 1 || !(await this.store.makePrimary(user.id, row.email))) {
      throw conflict(
        `${row.email} is not verified; verify it (POST …/emails/verify/) before making it primary.`,
        "email_unverified",
      );
    }
    return { ...row, primary: 1 };
  }

  /**
   * Issues a one-time confirmation token for an unverified address and hands it to the outbox.
   * Earlier tokens for the address stop working. A second request within verifyIntervalS is 429,
   * and so is one past the hourly limits per user and per receiving mailbox (`MailLimiter`), so the
   * endpoint cannot be used to flood someone's mailbox or to mail many third parties.
   */
  async sendVerification(p: Principal, username: string, value: string): Promise<EmailRow> {
    const user = await this.o.identity.userForCaller(p, username);
    const row = await this.findAddress(user, value);
    if (row.verified === 1) throw conflict(`${row.email} is already verified.`, "already_verified");
    const now = this.o.clock.now();
    const last = await this.store.latestEmailToken(user.id, row.email);
    const nextAt = last ? last.created + this.o.verifyIntervalS * 1000 : 0;
    if (nextAt > now) {
      const wait = Math.ceil((nextAt - now) / 1000);
      throw new ApiError(
        "rate_limited",
        "rate_limited",
        `A confirmation message was sent to ${row.email} moments ago; try again in ${wait} seconds.`,
        undefined,
        { "Retry-After": String(wait) },
      );
    }
    await this.o.mails.guard(user, row.email, () => this.mailToken(user, row.email, now));
    return row;
  }

  /** A new confirmation token for the address, handed to the outbox (dropped if it cannot be sent). */
  private async mailToken(user: UserRow, address: string, now: number): Promise<void> {
    await this.store.purgeExpiredTokens(now);
    const token = newToken();
    const tokenHash = sha256(token);
    const expires = now + this.o.emailTokenTtlS * 1000;
    await this.store.replaceEmailToken({
      token_hash: tokenHash,
      user_id: user.id,
      email: address,
      created: now,
      expires,
    });
    try {
      await this.o.outbox.send({
        to: address,
        subject: "Confirm your email address",
        text: [
          `Hello ${user.username},`,
          "",
          `Someone asked to add this address to the Berth account "${user.username}" at ${this.o.publicUrl}.`,
          "If it was you, confirm it with:",
          "",
          `  curl -X POST ${this.o.publicUrl}/api/v1.1/emails/confirm/ -d '{"token":"${token}"}'`,
          "",
          `Confirmation token: ${token}`,
          "",
          `The token works once and expires at ${new Date(expires).toISOString()}.`,
          "If it was not you, ignore this message.",
        ].join("\n"),
      });
    } catch (err) {
      // Nobody received the token: drop it, so the next request is not held back by the interval.
      await this.store.deleteEmailToken(tokenHash);
      throw err;
    }
  }

  /** Marks the token's address verified; the token is used up. Unknown, used or expired: 400. */
  async confirmEmail(token: string): Promise<EmailRow> {
    const row = await this.store.takeEmailToken(sha256(token));
    const invalid = new ApiError(
      "bad_request",
      "invalid_token",
      "This confirmation token is unknown, already used or expired; request a new one.",
    );
    if (!row || row.expires <= this.o.clock.now()) throw invalid;
    const email = await this.store.markEmailVerified(row.user_id, row.email);
    if (!email) throw invalid;
    return email;
  }

  private parseEmail(value: string): string {
    const email = normalizeEmail(value);
    if (!email) throw invalidField("email", "must be an email address");
    return email;
  }

  /** The user's record of an address, or 404 (a well-formed address the user does not have). */
  private async findAddress(user: UserRow, value: string): Promise<EmailRow> {
    const email = this.parseEmail(value);
    // Addresses given at user creation are stored as typed: try that form too.
    const row =
      (await this.store.findEmail(user.id, email)) ?? (await this.store.findEmail(user.id, value.trim()));
    if (!row) throw notFound("email address");
    return row;
  }
}
