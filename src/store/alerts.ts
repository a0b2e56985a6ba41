// Alert rules, incidents and the delivery log (issue 32). An incident is opened at most once per
// rule and subject while it lasts (a partial unique index: the second opener of a race gets
// nothing), and resolved once; each opening and resolution queues one delivery per channel of
// the rule, in the same transaction.
import { sql } from "kysely";
import { isUniqueViolation } from "./errors.ts";
import type { AlertDeliveryTable, AlertIncidentTable, AlertRuleTable } from "./schema.ts";
import type { Kernel } from "./types.ts";

export type AlertRuleRow = AlertRuleTable;
export type AlertIncidentRow = AlertIncidentTable;
export type AlertDeliveryRow = AlertDeliveryTable;

export interface NewDelivery {
  uuid: string;
  channel: number;
  target: string;
}

export class AlertStore {
  constructor(private readonly s: Kernel) {}

  async insertRule(r: AlertRuleRow): Promise<AlertRuleRow> {
    await this.s.db.insertInto("alert_rules").values(r).execute();
    return r;
  }

  async findRule(uuid: string): Promise<AlertRuleRow | undefined> {
    return this.s.db.selectFrom("alert_rules").selectAll().where("uuid", "=", uuid).executeTakeFirst();
  }

  async listRules(
    namespace: string,
    page: { limit: number; offset: number },
  ): Promise<{ rows: AlertRuleRow[]; total: number }> {
    const base = this.s.db.selectFrom("alert_rules").where("namespace", "=", namespace);
    const [rows, count] = await Promise.all([
      base
        .selectAll()
        .orderBy("created", "desc")
        .orderBy("uuid")
        .limit(page.limit)
        .offset(page.offset)
        .execute(),
      base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst(),
    ]);
    return { rows, total: Number(count?.n ?? 0) };
  }

  async enabledRules(): Promise<AlertRuleRow[]> {
    return this.s.db
      .selectFrom("alert_rules")
      .selectAll()
      .where("enabled", "=", 1)
      .orderBy("created")
      .execute();
  }

  async updateRule(uuid: string, patch: Partial<Pick<AlertRuleRow, "name" | "enabled">>): Promise<void> {
    await this.s.db.updateTable("alert_rules").set(patch).where("uuid", "=", uuid).execute();
  }

  /** Removes a rule with its incidents and deliveries. */
  async deleteRule(uuid: string): Promise<void> {
    await this.s.transaction(async (tx) => {
      await tx.db.deleteFrom("alert_deliveries").where("rule_uuid", "=", uuid).execute();
      await tx.db.deleteFrom("alert_incidents").where("rule_uuid", "=", uuid).execute();
      await tx.db.deleteFrom("alert_rules").where("uuid", "=", uuid).execute();
    });
  }

  async openIncidents(ruleUuid: string): Promise<AlertIncidentRow[]> {
    return this.s.db
      .selectFrom("alert_incidents")
      .selectAll()
      .where("rule_uuid", "=", ruleUuid)
      .where("resolved", "is", null)
      .execute();
  }

  async listIncidents(
    ruleUuid: string,
    page: { limit: number; offset: number },
  ): Promise<{ rows: AlertIncidentRow[]; total: number }> {
    const base = this.s.db.selectFrom("alert_incidents").where("rule_uuid", "=", ruleUuid);
    const [rows, count] = await Promise.all([
      base
        .selectAll()
        .orderBy("started", "desc")
        .orderBy("uuid")
        .limit(page.limit)
        .offset(page.offset)
        .execute(),
      base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst(),
    ]);
    return { rows, total: Number(count?.n ?? 0) };
  }

