// The change feed's entries of a transaction, written when it commits. Every write of a row that
// has events adds its entries to its transaction's `PendingChanges` (Store.appendChanges); the
// transaction writes them all in its last statements, just before its commit: on PostgreSQL the
// feed lock (which makes revisions commit in the order they were given) is taken there and only
// there, by every writer, and held only for the revisions' assignment and the commit. A writer
// that took it in the middle of its transaction held it while it took row and namespace locks:
// two writers taking the same locks in the opposite order deadlocked (40P01), and every other
// writer of the database waited behind the one holding it.
import { CompiledQuery } from "kysely";
import { CHANGE_COLUMNS, insertMany, ROWS_PER_INSERT } from "./batches.ts";
import { CHANGE_CHANNEL, FEED_LOCK } from "./notify.ts";
import type { ChangeRow, Kernel } from "./types.ts";

export type NewChangeRow = Omit<ChangeRow, "revision">;

/** The feed's entries a transaction has written so far, in order (written at its commit). */
export class PendingChanges {
  private entries: NewChangeRow[] = [];

  add(cs: readonly NewChangeRow[]): void {
    for (const c of cs) this.entries.push(c);
  }

  /** Hands every entry to `other` (a grouped transaction's member to its group: write-groups.ts). */
  moveTo(other: PendingChanges): void {
    other.add(this.entries);
    this.entries = [];
  }

  get size(): number {
    return this.entries.length;
  }

  /**
   * Writes the entries (multi-row statements, in order) as the transaction's last statements
   * before its commit. On PostgreSQL the first of them takes the feed lock and announces the
   * commit to the other replicas (a NOTIFY per type changed, delivered at commit; `origin` is
   * this replica's id): lockedInsert.
   */
  async write(tx: Kernel, origin: string): Promise<void> {
    const entries = this.entries;
    if (entries.length === 0) return;
    this.entries = [];
    if (tx.dialect !== "postgres") return insertMany(tx, "changes", CHANGE_COLUMNS, entries);
    const firstOfType = new Map<string, NewChangeRow>();
    for (const c of entries) if (!firstOfType.has(c.type)) firstOfType.set(c.type, c);
    const payloads = [...firstOfType.values()].map((c) => `${origin} ${c.type} ${c.datetime}`);
    const first = entries.length > ROWS_PER_INSERT ? entries.slice(0, ROWS_PER_INSERT) : entries;
    await tx.db.executeQuery(lockedInsert(payloads, first));
    if (entries.length > first.length)
      await insertMany(tx, "changes", CHANGE_COLUMNS, entries.slice(first.length));
  }
}

/** Texts of lockedInsert, by notifications and rows. */
const LOCKED_INSERT_SQL = new Map<string, string>();

/**
 * PostgreSQL: one statement takes the feed lock, announces the commit (a NOTIFY per payload,
 * delivered at commit) and inserts the entries, where it was two round trips while the lock was
 * held. The lock is taken by the statement's one-time filter, before the VALUES scan yields its
 * first row, so every revision (the column's sequence, in the rows' order) is given under it.
 */
function lockedInsert(payloads: readonly string[], rows: readonly NewChangeRow[]): CompiledQuery {
  const key = `${payloads.length} ${rows.length}`;
  let text = LOCKED_INSERT_SQL.get(key);
  if (text === undefined) {
    let n = 0;
    const p = () => `$${++n}`;
    const notifies = payloads.map(() => `pg_notify(${p()}, ${p()} || ' ' || coalesce(current_schema(), ''))`);
    // Parameters in VALUES take no type from the insert: the one column that is not text says its own.
    const tuples = rows.map(
      () => `(${CHANGE_COLUMNS.map((c) => (c === "datetime" ? `${p()}::bigint` : p())).join(", ")})`,
    );
    text =
      `with "feed_lock" as materialized (select pg_advisory_xact_lock(${FEED_LOCK}), ${notifies.join(", ")}) ` +
      `insert into "changes" (${CHANGE_COLUMNS.map((c) => `"${c}"`).join(", ")}) ` +
      `select * from (values ${tuples.join(", ")}) as "v" where exists (select from "feed_lock")`;
    if (LOCKED_INSERT_SQL.size >= 1000) LOCKED_INSERT_SQL.clear();
    LOCKED_INSERT_SQL.set(key, text);
  }
  const parameters: unknown[] = [];
  for (const payload of payloads) parameters.push(CHANGE_CHANNEL, payload);
  for (const row of rows) for (const c of CHANGE_COLUMNS) parameters.push(row[c]);
  return CompiledQuery.raw(text, parameters);
}
