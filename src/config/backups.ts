// Scheduled control-plane backups' settings (issue 31, ops/scheduled-backups.ts), read by
// loadConfig (index.ts) from the environment it is given: BERTH_BACKUP_DIR (a directory) or
// BERTH_BACKUP_TARGET (the name of an S3 backup target, ops/backup-targets.ts) — neither: no
// schedule — BERTH_BACKUP_EVERY_HOURS, the retention BERTH_BACKUP_KEEP (the newest N),
// BERTH_BACKUP_KEEP_DAILY and BERTH_BACKUP_KEEP_WEEKLY (tiers, 0 by default), and the secret's
// file (backup-secret.ts), which is required: backups are sealed.
import path from "node:path";

export interface BackupSettings {
  /** The directory backups are written to (undefined: they go to `target`). */
  dir?: string;
  /** The backup target's name (BERTH_BACKUP_TARGET); it wins over `dir`. */
  target?: string;
  everyHours: number;
  keep: number;
  keepDaily: number;
  keepWeekly: number;
  /** BERTH_BACKUP_PASSPHRASE_FILE / BERTH_BACKUP_KEY_FILE, read at each backup (loadBackupSecret). */
  secretFiles: Record<string, string | undefined>;
}

function whole(name: string, value: string | undefined, fallback: number, min: number): number {
  if (value === undefined || value === "") return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min)
    throw new Error(`${name} must be a whole number of at least ${min}, got "${value}"`);
  return n;
}

export function parseBackupSettings(env: NodeJS.ProcessEnv): BackupSettings | undefined {
  if (!env.BERTH_BACKUP_DIR && !env.BERTH_BACKUP_TARGET) return undefined;
  const secretFiles = {
    BERTH_BACKUP_PASSPHRASE_FILE: env.BERTH_BACKUP_PASSPHRASE_FILE || undefined,
    BERTH_BACKUP_KEY_FILE: env.BERTH_BACKUP_KEY_FILE || undefined,
  };
  const which = env.BERTH_BACKUP_TARGET ? "BERTH_BACKUP_TARGET" : "BERTH_BACKUP_DIR";
  if (!secretFiles.BERTH_BACKUP_PASSPHRASE_FILE && !secretFiles.BERTH_BACKUP_KEY_FILE)
    throw new Error(
      `${which} needs BERTH_BACKUP_PASSPHRASE_FILE or BERTH_BACKUP_KEY_FILE: backups are sealed`,
    );
  return {
    ...(env.BERTH_BACKUP_DIR ? { dir: path.resolve(env.BERTH_BACKUP_DIR) } : {}),
    ...(env.BERTH_BACKUP_TARGET ? { target: env.BERTH_BACKUP_TARGET } : {}),
    everyHours: whole("BERTH_BACKUP_EVERY_HOURS", env.BERTH_BACKUP_EVERY_HOURS, 24, 1),
    keep: whole("BERTH_BACKUP_KEEP", env.BERTH_BACKUP_KEEP, 7, 1),
    keepDaily: whole("BERTH_BACKUP_KEEP_DAILY", env.BERTH_BACKUP_KEEP_DAILY, 0, 0),
    keepWeekly: whole("BERTH_BACKUP_KEEP_WEEKLY", env.BERTH_BACKUP_KEEP_WEEKLY, 0, 0),
    secretFiles,
  };
}
