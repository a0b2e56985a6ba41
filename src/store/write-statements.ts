// The statements of the kernel's one-row writes (Store.updateRow, Store.insertRows of one row):
// their SQL text is made once per table and set of columns and run as is, rather than built
// through the query builder at every write (building and compiling a statement cost more of the
// event loop than SQLite took to run it). On SQLite the connection keeps each text's prepared
// statement (sqlite-driver.ts); PostgreSQL parses the same few texts.
import { CompiledQuery } from "kysely";
import type { FeedType, Kernel } from "./types.ts";

/** The table of each resource that has events. */
export const TABLES = {
  service: "services",
  container: "containers",
  stack: "stacks",
  node: "nodes",
  nodecluster: "nodeclusters",
  action: "actions",
} as const satisfies Record<FeedType, string>;

/** How a version conflict names the row. */
export const NOUNS: Record<FeedType, string> = {
  service: "service",
  container: "container",
  stack: "stack",
  node: "node",
  nodecluster: "node cluster",
  action: "action",
};

/** Texts made so far, by dialect, statement, table and columns (a few dozen in practice). */
const TEXTS = new Map<string, string>();
const TEXTS_MAX = 1000;

function textOf(key: string, make: () => string): string {
  let text = TEXTS.get(key);
  if (text === undefined) {
    text = make();
    if (TEXTS.size >= TEXTS_MAX) TEXTS.clear();
    TEXTS.set(key, text);
  }
  return text;
}

/** The columns of `values` that are set (undefined ones are left out, as the query builder does). */
function columnsOf(values: Readonly<Record<string, unknown>>): string[] {
  return Object.keys(values).filter((k) => values[k] !== undefined);
}

function placeholders(tx: Kernel): () => string {
  let n = 0;
  return tx.dialect === "postgres" ? () => `$${++n}` : () => "?";
}

/**
 * `update <table> set … where uuid = ? and version = ?` returning the row as written, or
 * undefined when no row has that uuid and version (another writer got there first).
 */
export async function updateVersioned(
  tx: Kernel,
  table: string,
  values: Readonly<Record<string, unknown>>,
  uuid: string,
  version: number,
): Promise<unknown> {
  const columns = columnsOf(values);
  const text = textOf(`${tx.dialect}\u0000u\u0000${table}\u0000${columns.join(",")}`, () => {
    const p = placeholders(tx);
    const set = columns.map((c) => `"${c}" = ${p()}`).join(", ");
    return `update "${table}" set ${set} where "uuid" = ${p()} and "version" = ${p()} returning *`;
  });
  const parameters = columns.map((c) => values[c]);
  parameters.push(uuid, version);
  const { rows } = await tx.db.executeQuery(CompiledQuery.raw(text, parameters));
  return rows[0];
}

/** `insert into <table> (…) values (…)` of one row, returning it as inserted. */
export async function insertOne(
  tx: Kernel,
  table: string,
  values: Readonly<Record<string, unknown>>,
): Promise<unknown> {
  const columns = columnsOf(values);
  const text = textOf(`${tx.dialect}\u0000i\u0000${table}\u0000${columns.join(",")}`, () => {
    const p = placeholders(tx);
    const names = columns.map((c) => `"${c}"`).join(", ");
    return `insert into "${table}" (${names}) values (${columns.map(p).join(", ")}) returning *`;
  });
  const { rows } = await tx.db.executeQuery(
    CompiledQuery.raw(
      text,
      columns.map((c) => values[c]),
    ),
  );
  return rows[0];
}
