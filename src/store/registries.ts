// Queries of external repositories and service triggers.

import { isUniqueViolation, UniqueViolation } from "./errors.ts";
import { containsText } from "./list-search.ts";
import type { RepositoryTable, TriggerTable } from "./schema.ts";
import type { Kernel } from "./types.ts";

export type RepositoryRow = Omit<RepositoryTable, "id"> & { id: number };
export type TriggerRow = Omit<TriggerTable, "id"> & { id: number };

export interface RepositoryQuery {
  namespace: string;
  name?: string;
  registryHost?: string;
  /** Names containing this text, any case (`name__icontains`). */
  nameContains?: string;
  limit: number;
  offset: number;
}

export class RegistryStore {
  constructor(private readonly s: Kernel) {}

  /** Throws UniqueViolation when the namespace already has a repository of that name. */
  async insertRepository(r: Omit<RepositoryRow, "id">): Promise<RepositoryRow> {
    try {
      return await this.s.db.insertInto("repositories").values(r).returningAll().executeTakeFirstOrThrow();
    } catch (err) {
      if (isUniqueViolation(err)) throw new UniqueViolation(r.name);
      throw err;
    }
  }

  async findRepository(namespace: string, name: string): Promise<RepositoryRow | undefined> {
    return this.s.db
      .selectFrom("repositories")
      .selectAll()
      .where("namespace", "=", namespace)
      .where("name", "=", name)
      .executeTakeFirst();
  }

  async listRepositories(q: RepositoryQuery): Promise<{ rows: RepositoryRow[]; total: number }> {
    let base = this.s.db.selectFrom("repositories").where("namespace", "=", q.namespace);
    if (q.name !== undefined) base = base.where("name", "=", q.name);
    if (q.registryHost !== undefined) base = base.where("registry_host", "=", q.registryHost);
    if (q.nameContains !== undefined) base = base.where(containsText(["name"], q.nameContains));
    const count = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst();
    const rows = await base.selectAll().orderBy("id", "desc").limit(q.limit).offset(q.offset).execute();
    return { rows, total: Number(count?.n ?? 0) };
  }

  /** Every repository of a namespace, newest first. */
  async repositoriesOf(namespace: string): Promise<RepositoryRow[]> {
    return this.s.db
      .selectFrom("repositories")
      .selectAll()
      .where("namespace", "=", namespace)
      .orderBy("id", "desc")
      .execute();
  }

  async updateRepository(uuid: string, patch: Partial<Pick<RepositoryRow, "credentials" | "updated">>) {
    return this.s.db
      .updateTable("repositories")
      .set(patch)
      .where("uuid", "=", uuid)
      .returningAll()
      .executeTakeFirst();
  }

  async deleteRepository(uuid: string): Promise<boolean> {
    const res = await this.s.db.deleteFrom("repositories").where("uuid", "=", uuid).executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  }

  async insertTrigger(t: Omit<TriggerRow, "id">): Promise<TriggerRow> {
    return this.s.db.insertInto("triggers").values(t).returningAll().executeTakeFirstOrThrow();
  }

  async findTrigger(uuid: string): Promise<TriggerRow | undefined> {
    return this.s.db.selectFrom("triggers").selectAll().where("uuid", "=", uuid).executeTakeFirst();
  }

  async listTriggers(
    serviceUuid: string,
    page: { limit: number; offset: number },
  ): Promise<{ rows: TriggerRow[]; total: number }> {
    const base = this.s.db.selectFrom("triggers").where("service_uuid", "=", serviceUuid);
    const count = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst();
    const rows = await base.selectAll().orderBy("id", "desc").limit(page.limit).offset(page.offset).execute();
    return { rows, total: Number(count?.n ?? 0) };
  }

  async deleteTrigger(uuid: string): Promise<boolean> {
    const res = await this.s.db.deleteFrom("triggers").where("uuid", "=", uuid).executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  }

  /** Deletes the triggers a user created in a namespace (they lost it); the deleted rows. */
  async deleteTriggersOf(creatorId: number, namespace: string): Promise<TriggerRow[]> {
    return this.s.db
      .deleteFrom("triggers")
      .where("creator_id", "=", creatorId)
      .where("namespace", "=", namespace)
      .returningAll()
      .execute();
  }
}
