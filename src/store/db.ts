// Opens the database named by BERTH_DATABASE_URL: SQLite (default) or PostgreSQL.
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { Worker } from "node:worker_threads";
import SQLite from "better-sqlite3";
import {
  type CompiledQuery,
  type DatabaseIntrospector,
  type DatabaseMetadata,
  Kysely,
  type LogEvent,
  PostgresDialect,
  type SchemaMetadata,
  type SqliteDatabase,
  SqliteDialect,
  sql,
  type TableMetadata,
} from "kysely";
import pg from "pg";
import { ensurePrivateDir, ensurePrivateFile, tightenIfPresent } from "../config/private-files.ts";
import type { Database } from "./schema.ts";
import { ReadWriteSqliteDialect, Statements } from "./sqlite-driver.ts";

export type Dialect = "sqlite" | "postgres";

/**
 * Counts the SQL statements the store runs (every query, inside transactions too). Tests hold
 * the shape of a request with it (a list costs a fixed number of statements, whatever its size),
 * and the benchmark measures how quiet an idle server is.
 */
export class StatementCounter {
  private n = 0;
  private tx = 0;
  /** The statements themselves, while `queriesDuring` keeps them. */
  private kept: CompiledQuery[] | undefined;
  get count(): number {
    return this.n;
  }
  /** Transactions begun (each counts among the statements too). */
  get transactions(): number {
    return this.tx;
  }
  /** Counted by the database's query log (see openDatabase). */
  record(event: LogEvent): void {
    this.n += 1;
    if (/^begin\b/i.test(event.query.sql)) this.tx += 1;
    this.kept?.push(event.query);
  }
  /** The statements run while `fn` ran, with their parameters: a test asks the planner how it runs them. */
  async queriesDuring<T>(fn: () => Promise<T>): Promise<{ result: T; queries: CompiledQuery[] }> {
    const queries: CompiledQuery[] = [];
    const outer = this.kept;
    this.kept = queries;
    try {
      return { result: await fn(), queries };
    } finally {
      this.kept = outer;
    }
  }
  /** Statements run while `fn` ran (other work of the process in that time counts too). */
  async during<T>(fn: () => Promise<T>): Promise<{ result: T; statements: number; transactions: number }> {
    const before = this.n;
    const tx = this.tx;
    const result = await fn();
    return { result, statements: this.n - before, transactions: this.tx - tx };
  }
}

export interface Db {
  kysely: Kysely<Database>;
  dialect: Dialect;
  statements: StatementCounter;
  /**
   * From now on, PostgreSQL prepares each statement text once per connection (named statements):
   * called once the schema is migrated, as a prepared `select *` must not outlive a change of its
   * table's columns. Nothing to do on SQLite, whose connections keep their prepared statements.
   */
  prepareStatements(): void;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  /** PostgreSQL connections in the pool (BERTH_DATABASE_POOL). */
  poolSize?: number;
}

// int8 (counts, bigint timestamps) as JS numbers: every value we store fits in 2^53.
pg.types.setTypeParser(20, (v) => Number(v));

