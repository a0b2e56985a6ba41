// Statements over many rows, which the kernel and the sections share: IN lists in chunks,
// multi-row inserts (the feed's entries, actions' log lines), container records inserted and
// updated on SQLite by statements prepared once per shape, and on PostgreSQL updated by one
// statement per batch of records.
import { CompiledQuery, type RawBuilder, sql } from "kysely";
import { VersionConflict } from "../domain/errors.ts";
import { derivedColumns } from "./derived.ts";
import type { ChangeRow, ContainerRow, FeedRows, FeedType, Kernel, NewRow } from "./types.ts";

/** IN lists are sent in chunks, well within every dialect's limit on bound parameters. */
const CHUNK = 500;

export function chunks<T>(items: readonly T[]): T[][] {
  const unique = [...new Set(items)];
  const out: T[][] = [];
  for (let i = 0; i < unique.length; i += CHUNK) out.push(unique.slice(i, i + CHUNK));
  return out;
}

/**
 * The rows of a query over an IN list, sent one chunk of the (deduplicated) list at a time and
 * answered in chunk order: an ORDER BY holds within each chunk.
 */
export async function inChunks<T, R>(items: readonly T[], read: (part: T[]) => Promise<R[]>): Promise<R[]> {
  const out: R[] = [];
  for (const part of chunks(items)) out.push(...(await read(part)));
  return out;
}

/**
 * Rows of one multi-row INSERT: well within SQLite's (32,766) and PostgreSQL's (65,535) limits on
 * bound parameters for the widest table (containers, 26 columns).
 */
export const ROWS_PER_INSERT = 500;

/** Records of one multi-row UPDATE (two parameters per record and column, two more per record). */
const UPDATE_ROWS = 100;

/** SQL text of a one-row INSERT into a table, by its table and columns. */
const INSERT_ONE_SQL = new Map<string, string>();

/** The columns of a change-feed entry as written (the revision is the database's). */
export const CHANGE_COLUMNS = [
  "namespace",
  "type",
  "action",
  "resource_uri",
  "state",
  "parents",
  "datetime",
] as const satisfies readonly (keyof NewChangeRow)[];
type NewChangeRow = Omit<ChangeRow, "revision">;

const INSERT_MANY_SQL = new Map<string, string>();

/**
 * Rows of the same columns in multi-row statements (ROWS_PER_INSERT rows each) whose text is made
 * once per table, columns and row count: the feed's entries and actions' log lines are appended
 * at every commit of a large deploy, and building each statement through the query builder cost
 * more than running it.
 */
export async function insertMany<C extends string>(
  tx: Kernel,
  table: string,
  columns: readonly C[],
  rows: readonly Readonly<Record<C, unknown>>[],
): Promise<void> {
  for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) {
    const part = rows.slice(i, i + ROWS_PER_INSERT);
    const key = `${tx.dialect}\u0000${table}\u0000${columns.join(",")}\u0000${part.length}`;
    let text = INSERT_MANY_SQL.get(key);
    if (!text) {
      let n = 0;
      const placeholder = tx.dialect === "postgres" ? () => `$${++n}` : () => "?";
      const tuples = part.map(() => `(${columns.map(placeholder).join(", ")})`);
      text = `insert into "${table}" (${columns.map((c) => `"${c}"`).join(", ")}) values ${tuples.join(", ")}`;
      if (INSERT_MANY_SQL.size >= 1000) INSERT_MANY_SQL.clear();
      INSERT_MANY_SQL.set(key, text);
    }
    const parameters: unknown[] = [];
    for (const row of part) for (const c of columns) parameters.push(row[c]);
    await tx.db.executeQuery(CompiledQuery.raw(text, parameters));
  }
}

/**
 * Container records on SQLite: one run of a statement prepared once per record (as cheap as a
 * multi-row statement there, without building one of thousands of parameters or reading the
 * rows back): each answered as inserted, with its id.
 */
export async function insertEachSqlite<K extends FeedType>(
  tx: Kernel,
  table: string,
  values: readonly NewRow<K>[],
): Promise<FeedRows[K][]> {
  const out: FeedRows[K][] = [];
  for (const v of values) {
    const row: Record<string, unknown> = { ...v, ...derivedColumns("container", v as never), version: 1 };
    for (const k of Object.keys(row)) if (row[k] === undefined) delete row[k];
    const columns = Object.keys(row);
    const key = `${table}\u0000${columns.join(",")}`;
    let text = INSERT_ONE_SQL.get(key);
    if (!text) {
      text = `insert into "${table}" (${columns.map((c) => `"${c}"`).join(", ")}) values (${columns.map(() => "?").join(", ")})`;
      INSERT_ONE_SQL.set(key, text);
    }
    const result = await tx.db.executeQuery(CompiledQuery.raw(text, Object.values(row)));
    out.push({ id: Number(result.insertId), ...row } as unknown as FeedRows[K]);
  }
  return out;
}

/** SQL text of the version-checked UPDATE of one container record, by its set of columns. */
const UPDATE_ONE_SQL = new Map<string, string>();

/** updateContainers on SQLite: one run of a prepared statement per record. */
export async function updateEachSqlite(
  tx: Kernel,
  columns: readonly (keyof ContainerRow)[],
  group: readonly { row: ContainerRow; patch: Partial<ContainerRow> }[],
): Promise<void> {
  const key = columns.join(",");
  let text = UPDATE_ONE_SQL.get(key);
  if (!text) {
    const set = columns.map((c) => `"${c}" = ?`).join(", ");
    text = `update "containers" set ${set}, "version" = "version" + 1 where "uuid" = ? and "version" = ?`;
    UPDATE_ONE_SQL.set(key, text);
  }
  let moved = 0;
  for (const { row, patch } of group) {
    const parameters: unknown[] = columns.map((c) => patch[c]);
    parameters.push(row.uuid, row.version);
    const result = await tx.db.executeQuery(CompiledQuery.raw(text, parameters));
    if (Number(result.numAffectedRows ?? 0) !== 1) moved += 1;
  }
  if (moved) throw new VersionConflict(`containers (${moved} of ${group.length} changed meanwhile)`);
}

/** updateContainers on PostgreSQL: one statement per UPDATE_ROWS records, each column a CASE over the uuids. */
export async function updateCasePostgres(
  tx: Kernel,
  columns: readonly (keyof ContainerRow)[],
  group: readonly { row: ContainerRow; patch: Partial<ContainerRow> }[],
): Promise<void> {
  for (let i = 0; i < group.length; i += UPDATE_ROWS) {
    const part = group.slice(i, i + UPDATE_ROWS);
    const set: Record<string, RawBuilder<unknown>> = { version: sql`${sql.ref("version")} + 1` };
    for (const column of columns) {
      const cases = part.map(({ row, patch }) => sql`when ${row.uuid} then ${patch[column]}`);
      // PostgreSQL types a CASE of bare parameters as text: its ELSE, the column itself (never
      // taken: every row updated has its WHEN), gives it the column's type, whatever it is.
      set[column] = sql`case ${sql.ref("uuid")} ${sql.join(cases, sql` `)} else ${sql.ref(column)} end`;
    }
    const rows = await tx.db
      .updateTable("containers")
      .set(set as never)
      .where((eb) =>
        eb.or(part.map(({ row }) => eb.and([eb("uuid", "=", row.uuid), eb("version", "=", row.version)]))),
      )
      .returning("uuid")
      .execute();
    if (rows.length !== part.length) {
      throw new VersionConflict(
        `containers (${part.length - rows.length} of ${part.length} changed meanwhile)`,
      );
    }
  }
}
