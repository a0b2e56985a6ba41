// Service rows: inserting, updating and finding a service's record, keeping its `service_links`
// rows in step with its definition, and the lists and batched lookups of services (by uuid, by
// stack, live ones, the links pointing at them). Containers are container-reads.ts and
// container-writes.ts; `store.services` (services.ts) composes the three.
import { chunks, inChunks } from "./batches.ts";
import { specLinks } from "./codec.ts";
import { containsText, type ListOrder, orderOf, prefixLike } from "./list-search.ts";
import { serviceFailing } from "./overview.ts";
import { runCompiled } from "./query-texts.ts";
import { RevisionStore } from "./revisions.ts";
import type { Kernel, ServiceRow } from "./types.ts";

export type NewService = Omit<ServiceRow, "id" | "version">;

export interface ServiceQuery {
  namespace: string;
  uuid?: string;
  uuidPrefix?: string;
  state?: string;
  /** Leaves out this state (`state__not`). */
  stateNot?: string;
  name?: string;
  stack?: string;
  stackName?: string;
  /** Only failing services (`failing=true`, store/overview.ts), or only the others. */
  failing?: boolean;
  /** Names containing this text, any case (`name__icontains`). */
  nameContains?: string;
  orderBy?: ListOrder;
  limit: number;
  offset: number;
}

/** A link of another service's definition that points at a service (`linked_from_service`). */
export interface IncomingLink {
  namespace: string;
  from_uuid: string;
  to_uuid: string;
  name: string;
}

export class ServiceRows {
  constructor(private readonly s: Kernel) {}

  /** Services' kept definitions (revisions.ts). */
  get revisions(): RevisionStore {
    return new RevisionStore(this.s);
  }

  /** Inserts a service with its link rows and its change-feed entry. */
  async insertService(r: NewService): Promise<ServiceRow> {
    const [row] = await this.s.insertRows("service", [r]);
    return row!;
  }

  /** Keeps `service_links` in step with the definition just written. */
  async indexLinks(uuid: string, spec: string): Promise<void> {
    await this.s.db.deleteFrom("service_links").where("from_uuid", "=", uuid).execute();
    const rows = specLinks(uuid, spec);
    if (rows.length) await this.s.db.insertInto("service_links").values(rows).execute();
  }

  async findService(uuid: string): Promise<ServiceRow | undefined> {
    const [row] = await runCompiled(this.s, "service by uuid", [uuid], () =>
      this.s.db.selectFrom("services").selectAll().where("uuid", "=", uuid),
    );
    return row;
  }

  /** Optimistic update with its change-feed entry (`Store.updateRow`); a new definition commits with its link rows. */
  async updateService(r: ServiceRow, patch: Partial<ServiceRow>): Promise<ServiceRow> {
    return this.s.updateRow("service", r, patch);
  }

  /** A live (not Terminated) service of the namespace by name. */
  async findLiveServiceByName(namespace: string, name: string): Promise<ServiceRow | undefined> {
    return this.s.db
      .selectFrom("services")
      .selectAll()
      .where("namespace", "=", namespace)
      .where("name", "=", name)
      .where("state", "!=", "Terminated")
      .executeTakeFirst();
  }

  /**
   * Services by uuid, in any state and namespace (batched lookups of views); with `linkedFrom`, the
   * same statement also reads the services those ones' definitions link to now.
   */
  async servicesByUuid(
    uuids: readonly string[],
    opts: { linkedFrom?: readonly string[] } = {},
  ): Promise<ServiceRow[]> {
    const direct = chunks(uuids);
    const from = chunks(opts.linkedFrom ?? []);
    const out = new Map<string, ServiceRow>();
    for (let i = 0; i < Math.max(direct.length, from.length); i++) {
      const d = direct[i];
      const f = from[i];
      const rows = await this.s.db
        .selectFrom("services")
        .selectAll()
        .where((eb) =>
          eb.or([
            ...(d ? [eb("uuid", "in", d)] : []),
            ...(f
              ? [
                  eb(
                    "uuid",
                    "in",
                    eb.selectFrom("service_links").select("to_uuid").where("from_uuid", "in", f),
                  ),
                ]
              : []),
          ]),
        )
        .execute();
      for (const r of rows) out.set(r.uuid, r);
    }
    return [...out.values()];
  }

