// SQLite for a server: one connection writes, another reads, so that a read never queues behind a
// transaction. Kysely's own SQLite driver has one connection behind a mutex: while a transaction is
// open (across the awaits of its callback), every other query of the process, a GET included,
// waits for it to commit. In WAL mode a second connection reads the last committed state at any
// time without waiting, and better-sqlite3 runs each statement to its end synchronously, so a
// read-only statement outside a transaction goes straight to the reading connection.
//
// What runs where:
// - a transaction (begin … commit/rollback, savepoints) holds the writing connection for its whole
//   life, through a mutex: one transaction at a time, as before;
// - a statement outside a transaction that writes (better-sqlite3's `readonly` is false) takes the
//   same mutex for its one statement;
// - a statement outside a transaction that only reads runs at once: on the writing connection
//   when no transaction holds it, else on the reading connection; either sees every transaction
//   committed before it (a WAL read snapshot starts at each statement). The writing connection
//   first: its page cache stays valid across its own commits, where the reading connection's is
//   dropped whenever another connection has committed since its last read, so that every read
//   after a write paid for the pages again (issue 34: the feed followers' read after each PATCH
//   took 150 µs of CPU on the reading connection, 20 µs on the writing one).
import { setImmediate as nextTurn } from "node:timers/promises";
import type SQLite from "better-sqlite3";
import {
  CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryCompiler,
  type QueryResult,
  SelectQueryNode,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
} from "kysely";

/**
 * Prepared statements of one connection, by SQL text (the most recent `capacity` of them): a query
 * the server runs again (every request runs the same few) is only bound and stepped.
 */
export class Statements {
  private readonly cache = new Map<string, SQLite.Statement>();

  constructor(
    readonly db: SQLite.Database,
    private readonly capacity = 500,
  ) {}

  get(text: string): SQLite.Statement {
    let statement = this.cache.get(text);
    if (statement) {
      // Most recently used last, so the first key is the one to evict.
      this.cache.delete(text);
    } else {
      statement = this.db.prepare(text);
      if (this.cache.size >= this.capacity) this.cache.delete(this.cache.keys().next().value as string);
    }
    this.cache.set(text, statement);
    return statement;
  }
}

function run(statement: SQLite.Statement, parameters: readonly unknown[]): QueryResult<unknown> {
  if (statement.reader) return { rows: statement.all(parameters) };
  const { changes, lastInsertRowid } = statement.run(parameters);
  return { numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid), rows: [] };
}

class Mutex {
  held: Promise<void> | undefined;
  private release: (() => void) | undefined;

  async lock(): Promise<void> {
    while (this.held) await this.held;
    this.held = new Promise((resolve) => {
      this.release = resolve;
    });
  }

  unlock(): void {
    const release = this.release;
    this.held = undefined;
    this.release = undefined;
    release?.();
  }
}

/**
 * How long statements may keep running in one turn of the event loop. SQLite answers
 * synchronously, so work whose every other step also answers at once (a batch on simulated nodes,
 * a large plan) runs as one chain of promise jobs and keeps the loop from everything else: no
 * request is answered, no timer fires, until it ends. Past this slice, a write waits for the
 * next turn, after what arrived meanwhile. At 20 ms rather than 50, a GET during a placement of
 * 10,000 containers waited half as long (p50 28 ms instead of 59) and the placement went as fast
 * (3,190–3,260 placements/s against 3,180–3,210, two runs each of `npm run bench -- placement`).
 */
const SLICE_MS = 20;
let sliceStarted = 0;
let inTurn = false;

/**
 * Waits for a later turn when this one has run statements for longer than its slice. Only writes
 * wait: what a request reads is answered in its turn, and batch work, which writes as it goes,
 * gives way to it. The slice is the process's (one event loop), shared by every connection.
 */
