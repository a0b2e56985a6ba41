// The identity section: users and their namespaces, API keys, organizations, memberships and
// invitations. Every write to users, keys or memberships tells the kernel (`identityChanged`), so
// identity caches on every replica drop what they hold.

import { isUniqueViolation, UniqueViolation } from "./errors.ts";
import { containsText } from "./list-search.ts";
import type { OrgInvitationTable, OrgMemberTable } from "./schema.ts";
import type { ApiKeyRow, Kernel, UserRow } from "./types.ts";

export class IdentityStore {
  constructor(private readonly s: Kernel) {}

  async namespaceExists(name: string): Promise<boolean> {
    const row = await this.s.db
      .selectFrom("namespaces")
      .select("name")
      .where("name", "=", name)
      .executeTakeFirst();
    return row !== undefined;
  }

  async findNamespace(name: string) {
    return this.s.db.selectFrom("namespaces").selectAll().where("name", "=", name).executeTakeFirst();
  }

  async countUsers(): Promise<number> {
    const row = await this.s.db
      .selectFrom("users")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  /** Creates a user, its namespace and its primary email. Throws UniqueViolation if the name is taken. */
  async createUser(u: Omit<UserRow, "id">): Promise<UserRow> {
    return this.s.transaction(async (tx) => {
      try {
        await tx.db
          .insertInto("namespaces")
          .values({ name: u.username, kind: "user", created: u.date_joined })
          .execute();
      } catch (err) {
        if (isUniqueViolation(err)) throw new UniqueViolation(u.username);
        throw err;
      }
      const row = await tx.db.insertInto("users").values(u).returningAll().executeTakeFirstOrThrow();
      await tx.db
        .insertInto("emails")
        .values({ user_id: row.id, email: u.email, verified: 1, primary: 1, created: u.date_joined })
        .execute();
      return row;
    });
  }

  /** Users in the order they joined (`nameContains`: usernames containing it, any case). */
  async listUsers(q: { nameContains?: string; limit: number; offset: number }): Promise<{
    rows: UserRow[];
    total: number;
  }> {
    let base = this.s.db.selectFrom("users");
    if (q.nameContains !== undefined) base = base.where(containsText(["username"], q.nameContains));
    const count = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst();
    const rows = await base.selectAll().orderBy("id").limit(q.limit).offset(q.offset).execute();
    return { rows, total: Number(count?.n ?? 0) };
  }

  async findUserByName(username: string): Promise<UserRow | undefined> {
    return this.s.db.selectFrom("users").selectAll().where("username", "=", username).executeTakeFirst();
  }

  async firstAdmin(): Promise<UserRow | undefined> {
    return this.s.db
      .selectFrom("users")
      .selectAll()
      .where("is_admin", "=", 1)
      .orderBy("id")
      .limit(1)
      .executeTakeFirst();
  }

  async findUserById(id: number): Promise<UserRow | undefined> {
    return this.s.db.selectFrom("users").selectAll().where("id", "=", id).executeTakeFirst();
  }

  async insertApiKey(k: Omit<ApiKeyRow, "id">): Promise<ApiKeyRow> {
    return this.s.db.insertInto("api_keys").values(k).returningAll().executeTakeFirstOrThrow();
  }

  async listApiKeys(userId: number): Promise<ApiKeyRow[]> {
    return this.s.db.selectFrom("api_keys").selectAll().where("user_id", "=", userId).orderBy("id").execute();
  }

  async deleteApiKey(userId: number, id: number): Promise<boolean> {
    const res = await this.s.db
      .deleteFrom("api_keys")
      .where("user_id", "=", userId)
      .where("id", "=", id)
      .executeTakeFirst();
    this.s.identityChanged();
    return Number(res.numDeletedRows) > 0;
  }

  async deleteServiceApiKeys(serviceUuid: string): Promise<void> {
    await this.s.db.deleteFrom("api_keys").where("service_uuid", "=", serviceUuid).execute();
    this.s.identityChanged();
  }

  /** The key with that hash and its user, in one statement. */
  async findApiKeyByHash(hash: string): Promise<{ key: ApiKeyRow; user: UserRow } | undefined> {
    const row = await this.s.db
      .selectFrom("api_keys as k")
      .innerJoin("users as u", "u.id", "k.user_id")
      .selectAll("u")
      .select([
        "k.id as k_id",
        "k.user_id as k_user_id",
        "k.label as k_label",
        "k.key_hash as k_key_hash",
        "k.created as k_created",
        "k.namespace_limit as k_namespace_limit",
        "k.service_uuid as k_service_uuid",
      ])
      .where("k.key_hash", "=", hash)
      .executeTakeFirst();
    if (!row) return undefined;
    const { k_id, k_user_id, k_label, k_key_hash, k_created, k_namespace_limit, k_service_uuid, ...user } =
      row;
    return {
      key: {
        id: k_id,
        user_id: k_user_id,
        label: k_label,
        key_hash: k_key_hash,
        created: k_created,
        namespace_limit: k_namespace_limit,
        service_uuid: k_service_uuid,
      },
      user,
    };
  }

  async createOrg(name: string, owner: string, now: number): Promise<void> {
    await this.s.transaction(async (tx) => {
      try {
        await tx.db.insertInto("namespaces").values({ name, kind: "org", created: now }).execute();
      } catch (err) {
        if (isUniqueViolation(err)) throw new UniqueViolation(name);
        throw err;
      }
      await tx.db.insertInto("org_members").values({ org: name, username: owner, role: "owner" }).execute();
      tx.identityChanged();
    });
  }

  async orgMembers(org: string): Promise<OrgMemberTable[]> {
    return this.s.db
      .selectFrom("org_members")
      .selectAll()
      .where("org", "=", org)
      .orderBy("username")
      .execute();
  }

  async membership(org: string, username: string): Promise<OrgMemberTable | undefined> {
    return this.s.db
      .selectFrom("org_members")
      .selectAll()
      .where("org", "=", org)
      .where("username", "=", username)
      .executeTakeFirst();
  }

  async orgsOf(username: string): Promise<string[]> {
    const rows = await this.s.db
      .selectFrom("org_members")
      .select("org")
      .where("username", "=", username)
      .execute();
    return rows.map((r) => r.org).sort();
  }

  /** Adds or changes a membership. */
  async putMember(org: string, username: string, role: "owner" | "member"): Promise<void> {
    await this.s.transaction(async (tx) => {
      const existing = await new IdentityStore(tx).membership(org, username);
      if (existing) {
        await tx.db
          .updateTable("org_members")
          .set({ role })
          .where("org", "=", org)
          .where("username", "=", username)
          .execute();
      } else {
        await tx.db.insertInto("org_members").values({ org, username, role }).execute();
      }
      tx.identityChanged();
    });
  }

  async removeMember(org: string, username: string): Promise<boolean> {
    const res = await this.s.db
      .deleteFrom("org_members")
      .where("org", "=", org)
      .where("username", "=", username)
      .executeTakeFirst();
    this.s.identityChanged();
    return Number(res.numDeletedRows) > 0;
  }

  // ---- organization invitations ------------------------------------------------------------------

  /**
   * Writes an invitation (a second one to the same name replaces the first). `userId` is the user
   * the name belongs to now, or null: the same statements run for an unknown name.
   */
  async putInvitation(inv: OrgInvitationTable): Promise<OrgInvitationTable> {
    return this.s.transaction(async (tx) => {
      await tx.db
        .deleteFrom("org_invitations")
        .where("org", "=", inv.org)
        .where("username", "=", inv.username)
        .execute();
      return tx.db.insertInto("org_invitations").values(inv).returningAll().executeTakeFirstOrThrow();
    });
  }

  async orgInvitations(org: string): Promise<OrgInvitationTable[]> {
    return this.s.db
      .selectFrom("org_invitations")
      .selectAll()
      .where("org", "=", org)
      .orderBy("created")
      .orderBy("username")
      .execute();
  }

  /** Invitations the user may accept: made to its name while it was this user. */
  async invitationsOf(user: { id: number; username: string }): Promise<OrgInvitationTable[]> {
    return this.s.db
      .selectFrom("org_invitations")
      .selectAll()
      .where("username", "=", user.username)
      .where("user_id", "=", user.id)
      .orderBy("created")
      .orderBy("org")
      .execute();
  }

  async deleteInvitation(org: string, username: string): Promise<boolean> {
    const res = await this.s.db
      .deleteFrom("org_invitations")
      .where("org", "=", org)
      .where("username", "=", username)
      .executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  }

  /**
   * Accepts the user's invitation to `org`: the membership (with the invitation's role) and the
   * invitation's removal commit together. Undefined when the user has no such invitation.
   */
  async acceptInvitation(
    org: string,
    user: { id: number; username: string },
  ): Promise<OrgInvitationTable | undefined> {
    return this.s.transaction(async (tx) => {
      const inv = await tx.db
        .deleteFrom("org_invitations")
        .where("org", "=", org)
        .where("username", "=", user.username)
        .where("user_id", "=", user.id)
        .returningAll()
        .executeTakeFirst();
      if (!inv) return undefined;
      // The organization may have gone meanwhile; then there is nothing to join.
      if ((await new IdentityStore(tx).findNamespace(org))?.kind !== "org") return undefined;
      if (await new IdentityStore(tx).membership(org, user.username)) {
        await tx.db
          .updateTable("org_members")
          .set({ role: inv.role })
          .where("org", "=", org)
          .where("username", "=", user.username)
          .execute();
      } else {
        await tx.db
          .insertInto("org_members")
          .values({ org, username: user.username, role: inv.role })
          .execute();
      }
      tx.identityChanged();
      return inv;
    });
  }

  /**
   * Removes a member unless that would leave the organization without an owner: the check and the
   * delete commit together, so two owners leaving at once cannot both go. Answers what happened.
   */
  async removeMemberKeepingOwner(
    org: string,
    username: string,
  ): Promise<"removed" | "missing" | "last_owner"> {
    return this.s.transaction(async (tx) => {
      if (tx.dialect === "postgres") await tx.lockNamespace(org);
      const members = await new IdentityStore(tx).orgMembers(org);
      const target = members.find((m) => m.username === username);
      if (!target) return "missing";
      if (target.role === "owner" && members.filter((m) => m.role === "owner").length === 1)
        return "last_owner";
      await new IdentityStore(tx).removeMember(org, username);
      return "removed";
    });
  }
}
