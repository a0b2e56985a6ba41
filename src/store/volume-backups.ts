// Queries of volume backups and their schedules (issue 31, orchestrator/volume-backups.ts).
import type { VolumeBackupScheduleTable, VolumeBackupTable } from "./schema.ts";
import type { Kernel } from "./types.ts";

export type VolumeBackupRow = Omit<VolumeBackupTable, "id"> & { id: number };
export type VolumeBackupScheduleRow = VolumeBackupScheduleTable;

export class VolumeBackupStore {
  constructor(private readonly s: Kernel) {}

  async insert(row: Omit<VolumeBackupRow, "id">): Promise<VolumeBackupRow> {
    return this.s.db.insertInto("volume_backups").values(row).returningAll().executeTakeFirstOrThrow();
  }

  async find(uuid: string): Promise<VolumeBackupRow | undefined> {
    return this.s.db.selectFrom("volume_backups").selectAll().where("uuid", "=", uuid).executeTakeFirst();
  }

  async update(
    uuid: string,
    patch: Partial<
      Pick<VolumeBackupRow, "state" | "finished" | "size_bytes" | "archives" | "error" | "action_uuid">
    >,
  ): Promise<void> {
    await this.s.db.updateTable("volume_backups").set(patch).where("uuid", "=", uuid).execute();
  }

  async remove(uuid: string): Promise<void> {
    await this.s.db.deleteFrom("volume_backups").where("uuid", "=", uuid).execute();
  }

  /** A namespace's backups (of one service, when given), newest first. */
  async list(
    filter: { namespace: string; service?: string },
    page: { limit: number; offset: number },
  ): Promise<{ rows: VolumeBackupRow[]; total: number }> {
    let base = this.s.db.selectFrom("volume_backups").where("namespace", "=", filter.namespace);
    if (filter.service !== undefined) base = base.where("service_uuid", "=", filter.service);
    const rows = await base.selectAll().orderBy("id", "desc").limit(page.limit).offset(page.offset).execute();
    const count = await base.select((eb) => eb.fn.countAll<string | number>().as("n")).executeTakeFirst();
    return { rows, total: Number(count?.n ?? 0) };
  }

  /** A service's successful backups, newest first (retention keeps the first ones). */
  async successfulOfService(serviceUuid: string): Promise<VolumeBackupRow[]> {
    return this.s.db
      .selectFrom("volume_backups")
      .selectAll()
      .where("service_uuid", "=", serviceUuid)
      .where("state", "=", "Success")
      .orderBy("id", "desc")
      .execute();
  }

  async putSchedule(row: VolumeBackupScheduleRow): Promise<void> {
    const { service_uuid, ...rest } = row;
    await this.s.db
      .insertInto("volume_backup_schedules")
      .values(row)
      .onConflict((oc) => oc.column("service_uuid").doUpdateSet(rest))
      .execute();
  }

  async findSchedule(serviceUuid: string): Promise<VolumeBackupScheduleRow | undefined> {
    return this.s.db
      .selectFrom("volume_backup_schedules")
      .selectAll()
      .where("service_uuid", "=", serviceUuid)
      .executeTakeFirst();
  }

  async removeSchedule(serviceUuid: string): Promise<void> {
    await this.s.db.deleteFrom("volume_backup_schedules").where("service_uuid", "=", serviceUuid).execute();
  }

  /** Schedules due at `now`. */
  async dueSchedules(now: number): Promise<VolumeBackupScheduleRow[]> {
    return this.s.db.selectFrom("volume_backup_schedules").selectAll().where("next_at", "<=", now).execute();
  }

  /** Moves a due schedule on, once: true for the one caller that moved it (one replica runs it). */
  async claimSchedule(serviceUuid: string, dueAt: number, nextAt: number): Promise<boolean> {
    const r = await this.s.db
      .updateTable("volume_backup_schedules")
      .set({ next_at: nextAt })
      .where("service_uuid", "=", serviceUuid)
      .where("next_at", "=", dueAt)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) === 1;
  }
}
