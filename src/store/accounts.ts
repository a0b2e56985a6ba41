// Queries of the accounts API (CONTRACT §11): email addresses, profile fields, access tokens and
// email confirmation tokens. Tokens are looked up by their SHA-256 only.
import { isUniqueViolation, UniqueViolation } from "./errors.ts";
import { IdentityStore } from "./identity.ts";
import type { AccessTokenTable, EmailTable, EmailTokenTable, SessionTable } from "./schema.ts";
import type { Kernel, UserRow } from "./types.ts";

export type EmailRow = EmailTable;
export type AccessTokenRow = Omit<AccessTokenTable, "id"> & { id: number };
export type EmailTokenRow = EmailTokenTable;
export type SessionRow = Omit<SessionTable, "id"> & { id: number };

/** The profile fields a user may change (CONTRACT §11). */
export type ProfilePatch = Partial<Pick<UserRow, "location" | "profile_url" | "company">>;

export class AccountStore {
  constructor(private readonly s: Kernel) {}

  // ---- email addresses -------------------------------------------------------------------------

  /** The primary address first, then the others in the order they were added. */
  async listEmails(userId: number): Promise<EmailRow[]> {
    return this.s.db
      .selectFrom("emails")
      .selectAll()
      .where("user_id", "=", userId)
      .orderBy("primary", "desc")
      .orderBy("created")
      .orderBy("email")
      .execute();
  }

  async findEmail(userId: number, email: string): Promise<EmailRow | undefined> {
    return this.s.db
      .selectFrom("emails")
      .selectAll()
      .where("user_id", "=", userId)
      .where("email", "=", email)
      .executeTakeFirst();
  }

  /** Throws UniqueViolation when the user already has the address. */
  async insertEmail(row: EmailRow): Promise<EmailRow> {
    try {
      await this.s.db.insertInto("emails").values(row).execute();
    } catch (err) {
      if (isUniqueViolation(err)) throw new UniqueViolation(row.email);
      throw err;
    }
    return row;
  }

  /**
   * Inserts an unverified address unless the user already holds `maxUnverified` of them; answers
   * false then. The no-op update of the user's row comes first so that two inserts for one user
   * take turns (a row lock on PostgreSQL, the write lock on SQLite): parallel requests cannot all
   * count the same number and pass. Throws UniqueViolation when the user already has the address.
   */
  async insertUnverifiedEmail(row: EmailRow, maxUnverified: number): Promise<boolean> {
    return this.s.transaction(async (tx) => {
      await tx.db.updateTable("users").set({ id: row.user_id }).where("id", "=", row.user_id).execute();
      const held = await tx.db
        .selectFrom("emails")
        .select((eb) => eb.fn.countAll<number | string>().as("n"))
        .where("user_id", "=", row.user_id)
        .where("verified", "=", 0)
        .executeTakeFirstOrThrow();
      if (Number(held.n) >= maxUnverified) return false;
      try {
        await tx.db.insertInto("emails").values(row).execute();
      } catch (err) {
        if (isUniqueViolation(err)) throw new UniqueViolation(row.email);
        throw err;
      }
      return true;
    });
  }

  /**
   * Deletes a non-primary address and its pending confirmation tokens. The `primary = 0`
   * condition makes the refusal atomic even if the address became primary meanwhile.
   */
  async deleteNonPrimaryEmail(userId: number, email: string): Promise<boolean> {
    return this.s.transaction(async (tx) => {
      const res = await tx.db
        .deleteFrom("emails")
        .where("user_id", "=", userId)
        .where("email", "=", email)
        .where("primary", "=", 0)
        .executeTakeFirst();
      if (Number(res.numDeletedRows) === 0) return false;
      await tx.db
        .deleteFrom("email_tokens")
        .where("user_id", "=", userId)
        .where("email", "=", email)
        .execute();
      return true;
    });
  }

  async markEmailVerified(userId: number, email: string): Promise<EmailRow | undefined> {
    return this.s.db
      .updateTable("emails")
      .set({ verified: 1 })
      .where("user_id", "=", userId)
      .where("email", "=", email)
      .returningAll()
      .executeTakeFirst();
  }

  /**
   * Makes a verified address the user's primary one and the profile's `email`, in one
   * transaction. Returns false (and changes nothing) when the address is missing or unverified.
   */
  async makePrimary(userId: number, email: string): Promise<boolean> {
    return this.s.transaction(async (tx) => {
      // The target is updated first: when it is gone or unverified nothing else has changed yet.
      const target = await tx.db
        .updateTable("emails")
        .set({ primary: 1 })
        .where("user_id", "=", userId)
        .where("email", "=", email)
        .where("verified", "=", 1)
        .executeTakeFirst();
      if (Number(target.numUpdatedRows) === 0) return false;
      await tx.db
        .updateTable("emails")
        .set({ primary: 0 })
        .where("user_id", "=", userId)
        .where("email", "!=", email)
        .where("primary", "=", 1)
        .execute();
      await tx.db.updateTable("users").set({ email }).where("id", "=", userId).execute();
      tx.identityChanged();
      return true;
    });
  }

  // ---- profile ---------------------------------------------------------------------------------

  async updateProfile(userId: number, patch: ProfilePatch): Promise<UserRow | undefined> {
    if (Object.keys(patch).length === 0) return new IdentityStore(this.s).findUserById(userId);
    const row = await this.s.db
      .updateTable("users")
      .set(patch)
      .where("id", "=", userId)
      .returningAll()
      .executeTakeFirst();
    this.s.identityChanged();
    return row;
  }

  // ---- access tokens ---------------------------------------------------------------------------

  async insertAccessToken(row: Omit<AccessTokenRow, "id">): Promise<AccessTokenRow> {
    return this.s.db.insertInto("access_tokens").values(row).returningAll().executeTakeFirstOrThrow();
  }

