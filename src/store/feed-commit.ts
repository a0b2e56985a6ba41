// The change feed's entries of a transaction, written when it commits. Every write of a row that
// has events adds its entries to its transaction's `PendingChanges` (Store.appendChanges); the
// transaction writes them all in its last statements, just before its commit: on PostgreSQL the
// feed lock (which makes revisions commit in the order they were given) is taken there and only
// there, by every writer, and held only for the revisions' assignment and the commit. A writer
// that took it in the middle of its transaction held it while it took row and namespace locks:
// two writers taking the same locks in the opposite order deadlocked (40P01), and every other
// writer of the database waited behind the one holding it.
import { CHANGE_COLUMNS, insertMany } from "./batches.ts";
import { lockAndAnnounce } from "./notify.ts";
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
   * before its commit. On PostgreSQL the feed lock is taken first, in the statement that
   * announces the commit to the other replicas (a NOTIFY per type changed, delivered at commit;
   * `origin` is this replica's id).
   */
  async write(tx: Kernel, origin: string): Promise<void> {
    const entries = this.entries;
    if (entries.length === 0) return;
    this.entries = [];
    if (tx.dialect === "postgres") {
      const firstOfType = new Map<string, NewChangeRow>();
      for (const c of entries) if (!firstOfType.has(c.type)) firstOfType.set(c.type, c);
      const payloads = [...firstOfType.values()].map((c) => `${origin} ${c.type} ${c.datetime}`);
      await lockAndAnnounce(...payloads).execute(tx.db);
    }
    await insertMany(tx, "changes", CHANGE_COLUMNS, entries);
  }
}