  /**
   * The links of live services' definitions that point at the given services, ordered as the
   * view lists them (by the linking service's age, then the link's position).
   */
  async linksTo(serviceUuids: readonly string[]): Promise<IncomingLink[]> {
    return inChunks(serviceUuids, (part) =>
      runCompiled(this.s, `links to ${part.length}`, [...part, "Terminated"], () =>
        this.s.db
          .selectFrom("service_links as l")
          .innerJoin("services as s", "s.uuid", "l.from_uuid")
          .select(["s.namespace", "l.from_uuid", "l.to_uuid", "l.name"])
          .where("l.to_uuid", "in", part)
          .where("s.state", "!=", "Terminated")
          .whereRef("l.from_uuid", "!=", "l.to_uuid")
          .orderBy("s.id")
          .orderBy("l.position"),
      ),
    );
  }

  async listServices(q: ServiceQuery): Promise<{ rows: ServiceRow[]; total: number }> {
    let base = this.s.db.selectFrom("services").where("namespace", "=", q.namespace);
    if (q.uuid !== undefined) base = base.where("uuid", "=", q.uuid);
    if (q.uuidPrefix !== undefined) base = base.where("uuid", "like", prefixLike(q.uuidPrefix));
    if (q.state !== undefined) base = base.where("state", "=", q.state);
    if (q.stateNot !== undefined) base = base.where("state", "!=", q.stateNot);
    if (q.name !== undefined) base = base.where("name", "=", q.name);
    if (q.stack !== undefined) base = base.where("stack_uuid", "=", q.stack);
    if (q.stackName !== undefined) {
      const stackName = q.stackName;
      base = base.where("stack_uuid", "in", (eb) =>
        eb
          .selectFrom("stacks")
          .select("uuid")
          .where("namespace", "=", q.namespace)
          .where("name", "=", stackName),
      );
    }
    if (q.failing !== undefined)
      base = base.where((eb) => (q.failing ? serviceFailing(eb) : eb.not(serviceFailing(eb))));
    if (q.nameContains !== undefined) base = base.where(containsText(["name"], q.nameContains));
    const count = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst();
    // A search reads the matching ids from the (namespace, state, name) index, not every row.
    const matching =
      q.nameContains === undefined
        ? base
        : this.s.db.selectFrom("services").where("id", "in", base.select("id"));
    const rows = await matching
      .selectAll()
      .orderBy(orderOf(q.orderBy))
      .limit(q.limit)
      .offset(q.offset)
      .execute();
    return { rows, total: Number(count?.n ?? 0) };
  }

  async liveServices(filter: { namespace?: string } = {}): Promise<ServiceRow[]> {
    let q = this.s.db.selectFrom("services").selectAll().where("state", "!=", "Terminated");
    if (filter.namespace !== undefined) q = q.where("namespace", "=", filter.namespace);
    return q.orderBy("id").execute();
  }

  async servicesOfStack(stackUuid: string): Promise<ServiceRow[]> {
    return this.s.db
      .selectFrom("services")
      .selectAll()
      .where("stack_uuid", "=", stackUuid)
      .orderBy("id")
      .execute();
  }

  /** Services of several stacks, ordered by stack and age. */
  async servicesOfStacks(stackUuids: readonly string[]): Promise<ServiceRow[]> {
    return inChunks(stackUuids, (part) =>
      this.s.db
        .selectFrom("services")
        .selectAll()
        .where("stack_uuid", "in", part)
        .orderBy("stack_uuid")
        .orderBy("id")
        .execute(),
    );
  }
}