export function openDatabase(url: string, opts: DatabaseOptions = {}): Db {
  const statements = new StatementCounter();
  const log = (event: LogEvent) => statements.record(event);
  if (url.startsWith("sqlite:")) {
    const file = url.slice("sqlite:".length);
    if (file !== ":memory:") {
      // The database holds every tenant's secrets: 0600, in a 0700 directory when Berth makes it.
      // SQLite creates the -wal and -shm files with the mode of the database file (its unix VFS
      // copies it), so they are 0600 too; those an older release left 0644 are tightened here.
      ensurePrivateDir(path.dirname(file));
      ensurePrivateFile(file);
      for (const suffix of ["-wal", "-shm", "-journal"]) tightenIfPresent(`${file}${suffix}`);
    }
    const sqlite = new SQLite(file);
    // WAL: readers never wait for the writer; NORMAL is durable across process crashes in WAL
    // mode (only a power loss can drop the last commits). A page cache and memory-mapped reads of
    // bounded size (WRITER_CACHE_KB, MMAP_BYTES) keep list pages off the file system; temporary
    // b-trees (ORDER BY, IN lists) stay in memory.
    sqlite.pragma("journal_mode = WAL");
    sqlite.pragma("busy_timeout = 5000");
    sqlite.pragma("synchronous = NORMAL");
    sqlite.pragma(`cache_size = -${WRITER_CACHE_KB}`);
    sqlite.pragma("temp_store = MEMORY");
    if (file !== ":memory:") sqlite.pragma(`mmap_size = ${MMAP_BYTES}`);
    // Checkpoints (copying the WAL into the database file, with its fsyncs) run on a thread of
    // their own (Checkpointer), not in the commit that happens to cross the WAL's threshold: the
    // event loop never waits for them. The connection's own is only a backstop, at a large WAL.
    const checkpointer = file === ":memory:" ? undefined : new Checkpointer(file);
    if (checkpointer) {
      sqlite.pragma(`wal_autocheckpoint = ${BACKSTOP_CHECKPOINT_PAGES}`);
      // A WAL that grew large is cut back once a checkpoint has emptied it.
      sqlite.pragma(`journal_size_limit = ${WAL_KEPT_BYTES}`);
    }
    // A file gets a second connection for reads outside transactions (store/sqlite-driver.ts);
    // an in-memory database exists only on its one connection.
    const dialect =
      file === ":memory:"
        ? new SqliteDialect({ database: preparedOnce(sqlite) })
        : new ReadWriteSqliteDialect(sqlite, openReader(file));
    const kysely = new Kysely<Database>({ dialect, log });
    return {
      kysely,
      dialect: "sqlite",
      statements,
      prepareStatements: () => undefined,
      close: async () => {
        await checkpointer?.close();
        // Keeps the query planner's statistics fresh for the next start (cheap: it samples).
        if (sqlite.open) sqlite.pragma("optimize");
        await kysely.destroy();
      },
    };
  }
  // A bounded connect time: a replica that lost its database must answer "not ready", not hang.
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.poolSize ?? 10,
    connectionTimeoutMillis: 5000,
  });
  // An idle connection the server dropped (restart, network cut) is discarded; the next query
  // opens a new one. Without a listener the error would end the process.
  pool.on("error", () => undefined);
  // The same for a connection in use when the server goes away: its query fails with the error.
  const named = new NamedStatements();
  pool.on("connect", (client) => {
    client.on("error", () => undefined);
    named.install(client);
  });
  const kysely = new Kysely<Database>({ dialect: new SchemaScopedPostgresDialect({ pool }), log });
  return {
    kysely,
    dialect: "postgres",
    statements,
    prepareStatements: () => {
      named.enabled = true;
    },
    close: () => kysely.destroy(),
  };
}

/** Statement texts given a name at most (each connection holds the plan of every name it ran). */
const NAMED_TEXTS_MAX = 1000;
/** Names of statement texts, shared by every pool of the process (a text always has one name). */
const statementNames = new Map<string, string>();

/**
 * Named prepared statements on PostgreSQL: Kysely sends every statement with its text, which the
 * server parses and plans each time; a statement with parameters sent under a name is parsed
 * once per connection, then only bound and executed (pg keeps which names each connection has
 * parsed). The same few texts make up nearly every request, so a bounded number of them is named;
 * the rest, and statements without parameters (begin, commit), go as before.
 */
class NamedStatements {
  enabled = false;

  install(client: pg.PoolClient): void {
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
    let off = false;
    const patched = (...args: unknown[]) => {
      const [text, values] = args;
      if (off || !this.enabled || typeof text !== "string" || !Array.isArray(values) || values.length === 0)
        return query(...args);
      const name = nameOf(text);
      if (name === undefined) return query(...args);
      return query({ name, text, values }).catch((err: unknown) => {
        // A plan whose result columns changed (0A000: a table was altered since, as a restore
        // may): this connection sends its statements unnamed from now on.
        if ((err as { code?: string })?.code === "0A000") off = true;
        throw err;
      });
    };
    client.query = patched as typeof client.query;
  }
}

function nameOf(text: string): string | undefined {
  let name = statementNames.get(text);
  if (name === undefined) {
    if (statementNames.size >= NAMED_TEXTS_MAX) return undefined;
    name = `berth_${statementNames.size + 1}`;
    statementNames.set(text, name);
  }
  return name;
}

/**
 * SQLite's own memory, bounded (issue 34: at 30,000 containers the two connections' page caches of
 * 64 MB each and a 256 MB memory map were 140 MB of malloc'd memory and up to 220 MB of mapped file
 * in RSS; `bench api` and `bench writes` measured the same with the smaller ones). The writer keeps the pages its
 * transactions dirty and re-read (indexes of the hot tables); the reader, whose pages mostly come
 * from the memory map, less. Pages past the map are read through the file system's own cache.
 */
export const WRITER_CACHE_KB = 16 * 1024;
export const READER_CACHE_KB = 8 * 1024;
export const MMAP_BYTES = 64 * 1024 * 1024;

/** WAL size from which the checkpointer's thread copies it into the database file. */
const CHECKPOINT_WAL_BYTES = 4 * 1024 * 1024;
/** How often the WAL's size is looked at. */
const CHECKPOINT_POLL_MS = 250;
/** WAL pages from which the connection checkpoints by itself (the thread fell far behind). */
const BACKSTOP_CHECKPOINT_PAGES = 65536;
/**
 * WAL size kept on disk when it starts over after a checkpoint: below CHECKPOINT_WAL_BYTES, so a
 * WAL that started over is checkpointed again only once it has grown again.
 */
const WAL_KEPT_BYTES = 1024 * 1024;

