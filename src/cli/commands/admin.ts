// `berth admin backup|restore <file>`: the control plane's backup and restore (src/ops/backup.ts),
// run where Berth's database is, with its BERTH_* settings. The only commands that open the
// database rather than call the API: they load admin.mjs (with the drivers) when they run.
import type { Command } from "commander";
import { loadPart } from "../parts.ts";

interface AdminModule {
  admin(
    argv: readonly string[],
    env: NodeJS.ProcessEnv,
    io: { out(line: string): void; err(line: string): void },
    usage: string,
  ): Promise<number>;
}

interface AdminOptions {
  dataDir?: string;
  databaseUrl?: string;
  passphraseFile?: string;
  keyFile?: string;
  targetFile?: string;
}

export function registerAdmin(program: Command): void {
  const admin = program
    .command("admin")
    .description(
      "operate a Berth server where it runs: backup and restore of its database (BERTH_* settings)",
    );
  const verb = (name: "backup" | "restore" | "ls", description: string) =>
    admin
      .command(name === "ls" ? "ls" : `${name} <file>`)
      .description(description)
      .option("--data-dir <dir>", "Berth's data directory (default BERTH_DATA_DIR, else ./data)")
      .option(
        "--database-url <url>",
        "Berth's database (default BERTH_DATABASE_URL, else SQLite in the data directory)",
      )
      .option(
        "--passphrase-file <file>",
        "seal (open) the backup with the passphrase on this file's first line, 12 characters or more (default BERTH_BACKUP_PASSPHRASE_FILE)",
      )
      .option(
        "--key-file <file>",
        "seal (open) the backup with this file's bytes, 32 or more (default BERTH_BACKUP_KEY_FILE)",
      )
      .option(
        "--target-file <file>",
        "an S3-compatible target (JSON: endpoint, bucket, prefix, region, access_key, secret_key, path_style): <file> names a backup on it",
      )
      .action(async (...args: unknown[]) => {
        const file = name === "ls" ? undefined : (args[0] as string);
        const o = (name === "ls" ? args[0] : args[1]) as AdminOptions;
        const mod = await loadPart<AdminModule>("admin");
        const env = { ...process.env };
        if (o.dataDir) env.BERTH_DATA_DIR = o.dataDir;
        if (o.databaseUrl) env.BERTH_DATABASE_URL = o.databaseUrl;
        if (o.passphraseFile) env.BERTH_BACKUP_PASSPHRASE_FILE = o.passphraseFile;
        if (o.keyFile) env.BERTH_BACKUP_KEY_FILE = o.keyFile;
        if (o.targetFile) env.BERTH_BACKUP_TARGET_FILE = o.targetFile;
        process.exitCode = await mod.admin(
          file === undefined ? [name] : [name, file],
          env,
          {
            out: (line) => process.stdout.write(`${line}\n`),
            err: (line) => process.stderr.write(`${line}\n`),
          },
          name === "ls" ? "usage: berth admin ls --target-file <file>" : `usage: berth admin ${name} <file>`,
        );
      });
  verb(
    "backup",
    "write one sealed file with what a restore needs (database, key file, local nodes' records) while Berth runs",
  );
  verb(
    "restore",
    "check a backup, then restore it into an empty data directory or database (Berth stopped); the next start re-adopts containers",
  );
  verb("ls", "list the control-plane backups on an S3-compatible target (--target-file)");
}
