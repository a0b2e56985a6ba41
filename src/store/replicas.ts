// Queries of the replica machinery (issue 16): replica heartbeats, named leases on work that must
// happen once across replicas, shared failed sign-in counters and control-plane facts.
import type { LoginFailureTable, ReplicaTable } from "./schema.ts";
import type { Kernel } from "./types.ts";

export type ReplicaRow = ReplicaTable;
export type LoginFailureRow = LoginFailureTable;

export class ReplicaStore {
  constructor(private readonly s: Kernel) {}

  // ---- replicas ------------------------------------------------------------------------------

  /** Records this replica's heartbeat (and its row on the first beat). */
  async beat(id: string, now: number, stopping: boolean): Promise<void> {
    await this.s.db
      .insertInto("replicas")
      .values({ id, started_at: now, heartbeat_at: now, stopping: stopping ? 1 : 0 })
      .onConflict((oc) => oc.column("id").doUpdateSet({ heartbeat_at: now, stopping: stopping ? 1 : 0 }))
      .execute();
  }

  /** Replicas whose heartbeat is newer than `since`, oldest first. */
  async liveReplicas(since: number): Promise<ReplicaRow[]> {
    return this.s.db
      .selectFrom("replicas")
      .selectAll()
      .where("heartbeat_at", ">=", since)
      .orderBy("started_at")
      .orderBy("id")
      .execute();
  }

  async removeReplica(id: string): Promise<void> {
    await this.s.db.deleteFrom("replicas").where("id", "=", id).execute();
  }

  /** Forgets every replica and lease (a restored database: those processes are not coming back). */
  async forgetAllReplicas(): Promise<void> {
    await this.s.db.deleteFrom("leases").execute();
    await this.s.db.deleteFrom("replicas").execute();
  }

  /** Forgets replicas silent since before `before` (their leases lapsed long ago). */
  async pruneReplicas(before: number): Promise<void> {
    await this.s.db.deleteFrom("replicas").where("heartbeat_at", "<", before).execute();
  }

  // ---- leases --------------------------------------------------------------------------------

  /**
   * Takes or renews the leases `names` (a heartbeat's nodes and jobs) for `owner` until `until`:
   * each is taken when nobody holds it, when `owner` already does, or when the holder's lease lapsed
   * before `now`. One statement per 500 names, so two replicas racing for a lapsed lease cannot
   * both win; answers the names now held by `owner`.
   */
  async acquireLeases(
    names: readonly string[],
    owner: string,
    now: number,
    until: number,
  ): Promise<Set<string>> {
    const held = new Set<string>();
    const sorted = [...new Set(names)].sort();
    for (let at = 0; at < sorted.length; at += 500) {
      const rows = await this.s.db
        .insertInto("leases")
        .values(sorted.slice(at, at + 500).map((name) => ({ name, owner, until, acquired_at: now })))
        .onConflict((oc) =>
          oc
            .column("name")
            .doUpdateSet((eb) => ({
              owner: eb.ref("excluded.owner"),
              until: eb.ref("excluded.until"),
              acquired_at: eb
                .case()
                .when("leases.owner", "=", owner)
                .then(eb.ref("leases.acquired_at"))
                .else(eb.ref("excluded.acquired_at"))
                .end(),
            }))
            .where((eb) => eb.or([eb("leases.owner", "=", owner), eb("leases.until", "<", now)])),
        )
        .returning(["name", "owner"])
        .execute();
      for (const r of rows) if (r.owner === owner) held.add(r.name);
    }
    return held;
  }

  /** Gives a lease up at once, so another replica can take it without waiting for it to lapse. */
  async releaseLease(name: string, owner: string): Promise<void> {
    await this.s.db.deleteFrom("leases").where("name", "=", name).where("owner", "=", owner).execute();
  }

  async releaseLeasesOf(owner: string): Promise<void> {
    await this.s.db.deleteFrom("leases").where("owner", "=", owner).execute();
  }