async function nextTurnIfSliceUsed(): Promise<void> {
  for (;;) {
    const now = performance.now();
    if (!inTurn) {
      // The first statement of a turn: its slice starts now, and ends with the turn.
      inTurn = true;
      sliceStarted = now;
      setImmediate(() => {
        inTurn = false;
      });
      return;
    }
    if (now - sliceStarted < SLICE_MS) return;
    await nextTurn();
  }
}

/** What Kysely gets from acquireConnection: routes each statement to the right connection. */
class RoutingConnection implements DatabaseConnection {
  /** Set while this connection runs a transaction (it then holds the writer's mutex). */
  holdsWriter = false;

  constructor(
    private readonly writer: Statements,
    private readonly reader: Statements,
    private readonly mutex: Mutex,
  ) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    if (this.holdsWriter) {
      await nextTurnIfSliceUsed();
      return run(this.writer.get(query.sql), query.parameters) as QueryResult<R>;
    }
    if (!this.mutex.held) {
      // The writing connection is idle (no transaction open on it): a read runs there.
      const statement = this.writer.get(query.sql);
      if (statement.readonly) return run(statement, query.parameters) as QueryResult<R>;
    } else {
      const reading = this.reader.get(query.sql);
      if (reading.readonly) return run(reading, query.parameters) as QueryResult<R>;
    }
    await nextTurnIfSliceUsed();
    await this.mutex.lock();
    try {
      return run(this.writer.get(query.sql), query.parameters) as QueryResult<R>;
    } finally {
      this.mutex.unlock();
    }
  }

  async *streamQuery<R>(query: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    if (!SelectQueryNode.is(query.query)) throw new Error("only select queries can be streamed");
    const statements = this.holdsWriter ? this.writer : this.reader;
    for (const row of statements.get(query.sql).iterate(query.parameters)) yield { rows: [row as R] };
  }
}

class RoutingDriver implements Driver {
  private readonly mutex = new Mutex();
  private readonly writer: Statements;
  private readonly reader: Statements;

  constructor(writer: SQLite.Database, reader: SQLite.Database) {
    this.writer = new Statements(writer);
    this.reader = new Statements(reader);
  }

  async init(): Promise<void> {}

  /** Released connections, handed out again (Kysely wraps each connection object once). */
  private readonly idle: RoutingConnection[] = [];

  async acquireConnection(): Promise<DatabaseConnection> {
    return this.idle.pop() ?? new RoutingConnection(this.writer, this.reader, this.mutex);
  }

  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    const c = connection as RoutingConnection;
    await this.mutex.lock();
    c.holdsWriter = true;
    try {
      await c.executeQuery(CompiledQuery.raw("begin"));
    } catch (err) {
      c.holdsWriter = false;
      this.mutex.unlock();
      throw err;
    }
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw("commit"));
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw("rollback"));
  }

  async savepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`savepoint "${name}"`));
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`rollback to "${name}"`));
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`release "${name}"`));
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    // After commit or rollback (Kysely rolls back a transaction whose commit failed).
    const c = connection as RoutingConnection;
    if (c.holdsWriter) {
      c.holdsWriter = false;
      this.mutex.unlock();
    }
    if (this.idle.length < 64) this.idle.push(c);
  }

  async destroy(): Promise<void> {
    this.reader.db.close();
    this.writer.db.close();
  }
}

/** A Kysely dialect over a writing and a reading connection to one SQLite file in WAL mode. */
export class ReadWriteSqliteDialect implements Dialect {
  constructor(
    private readonly writer: SQLite.Database,
    private readonly reader: SQLite.Database,
  ) {}

  createDriver(): Driver {
    return new RoutingDriver(this.writer, this.reader);
  }

  createQueryCompiler(): QueryCompiler {
    return new SqliteQueryCompiler();
  }

  createAdapter() {
    return new SqliteAdapter();
  }

  // biome-ignore lint/suspicious/noExplicitAny: Kysely's dialect interface is untyped here.
  createIntrospector(db: Kysely<any>) {
    return new SqliteIntrospector(db);
  }
}
