// The control plane's backup and restore as a command (backup.ts), run where Berth's database is,
// with its BERTH_* settings: `berth admin backup|restore <file>` (the berth package's admin.mjs,
// loaded only by that command) and `npm run admin -- backup|restore <file>` (admin-command.ts).
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

/** Runs `backup <file>` or `restore <file>`; returns the exit status (2 usage, 1 refused). */
export async function admin(
  argv: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
  io: AdminIo = stdio,
  usage = "usage: berth admin backup <file> | restore <file>",
): Promise<number> {
  const [command, file, ...rest] = argv;
  if ((command !== "backup" && command !== "restore") || !file || rest.length > 0) {
    io.err(usage);
    return 2;
  }
  try {
    const config = loadConfig(env);
    const header =
      command === "backup"
        ? await backupControlPlane({ config, file })
        : await restoreControlPlane({ config, file });
    io.out(
      `${command === "backup" ? "backed up to" : "restored from"} ${file} (${header.dialect} database, backup made ${header.createdAt})`,
    );
    return 0;
  } catch (err) {
    if (err instanceof ConfigError || err instanceof BackupError) {
      io.err(`berth admin: ${err.message}`);
      return 1;
    }
    throw err;
  }
}
