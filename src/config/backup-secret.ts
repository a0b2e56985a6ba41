// The secret that seals control-plane backups (ops/backup-file.ts), given by the operator:
// BERTH_BACKUP_PASSPHRASE_FILE (a file whose first line is the passphrase) or BERTH_BACKUP_KEY_FILE
// (a file of at least 32 bytes, used whole). Never a value on a command line or in the
// environment itself, where other users' `ps` and the process's children would see it.
import fs from "node:fs";
import { ConfigError } from "./index.ts";

export interface BackupSecret {
  kind: "passphrase" | "key-file";
  bytes: Buffer;
  /** Where it came from, for messages. */
  source: string;
}

export const MIN_PASSPHRASE_CHARS = 12;
export const MIN_KEY_FILE_BYTES = 32;

/** The backup secret the environment names, or undefined when it names none. */
export function loadBackupSecret(env: NodeJS.ProcessEnv = process.env): BackupSecret | undefined {
  const passphraseFile = env.BERTH_BACKUP_PASSPHRASE_FILE || undefined;
  const keyFile = env.BERTH_BACKUP_KEY_FILE || undefined;
  if (passphraseFile && keyFile)
    throw new ConfigError(
      "BERTH_BACKUP_PASSPHRASE_FILE and BERTH_BACKUP_KEY_FILE name two secrets: give one",
    );
  const read = (file: string, variable: string): Buffer => {
    try {
      return fs.readFileSync(file);
    } catch (err) {
      throw new ConfigError(
        `${variable}: ${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? "error"})`,
      );
    }
  };
  if (passphraseFile) {
    const text =
      read(passphraseFile, "BERTH_BACKUP_PASSPHRASE_FILE").toString("utf8").split(/\r?\n/)[0] ?? "";
    if ([...text].length < MIN_PASSPHRASE_CHARS)
      throw new ConfigError(
        `BERTH_BACKUP_PASSPHRASE_FILE: the passphrase in ${passphraseFile} must be at least ${MIN_PASSPHRASE_CHARS} characters`,
      );
    return { kind: "passphrase", bytes: Buffer.from(text, "utf8"), source: passphraseFile };
  }
  if (keyFile) {
    const bytes = read(keyFile, "BERTH_BACKUP_KEY_FILE");
    if (bytes.length < MIN_KEY_FILE_BYTES)
      throw new ConfigError(
        `BERTH_BACKUP_KEY_FILE: ${keyFile} must hold at least ${MIN_KEY_FILE_BYTES} bytes`,
      );
    return { kind: "key-file", bytes, source: keyFile };
  }
  return undefined;
}