  /**
   * Opens an incident and queues its deliveries; undefined when the rule already has one open for
   * the subject (fires once per incident, whichever replica evaluates).
   */
  async openIncident(i: AlertIncidentRow, deliveries: NewDelivery[], now: number): Promise<boolean> {
    try {
      await this.s.transaction(async (tx) => {
        await tx.db.insertInto("alert_incidents").values(i).execute();
        await queue(tx, i, "firing", deliveries, now);
      });
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  /** Resolves an open incident and queues its deliveries; false when it was resolved already. */
  async resolveIncident(i: AlertIncidentRow, deliveries: NewDelivery[], now: number): Promise<boolean> {
    return this.s.transaction(async (tx) => {
      const done = await tx.db
        .updateTable("alert_incidents")
        .set({ resolved: now })
        .where("uuid", "=", i.uuid)
        .where("resolved", "is", null)
        .executeTakeFirst();
      if (Number(done.numUpdatedRows) !== 1) return false;
      await queue(tx, { ...i, resolved: now }, "resolved", deliveries, now);
      return true;
    });
  }

  async findIncident(uuid: string): Promise<AlertIncidentRow | undefined> {
    return this.s.db.selectFrom("alert_incidents").selectAll().where("uuid", "=", uuid).executeTakeFirst();
  }

  /** Deliveries whose time has come, oldest first. */
  async dueDeliveries(now: number, limit: number): Promise<AlertDeliveryRow[]> {
    return this.s.db
      .selectFrom("alert_deliveries")
      .selectAll()
      .where("state", "=", "pending")
      .where("next_at", "<=", now)
      .orderBy("next_at")
      .limit(limit)
      .execute();
  }

  /**
   * Claims a due delivery for one attempt: its next try moves to `retryAt`, so that another
   * replica does not send it meanwhile. False when someone else claimed it.
   */
  async claimDelivery(d: AlertDeliveryRow, retryAt: number): Promise<boolean> {
    const r = await this.s.db
      .updateTable("alert_deliveries")
      .set({ next_at: retryAt, attempts: d.attempts + 1 })
      .where("uuid", "=", d.uuid)
      .where("state", "=", "pending")
      .where("attempts", "=", d.attempts)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) === 1;
  }

  async deliveryDone(
    uuid: string,
    outcome: { state: AlertDeliveryRow["state"]; error: string; delivered: number | null },
  ): Promise<void> {
    await this.s.db
      .updateTable("alert_deliveries")
      .set({ state: outcome.state, last_error: outcome.error.slice(0, 500), delivered: outcome.delivered })
      .where("uuid", "=", uuid)
      .execute();
  }

  async deliveryFailedAttempt(uuid: string, error: string): Promise<void> {
    await this.s.db
      .updateTable("alert_deliveries")
      .set({ last_error: error.slice(0, 500) })
      .where("uuid", "=", uuid)
      .execute();
  }

  async listDeliveries(
    ruleUuid: string,
    page: { limit: number; offset: number },
  ): Promise<{ rows: AlertDeliveryRow[]; total: number }> {
    const base = this.s.db.selectFrom("alert_deliveries").where("rule_uuid", "=", ruleUuid);
    const [rows, count] = await Promise.all([
      base
        .selectAll()
        .orderBy("created", "desc")
        .orderBy("uuid")
        .limit(page.limit)
        .offset(page.offset)
        .execute(),
      base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst(),
    ]);
    return { rows, total: Number(count?.n ?? 0) };
  }

  /** Live containers of a namespace that should run but exited (not stopped by anyone). */
  async exitedContainers(namespace: string) {
    return this.s.db
      .selectFrom("containers")
      .select(["uuid", "namespace", "name", "exit_code", "exit_code_msg"])
      .where("namespace", "=", namespace)
      .where("state", "<>", sql.lit("Terminated"))
      .where("desired", "=", "running")
      .where("phase", "is", null)
      .where("observed", "=", "exited")
      .execute();
  }

  /** Running containers of a namespace whose health check fails (containers.health, issue 29). */
  async unhealthyContainers(namespace: string) {
    return this.s.db
      .selectFrom("containers")
      .select(["uuid", "namespace", "name"])
      .where("namespace", "=", namespace)
      .where("state", "<>", sql.lit("Terminated"))
      .where("observed", "=", "running")
      .where("health", "=", "unhealthy")
      .execute();
  }

  async unreachableNodes(namespace: string) {
    return this.s.db
      .selectFrom("nodes")
      .select(["uuid", "namespace", "external_fqdn", "nickname", "unreachable_since"])
      .where("namespace", "=", namespace)
      .where("state", "=", "Unreachable")
      .execute();
  }

  /** Names of containers by uuid (summaries of stats-based alerts). */
  async containerNames(uuids: readonly string[]) {
    if (!uuids.length) return [];
    return this.s.db
      .selectFrom("containers")
      .select(["uuid", "namespace", "name"])
      .where("uuid", "in", [...uuids])
      .where("state", "<>", sql.lit("Terminated"))
      .execute();
  }

  /** Failed actions of a namespace that ended in [from, now) and have no later successful action on their object. */
  async failedActions(
    namespace: string,
    from: number,
  ): Promise<{ uuid: string; action: string; object: string; end_date: number }[]> {
    const rows = await sql<{ uuid: string; action: string; object: string; end_date: number }>`
      select a.uuid, a.action, a.object, a.end_date from actions a
      where a.namespace = ${namespace} and a.state = 'Failed' and a.end_date >= ${from}
        and not exists (select 1 from actions b where b.object = a.object and b.state = 'Success'
          and b.end_date > a.end_date)
      order by a.end_date limit 500`.execute(this.s.db);
    return rows.rows.map((r) => ({ ...r, end_date: Number(r.end_date) }));
  }
}

async function queue(
  tx: Kernel,
  i: AlertIncidentRow,
  event: "firing" | "resolved",
  deliveries: NewDelivery[],
  now: number,
): Promise<void> {
  if (!deliveries.length) return;
  await tx.db
    .insertInto("alert_deliveries")
    .values(
      deliveries.map((d) => ({
        uuid: d.uuid,
        incident_uuid: i.uuid,
        rule_uuid: i.rule_uuid,
        namespace: i.namespace,
        channel: d.channel,
        target: d.target,
        event,
        state: "pending" as const,
        attempts: 0,
        next_at: now,
        last_error: "",
        created: now,
        delivered: null,
      })),
    )
    .execute();
}

/** The alerts section of a store (kept out of Store's getters: store.ts is at its size limit). */
export const alertsOf = (s: Kernel): AlertStore => new AlertStore(s);
