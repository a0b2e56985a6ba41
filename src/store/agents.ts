// Queries of node registration tokens and agent node keys (bring your own node, issue 15).
import type { AgentKeyTable, RegistrationTokenTable } from "./schema.ts";
import type { Kernel } from "./types.ts";

export type RegistrationTokenRow = Omit<RegistrationTokenTable, "id"> & { id: number };
export type AgentKeyRow = AgentKeyTable;

export class AgentStore {
  constructor(private readonly s: Kernel) {}

  async insertToken(t: Omit<RegistrationTokenRow, "id">): Promise<RegistrationTokenRow> {
    return this.s.db.insertInto("registration_tokens").values(t).returningAll().executeTakeFirstOrThrow();
  }

  async findToken(uuid: string): Promise<RegistrationTokenRow | undefined> {
    return this.s.db
      .selectFrom("registration_tokens")
      .selectAll()
      .where("uuid", "=", uuid)
      .executeTakeFirst();
  }

  async findTokenByHash(hash: string): Promise<RegistrationTokenRow | undefined> {
    return this.s.db
      .selectFrom("registration_tokens")
      .selectAll()
      .where("token_hash", "=", hash)
      .executeTakeFirst();
  }

  /** Tokens of a namespace that may still register a node, newest first. */
  async listUsableTokens(
    namespace: string,
    now: number,
    page: { limit: number; offset: number },
  ): Promise<{ rows: RegistrationTokenRow[]; total: number }> {
    const base = this.s.db
      .selectFrom("registration_tokens")
      .where("namespace", "=", namespace)
      .where("used_at", "is", null)
      .where("expires", ">", now);
    const count = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst();
    const rows = await base.selectAll().orderBy("id", "desc").limit(page.limit).offset(page.offset).execute();
    return { rows, total: Number(count?.n ?? 0) };
  }

  async deleteToken(uuid: string): Promise<void> {
    await this.s.db.deleteFrom("registration_tokens").where("uuid", "=", uuid).execute();
  }

  /**
   * Deletes the unused registration tokens a user created in a namespace (they lost it); the
   * deleted rows. Used ones stay: they record which token registered a node.
   */
  async deleteUnusedTokensOf(creatorId: number, namespace: string): Promise<RegistrationTokenRow[]> {
    return this.s.db
      .deleteFrom("registration_tokens")
      .where("creator_id", "=", creatorId)
      .where("namespace", "=", namespace)
      .where("used_at", "is", null)
      .returningAll()
      .execute();
  }

  /**
   * Marks a token used by a node, only if it is still unused and unexpired; false otherwise. One
   * conditional update, so two registrations racing with the same token cannot both succeed.
   */
  async claimToken(id: number, now: number, nodeUuid: string): Promise<boolean> {
    const r = await this.s.db
      .updateTable("registration_tokens")
      .set({ used_at: now, node_uuid: nodeUuid })
      .where("id", "=", id)
      .where("used_at", "is", null)
      .where("expires", ">", now)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) === 1;
  }

  async insertKey(k: AgentKeyRow): Promise<void> {
    await this.s.db.insertInto("agent_keys").values(k).execute();
  }

  async findKey(nodeUuid: string): Promise<AgentKeyRow | undefined> {
    return this.s.db
      .selectFrom("agent_keys")
      .selectAll()
      .where("node_uuid", "=", nodeUuid)
      .executeTakeFirst();
  }

  async revokeKey(nodeUuid: string, now: number): Promise<void> {
    await this.s.db
      .updateTable("agent_keys")
      .set({ revoked_at: now })
      .where("node_uuid", "=", nodeUuid)
      .where("revoked_at", "is", null)
      .execute();
  }
}
