// Reads of the change feed: entries after a revision, the latest revision, and where the feed
// stands in a set of namespaces (what a cached answer checks). One per root store: it keeps the
// SQL text of namespaceRevision and shares the reads of one turn of the event loop.
import { CompiledQuery, sql } from "kysely";
import { runCompiled } from "./query-texts.ts";
import { TurnReads } from "./turn-reads.ts";
import type { ChangeRow, FeedType, Kernel } from "./types.ts";

export class FeedReads {
  /** namespaceRevision's SQL text, by number of namespaces. */
  private readonly revisionSql = new Map<number, string>();
  /** namespaceRevision's reads of one turn of the event loop, shared. */
  private revisionReads: TurnReads<string, number> | undefined;

  constructor(private readonly s: Kernel) {}

  /** Feed entries after `revision`, in order; only those of `types` when given (the rest are skipped in SQL). */
  async changesSince(revision: number, limit: number, types?: readonly FeedType[]): Promise<ChangeRow[]> {
    return runCompiled(
      this.s,
      `changes since of ${types ? types.join(",") : "every type"}`,
      [revision, ...(types ?? []), limit],
      () => {
        let q = this.s.db.selectFrom("changes").selectAll().where("revision", ">", revision);
        if (types) q = q.where("type", "in", types);
        return q.orderBy("revision").limit(limit);
      },
    );
  }

  /**
   * Feed entries of `types` after `revision`, in order, and how far the feed was read (`through`):
   * the statement also reads the feed's last entry, whatever its type, so that a follower of
   * types that have not changed for a while moves to it instead of reading again, at every commit,
   * every entry of other types since its last match (issue 34: after a run of no-op PATCHes, which
   * add only action entries, the router's follower read all of them once per commit). `full`: the
   * page held `limit` entries of `types` (there may be more).
   */
  async changesThrough(
    revision: number,
    limit: number,
    types: readonly FeedType[],
  ): Promise<{ rows: ChangeRow[]; through: number; full: boolean }> {
    const db = this.s.db;
    // `is_head` tells the feed's last entry from the page's (a union's order is not the SQL's to keep).
    const read = await runCompiled(
      this.s,
      `changes through of ${types.join(",")}`,
      [revision, ...types, limit, 1],
      () =>
        db
          .selectFrom(
            db
              .selectFrom("changes")
              .selectAll()
              .where("revision", ">", revision)
              .where("type", "in", types)
              .orderBy("revision")
              .limit(limit)
              .as("page"),
          )
          .selectAll()
          .select(sql.lit(0).as("is_head"))
          .unionAll(
            db
              .selectFrom(
                db.selectFrom("changes").selectAll().orderBy("revision", "desc").limit(1).as("last"),
              )
              .selectAll()
              .select(sql.lit(1).as("is_head")),
          ),
    );
    // The page's entries; the feed's last entry (none when the feed is empty) says how far it was read.
    let head = revision;
    const rows: ChangeRow[] = [];
    for (const { is_head, ...row } of read) {
      if (Number(is_head) === 1) head = Math.max(head, Number(row.revision));
      else rows.push(row);
    }
    rows.sort((a, b) => Number(a.revision) - Number(b.revision));
    const full = rows.length >= limit;
    return { rows, through: full ? Number(rows.at(-1)!.revision) : head, full };
  }

  async latestRevision(): Promise<number> {
    const row = await this.s.db
      .selectFrom("changes")
      .select((eb) => eb.fn.max("revision").as("r"))
      .executeTakeFirst();
    return Number(row?.r ?? 0);
  }

  /**
   * Where the change feed stands in these namespaces: the sum of each one's latest revision, which
   * grows whenever any of them does (revisions only grow, and commit in their order: appendChanges).
   * A view built after reading it is current as long as it has not moved, provided every row the
   * view read lives in these namespaces (api/answer-cache.ts). One statement, one seek of
   * `changes_ns` per namespace, its SQL text built once per number of namespaces.
   */
  async namespaceRevision(namespaces: readonly string[]): Promise<number> {
    if (namespaces.length === 0) return 0;
    // Outside a transaction, the checks of one turn share their statement (TurnReads).
    if (this.s.isTransaction) return this.readNamespaceRevision(namespaces);
    this.revisionReads ??= new TurnReads(
      async (keys) =>
        new Map(
          await Promise.all(
            keys.map(async (k) => [k, await this.readNamespaceRevision(k.split("\u0000"))] as const),
          ),
        ),
      { firstAtOnce: true },
    );
    return (await this.revisionReads.get(namespaces.join("\u0000"))) ?? 0;
  }

  private async readNamespaceRevision(namespaces: readonly string[]): Promise<number> {
    let text = this.revisionSql.get(namespaces.length);
    if (text === undefined) {
      const compiled = this.s.db
        .selectNoFrom((eb) =>
          namespaces.map((ns, i) =>
            eb
              .selectFrom("changes")
              .select((e) => e.fn.max("revision").as("m"))
              .where("namespace", "=", ns)
              .as(`r${i}`),
          ),
        )
        .compile();
      text = compiled.sql;
      this.revisionSql.set(namespaces.length, text);
    }
    const { rows } = await this.s.db.executeQuery<Record<string, number | null>>(
      CompiledQuery.raw(text, [...namespaces]),
    );
    let sum = 0;
    for (const v of Object.values(rows[0] ?? {})) sum += Number(v ?? 0);
    return sum;
  }
}
