// Backup and restore of the control plane (issues 16, 31): one sealed file (backup-file.ts) with
// everything a restore needs to take a running platform back: the database (SQLite's online
// backup API, consistent while Berth runs, or a pg_dump archive in its custom format), the data
// directory's key file (when secrets are sealed with it rather than BERTH_SECRET_KEY), and local
// nodes' records (`local-nodes/host.json`, `local-nodes/nodes/*/node.json`: which engines run on
// this host, by pid and start time, so the restored Berth finds them running; their data-roots
// stay where the engines run). pg_dump and pg_restore run as child processes with argument
// arrays; the password goes through the environment, never the command line.
//
// A restore checks the whole file, decrypts it into a staging directory beside the data
// directory, checks the database there (SQLite: integrity and foreign keys, then migrated and
// marked restored; PostgreSQL: `pg_restore --list`, then one transaction), and only then renames
// the entries into place: a refused restore leaves the target as it was. The next start-up
// re-adopts the containers still running on the nodes (orchestrator/adoption.ts).
import { spawn } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import type { BackupSecret } from "../config/backup-secret.ts";
import type { Config } from "../config/index.ts";
import { ensurePrivateDir } from "../config/private-files.ts";
import { openDatabase } from "../store/db.ts";
import { migrateToLatest } from "../store/migrations.ts";
import { isEmptyDatabase, sqliteFile, sqliteFileProblems, sqliteOnlineBackup } from "../store/snapshot.ts";
import { Store } from "../store/store.ts";
import { BackupError, type Entry, openSealed, readHead, writeSealed } from "./backup-file.ts";

export { BackupError } from "./backup-file.ts";

export interface BackupHeader {
  dialect: "sqlite" | "postgres";
  createdAt: string;
  /** Entries in the file: database, secret.key, local-nodes/… */
  entries: string[];
}

export interface BackupOptions {
  config: Config;
  file: string;
  /** The operator's secret that seals (and opens) the file. */
  secret: BackupSecret | undefined;
  /** The pg_dump / pg_restore programs (PATH by default). */
  pgDump?: string;
  pgRestore?: string;
}

export const RESTORED_FACT = "restored_from_backup";
const LOCAL_NODES = "local-nodes";

function sqlitePath(url: string): string {
  try {
    return sqliteFile(url);
  } catch (err) {
    throw new BackupError((err as Error).message);
  }
}

/** The connection URL without its password, and the password for PGPASSWORD. */
function pgTarget(url: string): { url: string; env: NodeJS.ProcessEnv } {
  const u = new URL(url);
  const password = decodeURIComponent(u.password);
  u.password = "";
  // Berth's own driver (pg) reads `+` in the query as a space, as URLSearchParams writes it
  // (`options=-c+search_path%3Dx`); libpq would read a literal `+`: pg_dump is given %20.
  u.search = u.search.replace(/\+/g, "%20");
  return { url: u.toString(), env: password ? { PGPASSWORD: password } : {} };
}

