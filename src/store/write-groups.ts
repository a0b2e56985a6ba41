// Group commit (issue 34, item 1): the short write transactions of API calls that arrive together
// (in one turn of the event loop, or while a group's members run) share one transaction and commit. Each call
// still gets its own outcome: the first call of a transaction runs in it directly, every later one
// in a savepoint of its own, so one that fails is rolled back alone (to its savepoint; the first,
// with nothing else in the transaction yet, by rolling the transaction back) and the others commit.
// A call's answer waits for the commit, as it would for its own; its change-feed entries and
// after-commit work (notifications, listeners) join the transaction's, written and run once.
//
// Why: a commit (on SQLite the WAL frames of every page it dirtied; on PostgreSQL the feed lock,
// the notification, the feed insert and the commit's round trips) and what it sets off (each feed
// follower reads the feed once per commit, the router controller builds once) cost more than the
// write itself; ten PATCHes in one commit write the actions' and feed's last pages once.
// Only callers that ask join a group (`Store.transaction(fn, { group: true })`): their callback
// does nothing but statements, so a group never waits on anything but the database. A group stops
// taking members at its first failure (a retry reads committed rows: it waits for this commit) or
// at GROUP_MAX_MEMBERS, and commits in the turn after its last member ended. Members run one after
// another on the group's connection (on PostgreSQL too: their statements are few, and a group
// commits while the next one runs on another connection).
import { type ControlledTransaction, type Kysely, sql } from "kysely";
import { PendingChanges } from "./feed-commit.ts";
import type { Database } from "./schema.ts";

/**
 * Members of one group at most: a bound on how long the first waits for its commit (members join
 * only while others run, in the turn of the event loop the group began in, or while one of them
 * waits for a later turn: sqlite-driver.ts gives the loop back after 20 ms of statements).
 */
export const GROUP_MAX_MEMBERS = 64;

/** A transaction that only runs statements may share its commit with others (`group`). */
export interface Grouping {
  group?: boolean;
}

/** What a member's callback gets: the transaction, and the member's own after-commit work and feed entries. */
export interface MemberScope {
  trx: Kysely<Database>;
  afterCommit: (() => void)[];
  changes: PendingChanges;
}

// A member's savepoint is never released: the next member's nests inside it, and the commit (or the
// rollback) ends them all. A release was one more statement, a round trip on PostgreSQL, for every
// member, run one after another on the group's connection; `rollback to` goes back to the latest
// savepoint of the name, the failing member's own. At most GROUP_MAX_MEMBERS - 1 deep: within
// PostgreSQL's 64 subtransactions cached per backend.
const SAVEPOINT = sql.raw(`savepoint "berth_member"`);
const ROLLBACK_TO = sql.raw(`rollback to "berth_member"`);

/** A member that succeeded: what runs once its group commits, and its answer. */
interface Waiter {
  afterCommit: (() => void)[];
  resolve(): void;
  reject(err: unknown): void;
}

class Group {
  trx: ControlledTransaction<Database> | undefined;
  /** Members in the open transaction (the first runs without a savepoint). */
  members = 0;
  /** Members joined whose callback has not ended. */
  running = 0;
  joined = 0;
  accepting = true;
  committing = false;
  /** The tail of the members' chain: they run one after another. */
  chain: Promise<void> = Promise.resolve();
  readonly changes = new PendingChanges();
  readonly waiters: Waiter[] = [];
}

/** Transactions of one database that callers run grouped (see the module comment). */
export class WriteGroups {
  private open: Group | undefined;
  /** Transactions committed, and members they held (tests and benchmarks). */
  readonly totals = { commits: 0, members: 0 };

  constructor(
    private readonly db: Kysely<Database>,
    /** Writes the group's feed entries in its transaction, just before its commit. */
    private readonly writeChanges: (trx: Kysely<Database>, changes: PendingChanges) => Promise<void>,
  ) {}

  /** Runs `fn` as a member of the open group (a new one when none takes members). */
  run<T>(fn: (scope: MemberScope) => Promise<T>): Promise<T> {
    let g = this.open;
    if (!g?.accepting || g.joined >= GROUP_MAX_MEMBERS) {
      if (g) g.accepting = false;
      g = new Group();
      this.open = g;
    }
    const group = g;
    group.joined += 1;
    group.running += 1;
    return new Promise<T>((resolve, reject) => {
      group.chain = group.chain.then(() => this.member(group, fn, resolve, reject));
    });
  }

  private async member<T>(
    g: Group,
    fn: (scope: MemberScope) => Promise<T>,
    resolve: (v: T) => void,
    reject: (err: unknown) => void,
  ): Promise<void> {
    try {
      g.trx ??= await this.db.startTransaction().execute();
      const trx = g.trx;
      const first = g.members === 0;
      // One name serves every member (see SAVEPOINT).
      if (!first) await SAVEPOINT.execute(trx);
      const scope: MemberScope = { trx, afterCommit: [], changes: new PendingChanges() };
      let out: T;
      try {
        out = await fn(scope);
      } catch (err) {
        // This member alone goes: the first takes the transaction with it (nothing else is in it).
        g.accepting = false;
        if (first) {
          g.trx = undefined;
          await trx
            .rollback()
            .execute()
            .catch(() => undefined);
        } else await ROLLBACK_TO.execute(trx);
        throw err;
      }
      g.members += 1;
      scope.changes.moveTo(g.changes);
      g.waiters.push({ afterCommit: scope.afterCommit, resolve: () => resolve(out), reject });
    } catch (err) {
      reject(err);
    } finally {
      g.running -= 1;
      if (g.running === 0) setImmediate(() => void this.commit(g));
    }
  }

  /** Commits the group once no member runs (a member that joined meanwhile commits it later). */
  private async commit(g: Group): Promise<void> {
    if (g.running > 0 || g.committing) return;
    g.committing = true;
    g.accepting = false;
    if (this.open === g) this.open = undefined;
    const trx = g.trx;
    if (!trx) return;
    try {
      await this.writeChanges(trx, g.changes);
      await trx.commit().execute();
    } catch (err) {
      await trx
        .rollback()
        .execute()
        .catch(() => undefined);
      for (const w of g.waiters) w.reject(err);
      return;
    }
    this.totals.commits += 1;
    this.totals.members += g.waiters.length;
    // Each member's work after the commit, then its answer (an error there is that member's alone).
    for (const w of g.waiters) {
      try {
        for (const cb of w.afterCommit) cb();
        w.resolve();
      } catch (err) {
        w.reject(err);
      }
    }
  }
}
