// Multi-row and prepared inserts the kernel and sections share: the feed's entries, actions' log
// lines, and container records on SQLite, whose statements are built once per shape.
import { CompiledQuery } from "kysely";
import { derivedColumns } from "./derived.ts";
import { ROWS_PER_INSERT } from "./services.ts";
import type { ChangeRow, FeedRows, FeedType, Kernel, NewRow } from "./types.ts";

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