  async listLeases(prefix = ""): Promise<{ name: string; owner: string; until: number }[]> {
    return this.s.db
      .selectFrom("leases")
      .select(["name", "owner", "until"])
      .where("name", "like", `${prefix.replace(/[%_\\]/g, "")}%`)
      .orderBy("name")
      .execute();
  }

  // ---- failed sign-in counters ---------------------------------------------------------------

  async findLoginFailures(key: string): Promise<LoginFailureRow | undefined> {
    return this.s.db.selectFrom("login_failures").selectAll().where("key", "=", key).executeTakeFirst();
  }

  /**
   * Adds `delta` to a counter in one statement (replicas count concurrently): a counter whose
   * window ended starts again at `resetAt`. A negative delta never creates a counter or goes below 0.
   */
  async addLoginFailures(key: string, delta: number, now: number, resetAt: number): Promise<void> {
    if (delta < 0) {
      await this.s.db
        .updateTable("login_failures")
        .set((eb) => ({
          failures: eb
            .case()
            .when("failures", ">", -delta)
            .then(eb("failures", "+", delta))
            .else(0)
            .end(),
        }))
        .where("key", "=", key)
        .where("reset_at", ">", now)
        .execute();
      return;
    }
    await this.s.db
      .insertInto("login_failures")
      .values({ key, failures: delta, reset_at: resetAt })
      .onConflict((oc) =>
        oc.column("key").doUpdateSet((eb) => ({
          failures: eb
            .case()
            .when("login_failures.reset_at", "<=", now)
            .then(delta)
            .else(eb("login_failures.failures", "+", delta))
            .end(),
          reset_at: eb
            .case()
            .when("login_failures.reset_at", "<=", now)
            .then(resetAt)
            .else(eb.ref("login_failures.reset_at"))
            .end(),
        })),
      )
      .execute();
  }

  /**
   * Counts one failure unless the key already has `max` in its running window, in one statement;
   * an ended window starts again at `resetAt`. True when counted.
   */
  async countLoginFailure(key: string, max: number, now: number, resetAt: number): Promise<boolean> {
    const row = await this.s.db
      .insertInto("login_failures")
      .values({ key, failures: 1, reset_at: resetAt })
      .onConflict((oc) =>
        oc
          .column("key")
          .doUpdateSet((eb) => ({
            failures: eb
              .case()
              .when("login_failures.reset_at", "<=", now)
              .then(1)
              .else(eb("login_failures.failures", "+", 1))
              .end(),
            reset_at: eb
              .case()
              .when("login_failures.reset_at", "<=", now)
              .then(resetAt)
              .else(eb.ref("login_failures.reset_at"))
              .end(),
          }))
          .where((eb) =>
            eb.or([eb("login_failures.reset_at", "<=", now), eb("login_failures.failures", "<", max)]),
          ),
      )
      .returning("failures")
      .executeTakeFirst();
    return row !== undefined;
  }

  async deleteLoginFailures(key: string): Promise<void> {
    await this.s.db.deleteFrom("login_failures").where("key", "=", key).execute();
  }

  async pruneLoginFailures(now: number): Promise<void> {
    await this.s.db.deleteFrom("login_failures").where("reset_at", "<=", now).execute();
  }

  // ---- control-plane facts -------------------------------------------------------------------

  async findFact(name: string): Promise<string | undefined> {
    const row = await this.s.db
      .selectFrom("control_facts")
      .select("value")
      .where("name", "=", name)
      .executeTakeFirst();
    return row?.value;
  }

  async putFact(name: string, value: string): Promise<void> {
    await this.s.db
      .insertInto("control_facts")
      .values({ name, value })
      .onConflict((oc) => oc.column("name").doUpdateSet({ value }))
      .execute();
  }

  /** Removes a fact; true when this call removed it (one replica wins a one-time job). */
  async takeFact(name: string): Promise<string | undefined> {
    const row = await this.s.db
      .deleteFrom("control_facts")
      .where("name", "=", name)
      .returning("value")
      .executeTakeFirst();
    return row?.value;
  }
}