/** The checkpointer thread: a connection of its own that checkpoints when asked, then answers. */
const CHECKPOINT_WORKER = `
const { parentPort, workerData } = require("node:worker_threads");
const SQLite = require(workerData.module);
const db = new SQLite(workerData.file);
parentPort.on("message", (m) => {
  if (m === "close") { db.close(); process.exit(0); }
  try { db.pragma("wal_checkpoint(PASSIVE)"); } catch {}
  parentPort.postMessage("done");
});
`;

/**
 * Checkpoints a WAL database from a worker thread (a second connection, as another process
 * would: SQLite lets a PASSIVE checkpoint run beside the writer and readers): once the WAL holds
 * CHECKPOINT_WAL_BYTES, the thread copies it into the database file while this thread goes on
 * committing; the next commit after a complete checkpoint starts the WAL over. The thread is
 * started the first time it is needed (most databases of tests never need one).
 */
class Checkpointer {
  private worker: Worker | undefined;
  private exited: Promise<unknown> | undefined;
  private busy = false;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly file: string) {
    this.timer = setInterval(() => this.tick(), CHECKPOINT_POLL_MS);
    this.timer.unref();
  }

  private tick(): void {
    if (this.busy) return;
    let size = 0;
    try {
      size = fs.statSync(`${this.file}-wal`).size;
    } catch {
      return;
    }
    if (size < CHECKPOINT_WAL_BYTES) return;
    this.busy = true;
    if (!this.worker) {
      this.worker = new Worker(CHECKPOINT_WORKER, {
        eval: true,
        workerData: { file: this.file, module: createRequire(import.meta.url).resolve("better-sqlite3") },
      });
      this.worker.unref();
      this.exited = new Promise((resolve) => this.worker!.once("exit", resolve));
      this.worker.on("message", () => {
        this.busy = false;
      });
      // A thread that failed leaves checkpoints to the connection's backstop.
      this.worker.on("error", () => undefined);
    }
    this.worker.postMessage("checkpoint");
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    const worker = this.worker;
    if (!worker) return;
    this.worker = undefined;
    // Kept alive until it has closed its connection (it is unreferenced otherwise).
    worker.ref();
    worker.postMessage("close");
    await this.exited;
  }
}

/** The reading connection of a SQLite file the writer has opened (and put in WAL mode). */
export function openReader(file: string): SQLite.Database {
  const reader = new SQLite(file, { fileMustExist: true });
  reader.pragma("query_only = ON");
  reader.pragma("busy_timeout = 5000");
  reader.pragma(`cache_size = -${READER_CACHE_KB}`);
  reader.pragma("temp_store = MEMORY");
  reader.pragma(`mmap_size = ${MMAP_BYTES}`);
  return reader;
}

/**
 * An in-memory database's one connection, for Kysely's own driver: Kysely prepares every statement
 * anew, this reuses the prepared statements of recent SQL texts (Statements). Safe because that
 * driver runs one statement at a time on its single connection (a streamed query holds it).
 */
function preparedOnce(sqlite: SQLite.Database): SqliteDatabase {
  const statements = new Statements(sqlite);
  return { close: () => sqlite.close(), prepare: (text: string) => statements.get(text) };
}

/**
 * Kysely's PostgreSQL introspection (which its migrator uses to see whether its own tables exist)
 * reads every schema of the database and calls `has_schema_privilege(<name>)` on each: a schema
 * dropped by someone else while that query runs (another installation or test in the same
 * database) fails it with "schema … does not exist", and with it our migration. Berth only ever
 * needs the schema it works in, so its introspection reads the catalogue for that schema alone,
 * by oid, with no name lookups that a concurrent drop could break.
 */
class SchemaScopedPostgresDialect extends PostgresDialect {
  // biome-ignore lint/suspicious/noExplicitAny: Kysely's dialect interface is untyped here.
  override createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new CurrentSchemaIntrospector(db);
  }
}

class CurrentSchemaIntrospector implements DatabaseIntrospector {
  // biome-ignore lint/suspicious/noExplicitAny: introspection reads the catalogue, not our schema.
  constructor(private readonly db: Kysely<any>) {}

  async getSchemas(): Promise<SchemaMetadata[]> {
    const { rows } = await sql<{ name: string }>`select current_schema() as name`.execute(this.db);
    return rows.filter((r) => r.name !== null);
  }

  async getTables(): Promise<TableMetadata[]> {
    const { rows } = await sql<{ name: string; schema: string; kind: string }>`
      select c.relname as name, n.nspname as schema, c.relkind as kind
      from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
      where n.nspname = current_schema() and c.relkind in ('r', 'v', 'm', 'p')
      order by c.relname`.execute(this.db);
    return rows.map((r) => ({
      name: r.name,
      schema: r.schema,
      isView: r.kind === "v" || r.kind === "m",
      columns: [],
    }));
  }

  async getMetadata(): Promise<DatabaseMetadata> {
    return { tables: await this.getTables() };
  }
}
