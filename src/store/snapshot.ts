// The database side of backup and restore (ops/backup.ts): SQLite's online backup API, and whether
// a database is empty (a restore never overwrites one that holds data).
import fs from "node:fs";
import SQLite from "better-sqlite3";
import { openDatabase } from "./db.ts";

export function sqliteFile(url: string): string {
  const file = url.slice("sqlite:".length);
  if (file === ":memory:" || file === "") throw new Error("an in-memory database cannot be backed up");
  return file;
}

/** A consistent copy of a live SQLite database (pages written meanwhile are copied again). */
export async function sqliteOnlineBackup(url: string, destination: string): Promise<void> {
  const source = new SQLite(sqliteFile(url), { fileMustExist: true });
  try {
    await source.backup(destination);
  } finally {
    source.close();
  }
}

/** Whether the database named by `url` has no tables (or, for SQLite, does not exist yet). */
export async function isEmptyDatabase(url: string): Promise<boolean> {
  if (url.startsWith("sqlite:")) {
    const file = sqliteFile(url);
    if (!fs.existsSync(file) || fs.statSync(file).size === 0) return true;
  }
  const db = openDatabase(url);
  try {
    return (await db.kysely.introspection.getTables()).length === 0;
  } finally {
    await db.close();
  }
}

/**
 * What is wrong with an SQLite database file, by SQLite's own checks (`integrity_check`,
 * `foreign_key_check`), or an empty list when it is whole. A file that is not a database at all
 * answers its error.
 */
export function sqliteFileProblems(file: string): string[] {
  let db: SQLite.Database | undefined;
  try {
    db = new SQLite(file, { fileMustExist: true });
    const integrity = (db.pragma("integrity_check") as { integrity_check: string }[]).map(
      (r) => r.integrity_check,
    );
    if (integrity.length !== 1 || integrity[0] !== "ok") return integrity.slice(0, 5);
    const fks = db.pragma("foreign_key_check") as { table: string; parent: string }[];
    return fks.slice(0, 5).map((r) => `a row of ${r.table} names a missing row of ${r.parent}`);
  } catch (err) {
    return [(err as Error).message];
  } finally {
    db?.close();
  }
}
