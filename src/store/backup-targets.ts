// Queries of S3-compatible backup targets (issue 31, ops/backup-targets.ts).
import type { BackupTargetTable } from "./schema.ts";
import type { Kernel } from "./types.ts";

export type BackupTargetRow = BackupTargetTable;

export class BackupTargetStore {
  constructor(private readonly s: Kernel) {}

  async insert(row: BackupTargetRow): Promise<void> {
    await this.s.db.insertInto("backup_targets").values(row).execute();
  }

  async findByName(name: string): Promise<BackupTargetRow | undefined> {
    return this.s.db.selectFrom("backup_targets").selectAll().where("name", "=", name).executeTakeFirst();
  }

  async find(uuid: string): Promise<BackupTargetRow | undefined> {
    return this.s.db.selectFrom("backup_targets").selectAll().where("uuid", "=", uuid).executeTakeFirst();
  }

  async list(): Promise<BackupTargetRow[]> {
    return this.s.db.selectFrom("backup_targets").selectAll().orderBy("name").execute();
  }

  async remove(uuid: string): Promise<void> {
    await this.s.db.deleteFrom("backup_targets").where("uuid", "=", uuid).execute();
  }

  /** Whether a volume backup or a schedule still names the target. */
  async inUse(uuid: string): Promise<boolean> {
    const b = await this.s.db
      .selectFrom("volume_backups")
      .select("uuid")
      .where("target_uuid", "=", uuid)
      .limit(1)
      .executeTakeFirst();
    if (b) return true;
    const s = await this.s.db
      .selectFrom("volume_backup_schedules")
      .select("service_uuid")
      .where("target_uuid", "=", uuid)
      .limit(1)
      .executeTakeFirst();
    return s !== undefined;
  }
}
