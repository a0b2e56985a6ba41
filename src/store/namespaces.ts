// Queries of namespace settings (migration 0018): what administrators decide per namespace, its
// privileges (domain/privileges.ts) and its limits, each kept as a JSON object.
import { runCompiled } from "./query-texts.ts";
import type { Kernel } from "./types.ts";

/** A namespace with what its settings need to be read: its kind and, for a user's, whether that user is an administrator. */
export interface NamespaceFacts {
  name: string;
  kind: "user" | "org";
  /** The user whose personal namespace this is is an administrator (false for organizations). */
  ownerIsAdmin: boolean;
  /** JSON object; "{}" when nothing was set. */
  privileges: string;
  /** JSON object; "{}" when nothing was set. */
  limits: string;
}

export class NamespaceStore {
  constructor(private readonly s: Kernel) {}

  /**
   * The namespace and its settings in one statement; undefined when there is no such namespace.
   * `lock` (in a transaction): on PostgreSQL the same statement takes the namespace's row lock
   * (Store.lockNamespace), so a quota's check is one round trip, not two.
   */
  async facts(name: string, opts: { lock?: boolean } = {}): Promise<NamespaceFacts | undefined> {
    const lock = opts.lock === true && this.s.dialect === "postgres";
    if (opts.lock && !this.s.isTransaction) throw new Error("facts({ lock }) runs in a transaction");
    const [row] = await runCompiled(
      this.s,
      lock ? "namespace facts, locked" : "namespace facts",
      [name],
      () => {
        const q = this.s.db
          .selectFrom("namespaces as n")
          .leftJoin("users as u", "u.username", "n.name")
          .leftJoin("namespace_settings as st", "st.namespace", "n.name")
          .select(["n.name", "n.kind", "u.is_admin", "st.privileges", "st.limits"])
          .where("n.name", "=", name);
        return lock ? q.forUpdate("n") : q;
      },
    );
    if (!row) return undefined;
    return {
      name: row.name,
      kind: row.kind,
      ownerIsAdmin: row.kind === "user" && Number(row.is_admin ?? 0) === 1,
      privileges: row.privileges ?? "{}",
      limits: row.limits ?? "{}",
    };
  }

  /**
   * Sets a namespace's privileges (JSON object). Caches of policies are dropped when it commits,
   * in this process and on other replicas (the identity change signal, Store.identityChanged).
   */
  async putPrivileges(namespace: string, privileges: string): Promise<void> {
    await this.s.transaction(async (tx) => {
      await tx.db
        .insertInto("namespace_settings")
        .values({ namespace, privileges, limits: "{}" })
        .onConflict((oc) => oc.column("namespace").doUpdateSet({ privileges }))
        .execute();
      tx.identityChanged();
    });
  }
}
