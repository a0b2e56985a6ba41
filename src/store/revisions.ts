// Kept definitions of services (issue 29): every definition a service is given (create, update,
// key rotation) is recorded as a numbered revision in the transaction that writes it. Its number
// is the spec_version the service has with it; the service's spec_version points at the one it
// has now, so a rollback (automatic or asked for) moves the pointer back, and the next change
// takes the number after the highest ever given: a number always names one definition. The
// newest `keep` revisions are kept, and always the service's current one.
import type { ServiceRevisionTable } from "./schema.ts";
import type { Kernel, ServiceRow } from "./types.ts";

export type RevisionRow = ServiceRevisionTable;

export interface RevisionRecord {
  created: number;
  cause: string;
  actionUuid?: string | null;
  /** Revisions kept per service (at least 2: the current one and one to roll back to). */
  keep: number;
}

export class RevisionStore {
  constructor(private readonly s: Kernel) {}

  /**
   * Records the definition `row` has now as its revision `row.spec_version` (nothing when it is
   * recorded already) and removes the oldest beyond `keep`, never the current one. Runs in the
   * transaction that wrote the row.
   */
  async record(row: Pick<ServiceRow, "uuid" | "namespace" | "spec" | "spec_version">, r: RevisionRecord) {
    await this.s.db
      .insertInto("service_revisions")
      .values({
        service_uuid: row.uuid,
        number: row.spec_version,
        namespace: row.namespace,
        spec: row.spec,
        cause: r.cause,
        action_uuid: r.actionUuid ?? null,
        created: r.created,
      })
      .onConflict((oc) => oc.columns(["service_uuid", "number"]).doNothing())
      .execute();
    const numbers = await this.numbers(row.uuid);
    const doomed = numbers.slice(Math.max(2, r.keep)).filter((n) => n !== row.spec_version);
    if (doomed.length)
      await this.s.db
        .deleteFrom("service_revisions")
        .where("service_uuid", "=", row.uuid)
        .where("number", "in", doomed)
        .execute();
  }

  /** The numbers of a service's kept revisions, newest first. */
  async numbers(serviceUuid: string): Promise<number[]> {
    const rows = await this.s.db
      .selectFrom("service_revisions")
      .select("number")
      .where("service_uuid", "=", serviceUuid)
      .orderBy("number", "desc")
      .execute();
    return rows.map((r) => Number(r.number));
  }

  /** The highest number a service's definitions were given (0: none recorded). */
  async latestNumber(serviceUuid: string): Promise<number> {
    const row = await this.s.db
      .selectFrom("service_revisions")
      .select((eb) => eb.fn.max("number").as("n"))
      .where("service_uuid", "=", serviceUuid)
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  async find(serviceUuid: string, number: number): Promise<RevisionRow | undefined> {
    return this.s.db
      .selectFrom("service_revisions")
      .selectAll()
      .where("service_uuid", "=", serviceUuid)
      .where("number", "=", number)
      .executeTakeFirst();
  }

  /** A page of a service's revisions, newest first. */
  async list(
    serviceUuid: string,
    page: { limit: number; offset: number },
  ): Promise<{ rows: RevisionRow[]; total: number }> {
    const base = this.s.db.selectFrom("service_revisions").where("service_uuid", "=", serviceUuid);
    const rows = await base
      .selectAll()
      .orderBy("number", "desc")
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    const count = await base.select((eb) => eb.fn.countAll<string | number>().as("n")).executeTakeFirst();
    return { rows, total: Number(count?.n ?? 0) };
  }
}
