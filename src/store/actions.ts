// The actions section: recording, finding and claiming actions, their leases and their logs.

import { inChunks, insertMany } from "./batches.ts";
import type { ActionRow, Kernel, NewAction } from "./types.ts";

export interface ActionQuery {
  namespaces: string[];
  uuid?: string;
  uuidPrefix?: string;
  states?: string[];
  objects?: string[];
  startGte?: number;
  startLte?: number;
  endGte?: number;
  endLte?: number;
  newestFirst?: boolean;
  limit: number;
  offset: number;
}

export const ACTIVE_STATES = ["In progress", "Canceling"];

export class ActionStore {
  constructor(private readonly s: Kernel) {}

  /** Inserts an action with its change-feed entry; `lease` reserves it for the worker that recorded it until `until`. */
  async insertAction(a: NewAction, lease?: { owner: string; until: number }): Promise<ActionRow> {
    const [row] = await this.s.insertRows("action", [
      { ...a, step: 0, attempts: 0, lease_owner: lease?.owner ?? null, lease_until: lease?.until ?? null },
    ]);
    return row!;
  }

  async findAction(uuid: string): Promise<ActionRow | undefined> {
    return this.s.db.selectFrom("actions").selectAll().where("uuid", "=", uuid).executeTakeFirst();
  }

  /** Optimistic update (`updateRow`): a change of state appends the action's change-feed entry. */
  async updateAction(a: ActionRow, patch: Partial<ActionRow>): Promise<ActionRow> {
    return this.s.updateRow("action", a, patch);
  }

  async listActions(q: ActionQuery): Promise<{ rows: ActionRow[]; total: number }> {
    let base = this.s.db
      .selectFrom("actions")
      .where("namespace", "in", q.namespaces.length ? q.namespaces : [""]);
    if (q.uuid !== undefined) base = base.where("uuid", "=", q.uuid);
    if (q.uuidPrefix !== undefined)
      base = base.where("uuid", "like", `${q.uuidPrefix.replace(/[%_\\]/g, "")}%`);
    if (q.states?.length) base = base.where("state", "in", q.states);
    if (q.objects) base = base.where("object", "in", q.objects.length ? q.objects : [""]);
    if (q.startGte !== undefined) base = base.where("start_date", ">=", q.startGte);
    if (q.startLte !== undefined) base = base.where("start_date", "<=", q.startLte);
    if (q.endGte !== undefined) base = base.where("end_date", ">=", q.endGte);
    if (q.endLte !== undefined) base = base.where("end_date", "<=", q.endLte);
    const count = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst();
    const rows = await base
      .selectAll()
      .orderBy("id", q.newestFirst ? "desc" : "asc")
      .limit(q.limit)
      .offset(q.offset)
      .execute();
    return { rows, total: Number(count?.n ?? 0) };
  }

  /** Which of `objects` an action works on now (one statement per chunk of objects). */
  async objectsWithActiveActions(objects: readonly string[]): Promise<Set<string>> {
    const rows = await inChunks(objects, (part) =>
      this.s.db
        .selectFrom("actions")
        .select("object")
        .where("object", "in", part)
        .where("kind", "is not", null)
        .where("state", "in", ACTIVE_STATES)
        .execute(),
    );
    return new Set(rows.map((r) => r.object));
  }

  /**
   * What a new action on the object waits for, in one statement: the action holding it (In
   * progress or Canceling), else the oldest Pending one.
   */
  async busyOn(object: string): Promise<ActionRow | undefined> {
    return this.s.db
      .selectFrom("actions")
      .selectAll()
      .where("object", "=", object)
      .where("kind", "is not", null)
      .where("state", "in", [...ACTIVE_STATES, "Pending"])
      .orderBy((eb) => eb.case().when("state", "=", "Pending").then(1).else(0).end())
      .orderBy("id")
      .limit(1)
      .executeTakeFirst();
  }

  /** The action currently holding the object (In progress or Canceling), if any. */
  async activeActionOn(object: string): Promise<ActionRow | undefined> {
    return this.s.db
      .selectFrom("actions")
      .selectAll()
      .where("object", "=", object)
      .where("kind", "is not", null)
      .where("state", "in", ACTIVE_STATES)
      .executeTakeFirst();
  }

