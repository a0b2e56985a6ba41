// Search and order of lists (`name__icontains`, `order_by`): one case-insensitive substring match
// that means the same on SQLite and PostgreSQL (lower() on both sides, LIKE with its wildcards
// escaped), and an order by a named column with the row id as the tie-break.
import { type Expression, type RawBuilder, type SqlBool, sql } from "kysely";

/** Orders a list accepts: by name, state or creation, ascending or (with "-") descending. */
export type ListOrder = "name" | "-name" | "state" | "-state" | "created" | "-created";

/** Whether any of `columns` contains `text`, ignoring case. */
export function containsText(columns: readonly string[], text: string): Expression<SqlBool> {
  const pattern = `%${text.toLowerCase().replace(/[!%_]/g, (c) => `!${c}`)}%`;
  const parts = columns.map((c) => sql<SqlBool>`lower(${sql.ref(c)}) like ${pattern} escape '!'`);
  return parts.length === 1 ? parts[0]! : sql<SqlBool>`(${sql.join(parts, sql` or `)})`;
}

/** The ORDER BY of a list: the asked column (its `name` column named by `nameColumn`), then id. */
export function orderOf(order: ListOrder | undefined, nameColumn = "name"): RawBuilder<unknown> {
  const desc = order === undefined || order.startsWith("-");
  const key = order?.replace(/^-/, "") ?? "created";
  const column = key === "name" ? nameColumn : key === "state" ? "state" : "id";
  const dir = desc ? sql`desc` : sql`asc`;
  return column === "id"
    ? sql`${sql.ref("id")} ${dir}`
    : sql`${sql.ref(column)} ${dir}, ${sql.ref("id")} desc`;
}

/** A LIKE pattern of the values starting with `prefix` (a uuid prefix), its wildcards dropped. */
export const prefixLike = (prefix: string) => `${prefix.replace(/[%_\\]/g, "")}%`;
