// The control plane's backup and restore as a command (backup.ts), run where Berth's database is,
// with its BERTH_* settings: `berth admin backup|restore <file>` (the berth package's admin.mjs,
// loaded only by that command) and `npm run admin -- backup|restore <file>` (admin-command.ts).
// The file is sealed with the operator's secret: `--passphrase-file <file>` or `--key-file <file>`
// (or BERTH_BACKUP_PASSPHRASE_FILE / BERTH_BACKUP_KEY_FILE).
import { loadBackupSecret } from "../config/backup-secret.ts";
import { ConfigError, loadConfig } from "../config/index.ts";
import { BackupError, backupControlPlane, restoreControlPlane } from "./backup.ts";

export interface AdminIo {
  out(line: string): void;
  err(line: string): void;
}

const stdio: AdminIo = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

const SECRET_OPTIONS: Record<string, string> = {
  "--passphrase-file": "BERTH_BACKUP_PASSPHRASE_FILE",
  "--key-file": "BERTH_BACKUP_KEY_FILE",
};

/** Runs `backup <file>` or `restore <file>`; returns the exit status (2 usage, 1 refused). */
export async function admin(
  argv: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
  io: AdminIo = stdio,
  usage = "usage: berth admin backup|restore <file> --passphrase-file <file> | --key-file <file>",
): Promise<number> {
  const args: string[] = [];
  const withOptions = { ...env };
  for (let i = 0; i < argv.length; i++) {
    const variable = SECRET_OPTIONS[argv[i]!];
    if (variable === undefined) {
      args.push(argv[i]!);
      continue;
    }
    const value = argv[++i];
    if (!value) {
      io.err(usage);
      return 2;
    }
    withOptions[variable] = value;
  }
  const [command, file, ...rest] = args;
  if ((command !== "backup" && command !== "restore") || !file || rest.length > 0) {
    io.err(usage);
    return 2;
  }
  try {
    const config = loadConfig(withOptions);
    const secret = loadBackupSecret(withOptions);
    const header =
      command === "backup"
        ? await backupControlPlane({ config, file, secret })
        : await restoreControlPlane({ config, file, secret });
    io.out(
      `${command === "backup" ? "backed up to" : "restored from"} ${file} (${header.dialect} database, backup made ${header.createdAt})`,
    );
    return 0;
  } catch (err) {
    if (err instanceof ConfigError || err instanceof BackupError) {
      io.err(`berth admin: ${err.message}`);
      return 1;
    }
    // Anything else (a full disk, a permission) is still one line, never a stack trace.
    io.err(`berth admin: ${command} failed: ${(err as Error).message?.split("\n")[0] ?? String(err)}`);
    return 1;
  }
}
