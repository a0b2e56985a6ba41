// Quotas per namespace (issue 26): what a namespace holds of each bounded resource, counted in the
// transaction that adds to it (after `Store.lockNamespace`, so two writers at the limit cannot
// both pass), and the limits an administrator set (namespace_settings.limits). The rules and the
// wording of a refusal are domain/quotas.ts.
import {
  assertWithinQuota,
  type Limits,
  limitOf,
  QUOTA_RESOURCES,
  type QuotaResource,
} from "../domain/quotas.ts";
import { decodeLimits } from "./codec.ts";
import { NamespaceStore } from "./namespaces.ts";
import type { Kernel } from "./types.ts";

export { decodeLimits } from "./codec.ts";

/** The resources counted from rows (streams are counted by the process that holds them). */
export type CountedResource = Exclude<
  QuotaResource,
  "streams_per_key" | "envvars_per_service" | "env_bytes_per_service"
>;

export const COUNTED_RESOURCES = QUOTA_RESOURCES.filter(
  (r): r is CountedResource =>
    r !== "streams_per_key" && r !== "envvars_per_service" && r !== "env_bytes_per_service",
);

/** A namespace's limits as set, and whether it is an administrator's own (no default limits). */
export interface QuotaSettings {
  limits: Limits;
  exempt: boolean;
}

const n = (row: { n?: unknown } | undefined) => Number(row?.n ?? 0);

export class QuotaStore {
  constructor(private readonly s: Kernel) {}

  private get db() {
    return this.s.db;
  }

  /** The namespace's limits and whether it is an administrator's own namespace. */
  async settings(namespace: string, opts: { lock?: boolean } = {}): Promise<QuotaSettings> {
    const facts = await new NamespaceStore(this.s).facts(namespace, opts);
    return { limits: decodeLimits(facts?.limits), exempt: facts?.ownerIsAdmin ?? false };
  }

  /** The limit in force for one resource of the namespace (null: none). */
  async limit(namespace: string, resource: QuotaResource): Promise<number | null> {
    const { limits, exempt } = await this.settings(namespace);
    return limitOf(resource, limits, { exempt });
  }

  /**
   * Merges limits an administrator sets into the namespace's (a resource set to null has no
   * limit; one left out keeps its value). Answers the limits as stored.
   */
  async putLimits(namespace: string, change: Limits): Promise<Limits> {
    return this.s.transaction(async (tx) => {
      const current = await tx.db
        .selectFrom("namespace_settings")
        .select("limits")
        .where("namespace", "=", namespace)
        .executeTakeFirst();
      const limits = JSON.stringify({ ...decodeLimits(current?.limits), ...change });
      await tx.db
        .insertInto("namespace_settings")
        .values({ namespace, privileges: "{}", limits })
        .onConflict((oc) => oc.column("namespace").doUpdateSet({ limits }))
        .execute();
      return decodeLimits(limits);
    });
  }

  /** What the namespace holds of one resource now. `now` (epoch ms) decides which tokens are usable. */
  async usage(namespace: string, resource: CountedResource, now: number): Promise<number> {
    const db = this.db;
    switch (resource) {
      case "services":
        return n(
          await db
            .selectFrom("services")
            .select((eb) => eb.fn.countAll().as("n"))
            .where("namespace", "=", namespace)
            .where("state", "!=", "Terminated")
            .executeTakeFirst(),
        );
      case "containers":
        return n(
          await db
            .selectFrom("services")
            .select((eb) => eb.fn.sum<number>("target_num_containers").as("n"))
            .where("namespace", "=", namespace)
            .where("state", "!=", "Terminated")
            .executeTakeFirst(),
        );
      case "stacks":
        return n(
          await db
            .selectFrom("stacks")
            .select((eb) => eb.fn.countAll().as("n"))
            .where("namespace", "=", namespace)
            .where("state", "!=", "Terminated")
            .executeTakeFirst(),
        );
      case "nodeclusters":
        return n(
          await db
            .selectFrom("nodeclusters")
            .select((eb) => eb.fn.countAll().as("n"))
            .where("namespace", "=", namespace)
            .where("state", "!=", "Terminated")
            .executeTakeFirst(),
        );
      case "nodes": {
        // Nodes asked for: what live clusters target, and the namespace's own (agent) nodes.
        const clusters = await db
          .selectFrom("nodeclusters")
          .select((eb) => eb.fn.sum<number>("target_num_nodes").as("n"))
          .where("namespace", "=", namespace)
          .where("state", "!=", "Terminated")
          .executeTakeFirst();
        const own = await db
          .selectFrom("nodes")
          .select((eb) => eb.fn.countAll().as("n"))
          .where("namespace", "=", namespace)
          .where("cluster_uuid", "is", null)
          .where("state", "!=", "Terminated")
          .executeTakeFirst();
        return n(clusters) + n(own);
      }
      case "apikeys":
        // A user's keys; Berth's service keys (PLATFORM_AUTH) are not the user's to count.
        return n(
          await db
            .selectFrom("api_keys as k")
            .innerJoin("users as u", "u.id", "k.user_id")
            .select((eb) => eb.fn.countAll().as("n"))
            .where("u.username", "=", namespace)
            .where("k.service_uuid", "is", null)
            .executeTakeFirst(),
        );
      case "tokens":
        return n(
          await db
            .selectFrom("registration_tokens")
            .select((eb) => eb.fn.countAll().as("n"))
            .where("namespace", "=", namespace)
            .where("used_at", "is", null)
            .where("expires", ">", now)
            .executeTakeFirst(),
        );
      case "triggers":
        return n(
          await db
            .selectFrom("triggers as t")
            .innerJoin("services as s", "s.uuid", "t.service_uuid")
            .select((eb) => eb.fn.countAll().as("n"))
            .where("t.namespace", "=", namespace)
            .where("s.state", "!=", "Terminated")
            .executeTakeFirst(),
        );
    }
  }

  /**
   * Refuses (403 `quota_exceeded`) adding `adding` of a resource over the namespace's limit. Runs
   * in the transaction that writes: the namespace is locked first, so a concurrent writer counts
   * after this one commits. `written`: the rows counted already include what is being added (the
   * write came first, as an update's does).
   */
  async enforce(
    namespace: string,
    resource: CountedResource,
    adding: number,
    opts: { now: number; written?: boolean },
  ): Promise<void> {
    if (adding <= 0) return;
    if (!this.s.isTransaction) throw new Error("enforce() runs in the transaction that writes");
    // The namespace's lock (Store.lockNamespace) is taken by the statement that reads its limits;
    // what is counted is read after it, by a statement of its own (a later snapshot on PostgreSQL).
    const { limits, exempt } = await this.settings(namespace, { lock: true });
    const limit = limitOf(resource, limits, { exempt });
    if (limit === null) return;
    const counted = await this.usage(namespace, resource, opts.now);
    assertWithinQuota(namespace, resource, limit, opts.written ? counted - adding : counted, adding);
  }

  /** Every counted resource's limit and usage (the namespace's `quotas`). */
  async report(
    namespace: string,
    now: number,
  ): Promise<Record<CountedResource, { limit: number | null; usage: number }>> {
    const { limits, exempt } = await this.settings(namespace);
    const out = {} as Record<CountedResource, { limit: number | null; usage: number }>;
    for (const r of COUNTED_RESOURCES) {
      out[r] = { limit: limitOf(r, limits, { exempt }), usage: await this.usage(namespace, r, now) };
    }
    return out;
  }
}
