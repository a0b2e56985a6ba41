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
