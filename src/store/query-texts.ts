// Statements that hot paths run at every request (a PATCH's read of its service, its answer's
// reads, the feed followers' reads): built and compiled by the query builder once per dialect and
// shape, then run as their text with the call's parameters. Building and compiling a statement
// cost more of the event loop than SQLite took to run it (issue 34: about 30 µs a statement, and a
// PATCH ran five of them); on SQLite the connection keeps each text's prepared statement
// (sqlite-driver.ts), on PostgreSQL it is a named statement (db.ts).
import { type Compilable, CompiledQuery } from "kysely";
import type { Kernel } from "./types.ts";

/** Texts made so far, by dialect and key (a few dozen in practice). */
const TEXTS = new Map<string, string>();
const TEXTS_MAX = 1000;

/**
 * Runs the statement `build` makes, with `parameters`: built and compiled the first time a dialect
 * runs `key` (which must name everything that shapes the text: an `in` list's length, optional
 * conditions), its text reused after. `parameters` are those the built statement binds, in order
 * (checked when it is built: a mismatch is a bug of the caller).
 */
export async function runCompiled<R>(
  k: Kernel,
  key: string,
  parameters: readonly unknown[],
  build: () => Compilable<R>,
): Promise<R[]> {
  const full = `${k.dialect}\u0000${key}`;
  let text = TEXTS.get(full);
  if (text === undefined) {
    const compiled = build().compile();
    const same =
      compiled.parameters.length === parameters.length &&
      compiled.parameters.every((p, i) => p === parameters[i]);
    if (!same) throw new Error(`statement ${key}: its parameters are not those it was built with`);
    text = compiled.sql;
    if (TEXTS.size >= TEXTS_MAX) TEXTS.clear();
    TEXTS.set(full, text);
  }
  const { rows } = await k.db.executeQuery(CompiledQuery.raw(text, [...parameters]));
  return rows as R[];
}
