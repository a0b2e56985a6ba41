// Scheduled control-plane backups' settings (issue 31, ops/scheduled-backups.ts), read by
// loadConfig (index.ts) from the environment it is given: BERTH_BACKUP_DIR (unset: no schedule),
// BERTH_BACKUP_EVERY_HOURS, BERTH_BACKUP_KEEP, and the secret's file (backup-secret.ts), which is
// required: backups are sealed.
import path from "node:path";

export interface BackupSettings {
  dir: string;
  everyHours: number;
  keep: number;
  /** BERTH_BACKUP_PASSPHRASE_FILE / BERTH_BACKUP_KEY_FILE, read at each backup (loadBackupSecret). */
  secretFiles: Record<string, string | undefined>;
}

function positive(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined || value === "") return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`${name} must be a whole number of at least 1, got "${value}"`);
  return n;
}

export function parseBackupSettings(env: NodeJS.ProcessEnv): BackupSettings | undefined {
  if (!env.BERTH_BACKUP_DIR) return undefined;
  const secretFiles = {
    BERTH_BACKUP_PASSPHRASE_FILE: env.BERTH_BACKUP_PASSPHRASE_FILE || undefined,
    BERTH_BACKUP_KEY_FILE: env.BERTH_BACKUP_KEY_FILE || undefined,
  };
  if (!secretFiles.BERTH_BACKUP_PASSPHRASE_FILE && !secretFiles.BERTH_BACKUP_KEY_FILE)
    throw new Error(
      "BERTH_BACKUP_DIR needs BERTH_BACKUP_PASSPHRASE_FILE or BERTH_BACKUP_KEY_FILE: backups are sealed",
    );
  return {
    dir: path.resolve(env.BERTH_BACKUP_DIR),
    everyHours: positive("BERTH_BACKUP_EVERY_HOURS", env.BERTH_BACKUP_EVERY_HOURS, 24),
    keep: positive("BERTH_BACKUP_KEEP", env.BERTH_BACKUP_KEEP, 7),
    secretFiles,
  };
}
