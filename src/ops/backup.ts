// Backup and restore of the control plane (issue 16): one file holding the database and the key
// that opens the secrets sealed in it (when that key is the data directory's key file).
//
// File layout: the line `BERTH-BACKUP 1`, one line of JSON (dialect, time, key file), then the
// database itself: an SQLite database made with SQLite's online backup API (consistent while Berth
// runs), or a pg_dump archive in its custom format (one consistent snapshot), run as child
// processes with argument arrays; the password goes through the environment, never the command line.
//
// A restore goes into an empty database only, then migrates it and records that it was restored:
// the next start-up re-adopts the containers still running on the nodes (orchestrator/adoption.ts).
import { spawn } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import type { Config } from "../config/index.ts";
import { ensurePrivateDir } from "../config/private-files.ts";
import { openDatabase } from "../store/db.ts";
import { migrateToLatest } from "../store/migrations.ts";
import { isEmptyDatabase, sqliteFile, sqliteOnlineBackup } from "../store/snapshot.ts";
import { Store } from "../store/store.ts";

const MAGIC = "BERTH-BACKUP 1";
/** Header lines are short; a file whose first line is longer is not a Berth backup. */
const MAX_HEADER_BYTES = 64 * 1024;

export interface BackupHeader {
  dialect: "sqlite" | "postgres";
  createdAt: string;
  /** The data directory's secret.key (base64), when secrets are sealed with it rather than BERTH_SECRET_KEY. */
  keyFile: string | null;
}

export interface BackupOptions {
  config: Config;
  file: string;
  /** The pg_dump / pg_restore programs (PATH by default). */
  pgDump?: string;
  pgRestore?: string;
}

export class BackupError extends Error {}

export const RESTORED_FACT = "restored_from_backup";

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
  return { url: u.toString(), env: password ? { PGPASSWORD: password } : {} };
}

async function run(program: string, args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const child = spawn(program, args, {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, ...env },
  });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => {
    if (stderr.length < 8192) stderr += d.toString();
  });
  const [code] = (await Promise.race([
    once(child, "exit"),
    once(child, "error").then(([err]) => {
      throw new BackupError(`${program} could not run: ${(err as Error).message}`);
    }),
  ])) as [number | null];
  if (code !== 0) throw new BackupError(`${path.basename(program)} failed (exit ${code}): ${stderr.trim()}`);
}

function keyFileOf(config: Config): string | null {
  if (config.secretKey) return null;
  const file = path.join(config.dataDir, "secret.key");
  return fs.existsSync(file) ? fs.readFileSync(file, "utf8").trim() : null;
}