  async findAccessToken(tokenHash: string): Promise<AccessTokenRow | undefined> {
    return this.s.db
      .selectFrom("access_tokens")
      .selectAll()
      .where("token_hash", "=", tokenHash)
      .executeTakeFirst();
  }

  // ---- dashboard sessions ----------------------------------------------------------------------

  async insertSession(row: Omit<SessionRow, "id">): Promise<SessionRow> {
    return this.s.db.insertInto("sessions").values(row).returningAll().executeTakeFirstOrThrow();
  }

  async findSession(tokenHash: string): Promise<SessionRow | undefined> {
    return this.s.db
      .selectFrom("sessions")
      .selectAll()
      .where("token_hash", "=", tokenHash)
      .executeTakeFirst();
  }

  /**
   * Ends a session. Identity listeners are told (this replica's and, on PostgreSQL, the others'):
   * open streams of the session close at once (api/streams/access.ts).
   */
  async deleteSession(tokenHash: string): Promise<void> {
    await this.s.db.deleteFrom("sessions").where("token_hash", "=", tokenHash).execute();
    this.s.identityChanged();
  }

  /** Ends every session of a user (but `keep`, a session's hash); how many ended. */
  async deleteSessionsOf(userId: number, keep?: string): Promise<number> {
    let q = this.s.db.deleteFrom("sessions").where("user_id", "=", userId);
    if (keep) q = q.where("token_hash", "!=", keep);
    const res = await q.executeTakeFirst();
    this.s.identityChanged();
    return Number(res.numDeletedRows);
  }

  /** Ends every Bearer access token of a user; how many ended. */
  async deleteAccessTokensOf(userId: number): Promise<number> {
    const res = await this.s.db.deleteFrom("access_tokens").where("user_id", "=", userId).executeTakeFirst();
    this.s.identityChanged();
    return Number(res.numDeletedRows);
  }

  /**
   * Sets a user's password hash and ends the user's sessions (but `keepSession`) and access tokens,
   * in one transaction: nothing signed in with the old password outlives the change.
   */
  async changePassword(
    userId: number,
    passwordHash: string,
    keepSession?: string,
  ): Promise<{ sessions_ended: number; access_tokens_ended: number }> {
    return this.s.transaction(async (tx) => {
      await tx.db
        .updateTable("users")
        .set({ password_hash: passwordHash })
        .where("id", "=", userId)
        .execute();
      return {
        sessions_ended: await new AccountStore(tx).deleteSessionsOf(userId, keepSession),
        access_tokens_ended: await new AccountStore(tx).deleteAccessTokensOf(userId),
      };
    });
  }

  /** The user whose key each service's PLATFORM_AUTH is, by service uuid. */
  async serviceKeyUsers(serviceUuids: readonly string[]): Promise<Map<string, number>> {
    if (serviceUuids.length === 0) return new Map();
    const rows = await this.s.db
      .selectFrom("api_keys")
      .select(["service_uuid", "user_id"])
      .where("service_uuid", "in", [...serviceUuids])
      .execute();
    return new Map(rows.map((r) => [r.service_uuid!, r.user_id]));
  }

  /**
   * Activates or deactivates a user. Deactivation also ends the user's sessions and access tokens
   * (API keys stay, refused while the user is inactive). Undefined when there is no such user.
   */
  async setActive(userId: number, active: boolean): Promise<UserRow | undefined> {
    return this.s.transaction(async (tx) => {
      const row = await tx.db
        .updateTable("users")
        .set({ is_active: active ? 1 : 0 })
        .where("id", "=", userId)
        .returningAll()
        .executeTakeFirst();
      if (!active) {
        await new AccountStore(tx).deleteSessionsOf(userId);
        await new AccountStore(tx).deleteAccessTokensOf(userId);
      }
      tx.identityChanged();
      return row;
    });
  }

  /** Forgets expired access and confirmation tokens; they can never be used again. */
  async purgeExpiredTokens(now: number): Promise<void> {
    await this.s.db.deleteFrom("sessions").where("expires", "<=", now).execute();
    await this.s.db.deleteFrom("access_tokens").where("expires", "<=", now).execute();
    await this.s.db.deleteFrom("email_tokens").where("expires", "<=", now).execute();
  }

  // ---- email confirmation tokens ---------------------------------------------------------------

  /** Stores a new confirmation token for an address; earlier ones for the same address stop working. */
  async replaceEmailToken(row: EmailTokenRow): Promise<void> {
    await this.s.transaction(async (tx) => {
      await tx.db
        .deleteFrom("email_tokens")
        .where("user_id", "=", row.user_id)
        .where("email", "=", row.email)
        .execute();
      await tx.db.insertInto("email_tokens").values(row).execute();
    });
  }

  async latestEmailToken(userId: number, email: string): Promise<EmailTokenRow | undefined> {
    return this.s.db
      .selectFrom("email_tokens")
      .selectAll()
      .where("user_id", "=", userId)
      .where("email", "=", email)
      .orderBy("created", "desc")
      .limit(1)
      .executeTakeFirst();
  }

  async deleteEmailToken(tokenHash: string): Promise<void> {
    await this.s.db.deleteFrom("email_tokens").where("token_hash", "=", tokenHash).execute();
  }

  /**
   * Takes a confirmation token out of the store (single use): the delete is the claim, so two
   * concurrent confirmations cannot both succeed.
   */
  async takeEmailToken(tokenHash: string): Promise<EmailTokenRow | undefined> {
    return this.s.db
      .deleteFrom("email_tokens")
      .where("token_hash", "=", tokenHash)
      .returningAll()
      .executeTakeFirst();
  }
}
