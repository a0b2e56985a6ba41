// The control plane's backup and restore as a command (backup.ts), run where Berth's database is,
// with its BERTH_* settings: `berth admin backup|restore <file>` (the berth package's admin.mjs,
// loaded only by that command) and `npm run admin -- backup|restore <file>` (admin-command.ts).
// The file is sealed with the operator's secret: `--passphrase-file <file>` or `--key-file <file>`
// (or BERTH_BACKUP_PASSPHRASE_FILE / BERTH_BACKUP_KEY_FILE).
// With `--target-file <file>` (a JSON file the operator keeps private: endpoint, bucket, prefix,
// region, access_key, secret_key, path_style — the same fields as a backup target), `<file>` names
// a backup on that S3-compatible target (`berth-<time>.backup`, as the schedule uploads them):
// `backup` uploads it, `restore` downloads it into a private temporary file and restores from
// that (every check as for a local file), and `ls` lists them. Private addresses are reached only
// when BERTH_BACKUP_TARGET_ALLOW names them.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadBackupSecret } from "../config/backup-secret.ts";
import { ConfigError, loadConfig } from "../config/index.ts";
import { BackupError, backupControlPlane, restoreControlPlane } from "./backup.ts";
import { S3Target, TargetError } from "./s3-target.ts";
import { CONTROL_PREFIX } from "./scheduled-backups.ts";

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
  "--target-file": "BERTH_BACKUP_TARGET_FILE",
};

/** The S3 target a `--target-file` describes, or a one-line refusal. */
function targetFrom(file: string, allow: string[]): S3Target {
  let t: Record<string, unknown>;
  try {
    t = JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, unknown>;
  } catch (err) {
    throw new BackupError(
      `--target-file ${file} is not a readable JSON file (${(err as Error).message.split("\n")[0]})`,
    );
  }
  const text = (k: string) => (typeof t[k] === "string" ? (t[k] as string) : "");
  for (const k of ["endpoint", "bucket", "access_key", "secret_key"])
    if (!text(k)) throw new BackupError(`--target-file ${file} has no "${k}"`);
  const prefix = text("prefix").replace(/^\/+/, "");
  return new S3Target(
    {
      name: path.basename(file),
      endpoint: text("endpoint"),
      bucket: text("bucket"),
      prefix: prefix === "" || prefix.endsWith("/") ? prefix : `${prefix}/`,
      region: text("region") || "us-east-1",
      accessKey: text("access_key"),
      secretKey: text("secret_key"),
      pathStyle: t.path_style !== false,
    },
    { allow, insecure: [], timeoutMs: 10_000, allowSetting: "BERTH_BACKUP_TARGET_ALLOW" },
  );
}

/** Runs `backup <file>` or `restore <file>`; returns the exit status (2 usage, 1 refused). */
export async function admin(
  argv: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
  io: AdminIo = stdio,
  usage = "usage: berth admin backup|restore <file> --passphrase-file <file> | --key-file <file> [--target-file <s3 target.json>]; berth admin ls --target-file <file>",
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
  const targetFile = withOptions.BERTH_BACKUP_TARGET_FILE;
  const listing = command === "ls" && targetFile && !file;
  if (!listing && ((command !== "backup" && command !== "restore") || !file || rest.length > 0)) {
    io.err(usage);
    return 2;
  }
  let target: S3Target | undefined;
  let scratch: string | undefined;
  try {
    const config = loadConfig(withOptions);
    if (targetFile) target = targetFrom(targetFile, config.backupTargetAllow);
    if (listing) {
      for (const o of await target!.list(CONTROL_PREFIX))
        io.out(`${o.key.slice(CONTROL_PREFIX.length)}\t${o.bytes}\t${new Date(o.modified).toISOString()}`);
      return 0;
    }
    if (target && (file!.includes("/") || !file!.endsWith(".backup")))
      throw new BackupError(`${file} is not a backup's name on the target (berth-<time>.backup)`);
    const secret = loadBackupSecret(withOptions);
    // On a target the file passes through a private temporary directory, removed in every case.
    if (target) scratch = fs.mkdtempSync(path.join(os.tmpdir(), "berth-admin-"));
    const local = target ? path.join(scratch!, file!) : file!;
    let header: { dialect: string; createdAt: string };
    if (command === "backup") {
      header = await backupControlPlane({ config, file: local, secret });
      await target?.put(CONTROL_PREFIX + file, local);
    } else {
      await target?.download(CONTROL_PREFIX + file, local);
      header = await restoreControlPlane({ config, file: local, secret });
    }
    io.out(
      `${command === "backup" ? "backed up to" : "restored from"} ${file}${target ? ` on ${targetFile}` : ""} (${header.dialect} database, backup made ${header.createdAt})`,
    );
    return 0;
  } catch (err) {
    if (err instanceof ConfigError || err instanceof BackupError || err instanceof TargetError) {
      io.err(`berth admin: ${err.message}`);
      return 1;
    }
    // Anything else (a full disk, a permission) is still one line, never a stack trace.
    io.err(`berth admin: ${command} failed: ${(err as Error).message?.split("\n")[0] ?? String(err)}`);
    return 1;
  } finally {
    target?.close();
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  }
}