/** Makes a consistent online backup of the control plane into `file` (replaced atomically). */
export async function backupControlPlane(opts: BackupOptions): Promise<BackupHeader> {
  const { config } = opts;
  const dialect = config.databaseUrl.startsWith("sqlite:") ? "sqlite" : "postgres";
  const header: BackupHeader = { dialect, createdAt: new Date().toISOString(), keyFile: keyFileOf(config) };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-backup-"));
  const payload = path.join(dir, "payload");
  try {
    if (dialect === "sqlite") {
      const source = sqlitePath(config.databaseUrl);
      if (!fs.existsSync(source)) throw new BackupError(`no database at ${source} (check BERTH_DATA_DIR)`);
      await sqliteOnlineBackup(config.databaseUrl, payload);
    } else {
      const target = pgTarget(config.databaseUrl);
      await run(
        opts.pgDump ?? "pg_dump",
        ["--format=custom", "--no-owner", "--no-privileges", `--file=${payload}`, `--dbname=${target.url}`],
        target.env,
      );
    }
    const partial = `${opts.file}.partial`;
    fs.mkdirSync(path.dirname(path.resolve(opts.file)), { recursive: true });
    // A partial file a crash left behind keeps its mode when truncated: start from a new one.
    fs.rmSync(partial, { force: true });
    const out = fs.createWriteStream(partial, { mode: 0o600, flags: "wx" });
    out.write(`${MAGIC}\n${JSON.stringify(header)}\n`);
    await pipeline(fs.createReadStream(payload), out);
    fs.renameSync(partial, opts.file);
    return header;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Reads the header; returns it with the offset where the database begins. */
export function readBackupHeader(file: string): { header: BackupHeader; offset: number } {
  const fd = fs.openSync(file, "r");
  try {
    const buf = Buffer.alloc(MAX_HEADER_BYTES);
    const n = fs.readSync(fd, buf, 0, buf.length, 0);
    const text = buf.subarray(0, n).toString("latin1");
    const first = text.indexOf("\n");
    const second = first < 0 ? -1 : text.indexOf("\n", first + 1);
    if (first < 0 || second < 0 || text.slice(0, first) !== MAGIC)
      throw new BackupError(`${file} is not a Berth backup (it should begin with "${MAGIC}")`);
    let header: BackupHeader;
    try {
      header = JSON.parse(buf.subarray(first + 1, second).toString("utf8")) as BackupHeader;
    } catch {
      throw new BackupError(`${file}: the backup's header is damaged`);
    }
    if (header.dialect !== "sqlite" && header.dialect !== "postgres")
      throw new BackupError(`${file}: unknown database kind "${String(header.dialect)}"`);
    return { header, offset: second + 1 };
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Restores a backup into the configured database, which must be empty (a new data directory, or
 * a new PostgreSQL database), and into the data directory's key file. Berth must not be running on
 * that database. The next start-up re-adopts the containers still running on the nodes.
 */
export async function restoreControlPlane(opts: BackupOptions): Promise<BackupHeader> {
  const { config } = opts;
  const { header, offset } = readBackupHeader(opts.file);
  const dialect = config.databaseUrl.startsWith("sqlite:") ? "sqlite" : "postgres";
  if (header.dialect !== dialect) {
    throw new BackupError(
      `this backup holds a ${header.dialect} database, and BERTH_DATABASE_URL names a ${dialect} one`,
    );
  }
  checkKey(config, header);
  await ensureEmpty(config.databaseUrl);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-restore-"));
  try {
    if (dialect === "sqlite") {
      const target = sqlitePath(config.databaseUrl);
      for (const leftover of [target, `${target}-wal`, `${target}-shm`]) fs.rmSync(leftover, { force: true });
      ensurePrivateDir(path.dirname(target));
      await pipeline(
        fs.createReadStream(opts.file, { start: offset }),
        fs.createWriteStream(target, { mode: 0o600 }),
      );
    } else {
      const payload = path.join(dir, "payload");
      await pipeline(
        fs.createReadStream(opts.file, { start: offset }),
        fs.createWriteStream(payload, { mode: 0o600 }),
      );
      const target = pgTarget(config.databaseUrl);
      await run(
        opts.pgRestore ?? "pg_restore",
        [
          "--no-owner",
          "--no-privileges",
          "--exit-on-error",
          "--single-transaction",
          `--dbname=${target.url}`,
          payload,
        ],
        target.env,
      );
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  if (header.keyFile) {
    ensurePrivateDir(config.dataDir);
    const keyPath = path.join(config.dataDir, "secret.key");
    if (!fs.existsSync(keyPath)) fs.writeFileSync(keyPath, header.keyFile, { mode: 0o600, flag: "wx" });
  }
  const db = openDatabase(config.databaseUrl);
  try {
    // A backup of an older version comes up to this version's schema now, once.
    await migrateToLatest(db.kysely, db.dialect);
    const store = new Store(db.kysely, db.dialect);
    await store.transaction(async (tx) => {
      // The processes that held leases at backup time are not coming back.
      await tx.replicas.forgetAllReplicas();
      await tx.replicas.putFact(RESTORED_FACT, JSON.stringify({ backupCreatedAt: header.createdAt }));
    });
  } finally {
    await db.close();
  }
  return header;
}

/** Sealed secrets open only with the key they were sealed with. */
function checkKey(config: Config, header: BackupHeader): void {
  if (!header.keyFile) {
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
  if (fs.existsSync(keyPath) && fs.readFileSync(keyPath, "utf8").trim() !== header.keyFile) {
    throw new BackupError(`${keyPath} holds another key: restore into an empty data directory`);
  }
}

async function ensureEmpty(url: string): Promise<void> {
  if (await isEmptyDatabase(url)) return;
  throw new BackupError(
    url.startsWith("sqlite:")
      ? `${sqlitePath(url)} already holds a database: restore into an empty data directory`
      : "the database named by BERTH_DATABASE_URL is not empty: restore into an empty one",
  );
}
