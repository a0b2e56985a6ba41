// Opens the database named by BERTH_DATABASE_URL: SQLite (default) or PostgreSQL.
import fs from "node:fs";
import path from "node:path";
import SQLite from "better-sqlite3";
import { Kysely, PostgresDialect, SqliteDialect } from "kysely";
import pg from "pg";
import type { Database } from "./schema.ts";

export type Dialect = "sqlite" | "postgres";

export interface Db {
  kysely: Kysely<Database>;
  dialect: Dialect;
  close(): Promise<void>;
}

// int8 (counts, bigint timestamps) as JS numbers: every value we store fits in 2^53.
pg.types.setTypeParser(20, (v) => Number(v));

export function openDatabase(url: string): Db {
  if (url.startsWith("sqlite:")) {
    const file = url.slice("sqlite:".length);
    if (file !== ":memory:") fs.mkdirSync(path.dirname(file), { recursive: true });
    const sqlite = new SQLite(file);
    sqlite.pragma("journal_mode = WAL");
    sqlite.pragma("busy_timeout = 5000");
    sqlite.pragma("synchronous = NORMAL");
    const kysely = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
    return { kysely, dialect: "sqlite", close: () => kysely.destroy() };
  }
  // A bounded connect time: a replica that lost its database must answer "not ready", not hang.
  const pool = new pg.Pool({ connectionString: url, max: 10, connectionTimeoutMillis: 5000 });
  // An idle connection the server dropped (restart, network cut) is discarded; the next query
  // opens a new one. Without a listener the error would end the process.
  pool.on("error", () => undefined);
  // The same for a connection in use when the server goes away: its query fails with the error.
  pool.on("connect", (client) => client.on("error", () => undefined));
  const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return { kysely, dialect: "postgres", close: () => kysely.destroy() };
}