async function run(program: string, args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  const child = spawn(program, args, {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  let stderr = "";
  let stdout = "";
  child.stdout.on("data", (d: Buffer) => {
    if (stdout.length < 1 << 20) stdout += d.toString();
  });
  child.stderr.on("data", (d: Buffer) => {
    if (stderr.length < 8192) stderr += d.toString();
  });
  const [code] = (await Promise.race([
    once(child, "exit"),
    once(child, "error").then(([err]) => {
      throw new BackupError(`${program} could not run: ${(err as Error).message}`);
    }),
  ])) as [number | null];
  if (code !== 0)
    throw new BackupError(
      `${path.basename(program)} failed (exit ${code}): ${stderr.trim().split("\n")[0] ?? ""}`,
    );
  return stdout;
}

function dialectOf(config: Config): "sqlite" | "postgres" {
  return config.databaseUrl.startsWith("sqlite:") ? "sqlite" : "postgres";
}

function needSecret(secret: BackupSecret | undefined): BackupSecret {
  if (secret) return secret;
  throw new BackupError(
    "a backup is sealed with a secret you give: --passphrase-file <file> or --key-file <file> (BERTH_BACKUP_PASSPHRASE_FILE, BERTH_BACKUP_KEY_FILE)",
  );
}

/** Local nodes' records under the data directory: host.json and each node's node.json. */
function localNodeRecords(dataDir: string): Entry[] {
  const root = path.join(dataDir, LOCAL_NODES);
  const out: Entry[] = [];
  const host = path.join(root, "host.json");
  if (fs.existsSync(host)) out.push({ name: `${LOCAL_NODES}/host.json`, file: host });
  const nodes = path.join(root, "nodes");
  if (!fs.existsSync(nodes)) return out;
  for (const short of fs.readdirSync(nodes).sort()) {
    const record = path.join(nodes, short, "node.json");
    if (/^[\w-]+$/.test(short) && fs.existsSync(record))
      out.push({ name: `${LOCAL_NODES}/nodes/${short}/node.json`, file: record });
  }
  return out;
}

/** Makes a consistent online backup of the control plane into `file` (replaced atomically). */
export async function backupControlPlane(opts: BackupOptions): Promise<BackupHeader> {
  const { config } = opts;
  const secret = needSecret(opts.secret);
  const dialect = dialectOf(config);
  const createdAt = new Date().toISOString();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-backup-"));
  try {
    const database = path.join(dir, "database");
    if (dialect === "sqlite") {
      const source = sqlitePath(config.databaseUrl);
      if (!fs.existsSync(source)) throw new BackupError(`no database at ${source} (check BERTH_DATA_DIR)`);
      await sqliteOnlineBackup(config.databaseUrl, database);
    } else {
      const target = pgTarget(config.databaseUrl);
      await run(
        opts.pgDump ?? "pg_dump",
        ["--format=custom", "--no-owner", "--no-privileges", `--file=${database}`, `--dbname=${target.url}`],
        target.env,
      );
    }
    const entries: Entry[] = [{ name: "database", file: database }];
    const keyFile = path.join(config.dataDir, "secret.key");
    if (!config.secretKey && fs.existsSync(keyFile)) entries.push({ name: "secret.key", file: keyFile });
    // Copied first: a node deployed meanwhile rewrites its record by rename, never in place.
    for (const r of localNodeRecords(config.dataDir)) {
      const copy = path.join(dir, r.name);
      fs.mkdirSync(path.dirname(copy), { recursive: true, mode: 0o700 });
      fs.copyFileSync(r.file, copy);
      entries.push({ name: r.name, file: copy });
    }
    await writeSealed({ file: opts.file, dialect, createdAt, secret, entries });
    return { dialect, createdAt, entries: entries.map((e) => e.name) };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The header of a backup file (no secret needed). */
export function readBackupHeader(file: string): { dialect: string; createdAt: string; version: number } {
  const head = readHead(file);
  return { dialect: head.header.dialect, createdAt: head.header.createdAt, version: head.version };
}

/**
 * Restores a backup into the configured database, which must be empty (a new data directory, or
 * a new PostgreSQL database), and the data directory's key file and local nodes' records. Berth
 * must not be running on that database. Nothing of the target changes unless all of it succeeds.
 */
export async function restoreControlPlane(opts: BackupOptions): Promise<BackupHeader> {
  const { config } = opts;
  const head = readHead(opts.file);
  const dialect = dialectOf(config);
  if (head.header.dialect !== dialect) {
    throw new BackupError(
      `this backup holds a ${head.header.dialect} database, and BERTH_DATABASE_URL names a ${dialect} one`,
    );
  }
  const carriesKey = head.version === 1 ? head.header.keyFile !== null : head.header.keyFile;
  await ensureEmpty(config.databaseUrl);
  checkKeyTarget(config, carriesKey);
  const localTarget = path.join(config.dataDir, LOCAL_NODES);
  if (fs.existsSync(localTarget) && fs.readdirSync(localTarget).length > 0)
    throw new BackupError(
      `${localTarget} already holds local nodes' state: restore into an empty data directory`,
    );

  const parent = path.dirname(config.dataDir);
  ensurePrivateDir(parent);
  const staging = fs.mkdtempSync(path.join(parent, `.${path.basename(config.dataDir)}.restore-`));
  fs.chmodSync(staging, 0o700);
  try {
    let entries: string[];
    if (head.version === 2) {
      entries = (await openSealed(opts.file, opts.secret, staging)).entries;
    } else {
      // A version 1 file (the key in clear, no checksum): its database is checked like any.
      await pipeline(
        fs.createReadStream(opts.file, { start: head.offset }),
        fs.createWriteStream(path.join(staging, "database"), { mode: 0o600, flags: "wx" }),
      );
      entries = ["database"];
      if (head.header.keyFile) {
        fs.writeFileSync(path.join(staging, "secret.key"), head.header.keyFile, { mode: 0o600, flag: "wx" });
        entries.push("secret.key");
      }
    }
    if (!entries.includes("database"))
      throw new BackupError(`${opts.file} is corrupted: it holds no database`);
    const marker = JSON.stringify({ backupCreatedAt: head.header.createdAt });
    if (dialect === "sqlite") await restoreSqlite(config, path.join(staging, "database"), marker, opts.file);
    else await restorePostgres(config, path.join(staging, "database"), marker, opts);
    ensurePrivateDir(config.dataDir);
    if (entries.includes("secret.key")) {
      const keyPath = path.join(config.dataDir, "secret.key");
      if (!fs.existsSync(keyPath)) fs.renameSync(path.join(staging, "secret.key"), keyPath);
    }
    if (fs.existsSync(path.join(staging, LOCAL_NODES))) {
      if (fs.existsSync(localTarget)) fs.rmdirSync(localTarget); // empty: checked above
      fs.renameSync(path.join(staging, LOCAL_NODES), localTarget);
    }
    return { dialect, createdAt: head.header.createdAt, entries };
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}

/** Checks, migrates and marks the staged SQLite database, then renames it into place. */
async function restoreSqlite(config: Config, staged: string, marker: string, file: string): Promise<void> {
  const problems = sqliteFileProblems(staged);
  if (problems.length > 0)
    throw new BackupError(`${file} is corrupted: its database fails SQLite's checks (${problems[0]})`);
  await migrateAndMark(`sqlite:${staged}`, marker);
  const target = sqlitePath(config.databaseUrl);
  ensurePrivateDir(path.dirname(target));
  for (const leftover of [`${target}-wal`, `${target}-shm`]) fs.rmSync(leftover, { force: true });
  // A clean close leaves no write-ahead log; one left behind goes with its database.
  if (fs.existsSync(`${staged}-wal`)) moveInto(`${staged}-wal`, `${target}-wal`);
  moveInto(staged, target);
}

/** `pg_restore --list` checks the archive; the restore is one transaction (all or nothing). */
async function restorePostgres(config: Config, staged: string, marker: string, opts: BackupOptions) {
  await run(opts.pgRestore ?? "pg_restore", ["--list", staged], {}).catch((err: Error) => {
    throw new BackupError(`${opts.file} is corrupted: pg_restore cannot read its database (${err.message})`);
  });
  const target = pgTarget(config.databaseUrl);
  await run(
    opts.pgRestore ?? "pg_restore",
    [
      "--no-owner",
      "--no-privileges",
      "--exit-on-error",
      "--single-transaction",
      `--dbname=${target.url}`,
      staged,
    ],
    target.env,
  );
  await migrateAndMark(config.databaseUrl, marker);
}

/** A backup of an older version comes up to this version's schema once, and is marked restored. */
async function migrateAndMark(url: string, marker: string): Promise<void> {
  const db = openDatabase(url);
  try {
    await migrateToLatest(db.kysely, db.dialect);
    const store = new Store(db.kysely, db.dialect);
    await store.transaction(async (tx) => {
      // The processes that held leases at backup time are not coming back.
      await tx.replicas.forgetAllReplicas();
      await tx.replicas.putFact(RESTORED_FACT, marker);
    });
  } finally {
    await db.close();
  }
}

/** Renames `from` to `to`; across file systems, through a copy renamed when complete. */
function moveInto(from: string, to: string): void {
  try {
    fs.renameSync(from, to);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EXDEV") throw err;
    const partial = `${to}.restore-partial`;
    fs.copyFileSync(from, partial);
    fs.chmodSync(partial, 0o600);
    fs.renameSync(partial, to);
  }
}

/** Sealed secrets open only with the key they were sealed with. */
function checkKeyTarget(config: Config, carriesKey: boolean): void {
  if (!carriesKey) {
    if (!config.secretKey) {
      throw new BackupError(
        "this backup's secrets were sealed with BERTH_SECRET_KEY: set the same BERTH_SECRET_KEY to restore it",
      );
    }
    return;
  }
  if (config.secretKey) {
    throw new BackupError(
      "this backup's secrets were sealed with a key file, which it carries: unset BERTH_SECRET_KEY to restore it",
    );
  }
  const keyPath = path.join(config.dataDir, "secret.key");
  if (fs.existsSync(keyPath))
    throw new BackupError(`${keyPath} already exists: restore into an empty data directory`);
}

async function ensureEmpty(url: string): Promise<void> {
  if (await isEmptyDatabase(url)) return;
  throw new BackupError(
    url.startsWith("sqlite:")
      ? `${sqlitePath(url)} already holds a database: restore into an empty data directory`
      : "the database named by BERTH_DATABASE_URL is not empty: restore into an empty one",
  );
}