  /**
   * Actions a worker could run now: active ones whose lease lapsed, those reserved for `mine.owner`
   * (recorded by it) that it is not running yet (`mine.running`), and the oldest Pending per free
   * object.
   */
  async claimableActions(
    now: number,
    limit: number,
    mine?: { owner: string; running: string[] },
  ): Promise<ActionRow[]> {
    const active = await this.s.db
      .selectFrom("actions")
      .selectAll()
      .where("kind", "is not", null)
      .where("state", "in", ACTIVE_STATES)
      .where((eb) => {
        const free = [eb("lease_until", "is", null), eb("lease_until", "<", now)];
        if (!mine) return eb.or(free);
        const reserved = eb.and([
          eb("lease_owner", "=", mine.owner),
          ...(mine.running.length ? [eb("uuid", "not in", mine.running)] : []),
        ]);
        return eb.or([...free, reserved]);
      })
      .orderBy("id")
      .limit(limit)
      .execute();
    const pending = await this.s.db
      .selectFrom("actions as a")
      .selectAll("a")
      .where("a.state", "=", "Pending")
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom("actions as b")
              .select("b.id")
              .whereRef("b.object", "=", "a.object")
              .where("b.kind", "is not", null)
              .where((eb) =>
                eb.or([
                  eb("b.state", "in", ACTIVE_STATES),
                  eb.and([eb("b.state", "=", "Pending"), eb("b.id", "<", eb.ref("a.id"))]),
                ]),
              ),
          ),
        ),
      )
      .orderBy("a.id")
      .limit(limit)
      .execute();
    return [...active, ...pending];
  }

  /** Gives up the leases a stopping worker holds on unfinished actions: others claim them at once. */
  async releaseActionLeases(owner: string): Promise<void> {
    await this.s.db
      .updateTable("actions")
      .set((eb) => ({ lease_until: 0, version: eb("version", "+", 1) }))
      .where("lease_owner", "=", owner)
      .where("state", "in", ACTIVE_STATES)
      .execute();
  }

  async unfinishedActionCount(): Promise<number> {
    const row = await this.s.db
      .selectFrom("actions")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("state", "in", ["Pending", ...ACTIVE_STATES])
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  async appendActionLog(actionUuid: string, ts: number, line: string): Promise<void> {
    await this.s.db.insertInto("action_logs").values({ action_uuid: actionUuid, ts, line }).execute();
  }

  /** Lines of actions' logs (of one action or several) in one statement per ROWS_PER_INSERT, in order. */
  async appendActionLogs(lines: readonly { action_uuid: string; ts: number; line: string }[]): Promise<void> {
    await insertMany(this.s, "action_logs", ["action_uuid", "ts", "line"], lines);
  }

  /** The last `tail` lines of an action's log, oldest first, with ids for following. */
  async actionLogTail(actionUuid: string, tail: number) {
    const rows = await this.s.db
      .selectFrom("action_logs")
      .selectAll()
      .where("action_uuid", "=", actionUuid)
      .orderBy("id", "desc")
      .limit(tail)
      .execute();
    return rows.reverse();
  }

  async actionLogAfter(actionUuid: string, afterId: number) {
    return this.s.db
      .selectFrom("action_logs")
      .selectAll()
      .where("action_uuid", "=", actionUuid)
      .where("id", ">", afterId)
      .orderBy("id")
      .execute();
  }

  /** Unfinished actions: how many wait (Pending) or run, and since when the oldest waits. */
  async actionQueue(): Promise<{ pending: number; active: number; oldestPendingStart: number | null }> {
    const rows = await this.s.db
      .selectFrom("actions")
      .select((eb) => ["state", eb.fn.countAll<number>().as("n"), eb.fn.min("start_date").as("oldest")])
      .where("state", "in", ["Pending", ...ACTIVE_STATES])
      .groupBy("state")
      .execute();
    let pending = 0;
    let active = 0;
    let oldestPendingStart: number | null = null;
    for (const r of rows) {
      if (r.state === "Pending") {
        pending = Number(r.n);
        oldestPendingStart = r.oldest === null ? null : Number(r.oldest);
      } else active += Number(r.n);
    }
    return { pending, active, oldestPendingStart };
  }
}
