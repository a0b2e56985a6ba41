// Commit notifications of the change feed and of identity: the in-process wake-up, and the
// PostgreSQL channel that carries them to other replicas (listened to by listen.ts).
import { sql } from "kysely";

/**
 * In-process wake-up for change-feed readers after a commit. Readers also poll the feed,
 * which covers changes committed by other processes (PostgreSQL scale-out).
 */
export class ChangeNotifier {
  private readonly listeners = new Set<(type: string) => void>();
  /** This replica's id, sent with PostgreSQL notifications so that a replica skips its own. */
  origin = "";
  subscribe(listener: (type: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  /** `type` is the changed object's type ("" when unknown: read the feed to learn more). */
  notify(type = ""): void {
    for (const l of this.listeners) l(type);
  }
}

/**
 * The PostgreSQL channel of change-feed notifications. A channel belongs to the database, not to a
 * schema: each payload ends with the schema the change was committed in (`origin type datetime
 * schema`), and a listener drops those of other schemas (other installations, other tests).
 */
export const CHANGE_CHANNEL = "berth_changes";

/**
 * The advisory lock that makes the feed's revisions commit in order (feed-commit.ts). It is the
 * database's, not the schema's: every replica of an installation must take the same one, those of
 * the previous release included while a rolling restart mixes them.
 */
export const FEED_LOCK = 7340071;

/** A notification on the change channel in the schema's name (delivered only if its transaction commits). */
export function announce(payload: string) {
  return sql`pg_notify(${CHANGE_CHANNEL}, ${payload} || ' ' || coalesce(current_schema(), ''))`;
}

/** The change channel's type for a change of users, API keys or memberships (not a feed change). */
export const IDENTITY_CHANGE = "identity";
