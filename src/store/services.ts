// Queries of services and containers. Long because a service's reads and its
// containers' reads share one section (`store.services`, used across the orchestrator); the
// statements over many rows live in batches.ts. Splitting containers into a section of their own
// is the next step once the orchestrator's own split has landed.
import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import { addTo } from "../domain/collections.ts";
import { VersionConflict } from "../domain/errors.ts";
import { chunks, inChunks, updateCasePostgres, updateEachSqlite } from "./batches.ts";
import { specLinks } from "./codec.ts";
import { derivedColumns } from "./derived.ts";
import { containsText, type ListOrder, orderOf } from "./list-search.ts";
import { containerFailing, serviceFailing } from "./overview.ts";
import { RevisionStore } from "./revisions.ts";
import type { ContainerRow, Kernel, NewRow, Patch, ServiceRow } from "./types.ts";

export type { ContainerRow, ServiceRow } from "./types.ts";
export type NewService = Omit<ServiceRow, "id" | "version">;
/** A live container as the reconciler compares it with its engine (comparedContainers). */
export type ComparedContainer = Pick<
  ContainerRow,
  | "id"
  | "uuid"
  | "service_uuid"
  | "node_uuid"
  | "name"
  | "number"
  | "state"
  | "desired"
  | "engine_id"
  | "generation"
  | "exit_code"
  | "private_ip"
  | "link_hosts"
> & { spec: string | null };
/** A new container record: its `state` is derived by the store (derived.ts). */
export type NewContainer = NewRow<"container">;
/** A change of a container record: actions write `phase`, the runtime `observed`, never `state`. */
export type ContainerPatch = Patch<"container">;

/**
 * A new container record of `service` numbered `number` on `node`: being started (Starting),
 * wanted running, with no engine container yet; `fields` overrides any of that (tests and benchmarks seed other states).
 */
export function newContainerRow(
  service: Pick<ServiceRow, "namespace" | "uuid" | "name" | "spec" | "spec_version">,
  node: string,
  number: number,
  now: number,
  fields: Partial<NewContainer> = {},
): NewContainer {
  return {
    uuid: randomUUID(),
    namespace: service.namespace,
    service_uuid: service.uuid,
    node_uuid: node,
    name: `${service.name}-${number}`,
    number,
    desired: "running",
    phase: "starting",
    observed: "none",
    health: null,
    health_output: null,
    restart_count: 0,
    engine_id: null,
    exit_code: null,
    exit_code_msg: null,
    private_ip: "",
    ports: "[]",
    spec: service.spec,
    spec_version: service.spec_version,
    generation: randomUUID().slice(0, 16),
    environment: null,
    link_hosts: null,
    deployed_at: now,
    started_at: null,
    stopped_at: null,
    destroyed_at: null,
    created: now,
    ...fields,
  };
}

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

export interface ContainerQuery {
  namespace: string;
  uuid?: string;
  uuidPrefix?: string;
  state?: string;
  /** Leaves out this state (`state__not`). */
  stateNot?: string;
  name?: string;
  service?: string;
  node?: string;
  serviceStackName?: string;
  /** Only failing containers (`failing=true`, store/overview.ts), or only the others. */
  failing?: boolean;
  /** Names containing this text, any case (`name__icontains`). */
  nameContains?: string;
  orderBy?: ListOrder;
  limit: number;
  offset: number;
}

const like = (prefix: string) => `${prefix.replace(/[%_\\]/g, "")}%`;

/**
 * "Terminated" written into the SQL text: the partial index of live containers
 * (`containers_live_node`) serves a query only when the query states its condition literally.
 */
const TERMINATED = sql.lit("Terminated");

/**
 * What a service's view reads of each of its live containers: no definition (the one of each
 * version is read once: ServiceStore.deployedSpecs), no engine facts it does not show.
 */
export type ViewedContainer = Pick<
  ContainerRow,
  | "uuid"
  | "namespace"
  | "service_uuid"
  | "name"
  | "number"
  | "state"
  | "spec_version"
  | "private_ip"
  | "environment"
  | "link_hosts"
  | "desired"
  | "observed"
  | "exit_code"
  | "health"
  | "restart_count"
>;

/** A link of another service's definition that points at a service (`linked_from_service`). */
export interface IncomingLink {
  namespace: string;
  from_uuid: string;
  to_uuid: string;
  name: string;
}

export class ServiceStore {
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
   * Containers of several services, ordered by service and number; `states` keeps only those
   * states, otherwise every container that is not Terminated.
   */
  async containersOfServices(
    serviceUuids: readonly string[],
    opts: { states?: readonly string[] } = {},
  ): Promise<ContainerRow[]> {
    return inChunks(serviceUuids, (part) => {
      let q = this.s.db.selectFrom("containers").selectAll().where("service_uuid", "in", part);
      q = opts.states
        ? q.where("state", "in", opts.states.length ? [...opts.states] : [""])
        : q.where("state", "!=", "Terminated");
      return q.orderBy("service_uuid").orderBy("number").orderBy("id").execute();
    });
  }

  /**
   * The live containers of several services as their views read them (no definitions), ordered by
   * service and number.
   */
  async viewedContainers(serviceUuids: readonly string[]): Promise<ViewedContainer[]> {
    return inChunks(serviceUuids, (part) =>
      this.s.db
        .selectFrom("containers")
        .select([
          "uuid",
          "namespace",
          "service_uuid",
          "name",
          "number",
          "state",
          "spec_version",
          "private_ip",
          "environment",
          "link_hosts",
          "desired",
          "observed",
          "exit_code",
          "health",
          "restart_count",
        ])
        .where("service_uuid", "in", part)
        .where("state", "!=", "Terminated")
        .orderBy("service_uuid")
        .orderBy("number")
        .orderBy("id")
        .execute(),
    );
  }

  /**
   * The definition the live containers of several services were deployed with, once per service
   * and definition version: every container of one version has the same one, but for the
   * scheduling fields (domain/service-spec.ts SCHEDULING_FIELDS), which views of a service do not
   * read from its containers.
   */
  async deployedSpecs(
    serviceUuids: readonly string[],
  ): Promise<Pick<ContainerRow, "service_uuid" | "spec_version" | "spec">[]> {
    return inChunks(serviceUuids, (part) =>
      this.s.db
        .selectFrom("containers")
        .select(["service_uuid", "spec_version", "spec"])
        .where("id", "in", (eb) =>
          eb
            .selectFrom("containers")
            .select((e) => e.fn.min("id").as("id"))
            .where("service_uuid", "in", part)
            .where("state", "!=", "Terminated")
            .groupBy(["service_uuid", "spec_version"]),
        )
        .execute(),
    );
  }

  /**
   * The versions of the live (not Terminated) containers of several services, ordered by service
   * and uuid: every write of a record raises its version, so an equal list means the records are
   * as they were (what cached views are checked against, orchestrator/views.ts). Read from the
   * index `containers_versions` alone.
   */
  async containerVersions(
    serviceUuids: readonly string[],
  ): Promise<Pick<ContainerRow, "uuid" | "namespace" | "service_uuid" | "version">[]> {
    return inChunks(serviceUuids, (part) =>
      this.s.db
        .selectFrom("containers")
        .select(["uuid", "namespace", "service_uuid", "version"])
        .where("service_uuid", "in", part)
        .where("state", "!=", "Terminated")
        .orderBy("service_uuid")
        .orderBy("uuid")
        .execute(),
    );
  }

  /**
   * The links of live services' definitions that point at the given services, ordered as the
   * view lists them (by the linking service's age, then the link's position).
   */
  async linksTo(serviceUuids: readonly string[]): Promise<IncomingLink[]> {
    return inChunks(serviceUuids, (part) =>
      this.s.db
        .selectFrom("service_links as l")
        .innerJoin("services as s", "s.uuid", "l.from_uuid")
        .select(["s.namespace", "l.from_uuid", "l.to_uuid", "l.name"])
        .where("l.to_uuid", "in", part)
        .where("s.state", "!=", "Terminated")
        .whereRef("l.from_uuid", "!=", "l.to_uuid")
        .orderBy("s.id")
        .orderBy("l.position")
        .execute(),
    );
  }

  async findService(uuid: string): Promise<ServiceRow | undefined> {
    return this.s.db.selectFrom("services").selectAll().where("uuid", "=", uuid).executeTakeFirst();
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

  async listServices(q: ServiceQuery): Promise<{ rows: ServiceRow[]; total: number }> {
    let base = this.s.db.selectFrom("services").where("namespace", "=", q.namespace);
    if (q.uuid !== undefined) base = base.where("uuid", "=", q.uuid);
    if (q.uuidPrefix !== undefined) base = base.where("uuid", "like", like(q.uuidPrefix));
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

  /** Containers by uuid, in any state. */
  async containersByUuid(uuids: readonly string[]): Promise<ContainerRow[]> {
    return inChunks(uuids, (part) =>
      this.s.db.selectFrom("containers").selectAll().where("uuid", "in", part).execute(),
    );
  }

  /**
   * What the reconciler sorts queued containers by (no definitions or environments): a burst of
   * engine events during a large deploy reads a few columns of each record, not the whole row.
   */
  async containerHeads(uuids: readonly string[]) {
    return inChunks(uuids, (part) =>
      this.s.db
        .selectFrom("containers")
        .select(["uuid", "namespace", "service_uuid", "node_uuid", "state", "engine_id", "link_hosts"])
        .where("uuid", "in", part)
        .execute(),
    );
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

  /** Inserts a container record with its change-feed entry. */
  async insertContainer(r: NewContainer): Promise<ContainerRow> {
    const [row] = await this.insertContainers([r]);
    return row!;
  }

  /** Many container records with their change-feed entries (`Store.insertRows`), in the given order. */
  async insertContainers(rs: readonly NewContainer[]): Promise<ContainerRow[]> {
    return this.s.insertRows("container", rs);
  }

  async findContainer(uuid: string): Promise<ContainerRow | undefined> {
    return this.s.db.selectFrom("containers").selectAll().where("uuid", "=", uuid).executeTakeFirst();
  }

  /** Optimistic update with its change-feed entry (`Store.updateRow`). */
  async updateContainer(r: ContainerRow, patch: ContainerPatch): Promise<ContainerRow> {
    return this.s.updateRow("container", r, patch);
  }

  /**
   * `updateContainer` over many records, each version-checked, with their change-feed entries in
   * one more statement, in one transaction: when any record moved on since it was read,
   * VersionConflict is thrown (the transaction rolls back). Answers the records as written, in the
   * given order, made from the rows as read and their patches (nothing is read back).
   * On SQLite each record is one run of a statement prepared once per set of columns (a run is a
   * seek by uuid: cheaper than any multi-row form, whose CASE over the uuids costs in proportion
   * to the batch for every row); on PostgreSQL, where each statement is a round trip, records that
   * change the same columns share one statement per UPDATE_ROWS (each column a CASE over the uuids).
   */
  async updateContainers(
    patches: readonly { row: ContainerRow; patch: ContainerPatch }[],
  ): Promise<ContainerRow[]> {
    if (patches.length === 0) return [];
    // Each record's derived state is written with it (every patch then carries `state`). A key
    // whose value is undefined is no change (as Kysely's set() leaves it out).
    const items = patches.map(({ row, patch }) => {
      const full: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(patch)) if (v !== undefined) full[k] = v;
      Object.assign(full, derivedColumns("container", { ...row, ...full }));
      return { row, patch: full as Partial<ContainerRow> };
    });
    return this.s.transaction(async (tx) => {
      const groups = new Map<string, (typeof items)[number][]>();
      for (const item of items) addTo(groups, Object.keys(item.patch).sort().join(","), item);
      for (const [key, group] of groups) {
        const columns = key.split(",") as (keyof ContainerRow)[];
        if (tx.dialect === "sqlite") await updateEachSqlite(tx, columns, group);
        else await updateCasePostgres(tx, columns, group);
      }
      const out = items.map(
        ({ row, patch }) => ({ ...row, ...patch, version: row.version + 1 }) as ContainerRow,
      );
      await tx.recordWrites(
        "container",
        items.map((item, i) => ({ before: item.row, row: out[i]! })),
      );
      return out;
    });
  }

  /**
   * `Store.mutate` over many container records in one transaction: read in one query, written by
   * `updateContainers`. `known`: records as the caller last saw them (what it wrote last); those
   * whose version is still the stored one are not read again (one statement reads the versions).
   * Should another writer get in between (another replica), each record is patched on its own
   * instead. Answers the records as they are now.
   */
  async patchContainers(
    uuids: readonly string[],
    fn: (c: ContainerRow) => ContainerPatch | undefined,
    opts: { known?: ReadonlyMap<string, ContainerRow> } = {},
  ): Promise<Map<string, ContainerRow>> {
    const out = new Map<string, ContainerRow>();
    if (uuids.length === 0) return out;
    try {
      await this.s.transaction(async (tx) => {
        const rows = await new ServiceStore(tx).currentRows(uuids, opts.known);
        const todo: { row: ContainerRow; patch: ContainerPatch }[] = [];
        for (const uuid of new Set(uuids)) {
          const c = rows.get(uuid);
          if (!c) continue;
          const p = fn(c);
          if (!p || Object.keys(p).length === 0) out.set(uuid, c);
          else todo.push({ row: c, patch: p });
        }
        for (const r of await new ServiceStore(tx).updateContainers(todo)) out.set(r.uuid, r);
      });
    } catch (err) {
      if (!(err instanceof VersionConflict) || this.s.isTransaction) throw err;
      out.clear();
      for (const uuid of uuids) {
        const r = await this.s.mutate("container", uuid, fn);
        if (r) out.set(uuid, r);
      }
    }
    return out;
  }

  /** The records by uuid: the known ones still at their stored version as they are, the others read. */
  private async currentRows(
    uuids: readonly string[],
    known: ReadonlyMap<string, ContainerRow> | undefined,
  ): Promise<Map<string, ContainerRow>> {
    const rows = new Map<string, ContainerRow>();
    let missing = uuids;
    if (known?.size) {
      const hinted = uuids.filter((u) => known.has(u));
      const versions = await inChunks(hinted, (part) =>
        this.s.db.selectFrom("containers").select(["uuid", "version"]).where("uuid", "in", part).execute(),
      );
      for (const v of versions) {
        const k = known.get(v.uuid)!;
        if (k.version === v.version) rows.set(v.uuid, k);
      }
      missing = uuids.filter((u) => !rows.has(u));
    }
    for (const c of await this.containersByUuid(missing)) rows.set(c.uuid, c);
    return rows;
  }

  async containersOfService(serviceUuid: string): Promise<ContainerRow[]> {
    return this.s.db
      .selectFrom("containers")
      .selectAll()
      .where("service_uuid", "=", serviceUuid)
      .orderBy("number")
      .execute();
  }

  /**
   * A service's containers (any state) without their definitions and environments, in number
   * order: what settling the service's state and choosing which of its containers to work on need.
   * Only columns stored before the definition: SQLite reads a later one (phase, environment…)
   * through the row's overflow pages, which costs as much as reading the whole record.
   */
  async containerHeadsOfService(serviceUuid: string) {
    return this.s.db
      .selectFrom("containers")
      .select(["uuid", "node_uuid", "name", "number", "state", "desired", "engine_id"])
      .where("service_uuid", "=", serviceUuid)
      .orderBy("number")
      .execute();
  }

  /** Containers that are not Terminated, optionally of one node or namespace. */
  async liveContainers(filter: { node?: string; namespace?: string } = {}): Promise<ContainerRow[]> {
    let q = this.s.db.selectFrom("containers").selectAll();
    // A node's come from the partial index of live containers (its condition stated literally).
    if (filter.node !== undefined)
      q = q.where("node_uuid", "=", filter.node).where("state", "<>", TERMINATED);
    else q = q.where("state", "!=", "Terminated");
    if (filter.namespace !== undefined) q = q.where("namespace", "=", filter.namespace);
    return q.orderBy("id").execute();
  }

  /**
   * A page of live containers after `afterId` (by id), with what the reconciler's comparison reads:
   * no definition, except where deciding agreement needs it (a stopped container wanted running
   * that exited: its autodestroy). Paged so that a pass over 150,000 containers neither holds the
   * event loop for one long read nor every definition at once.
   */
  async comparedContainers(afterId: number, limit: number): Promise<ComparedContainer[]> {
    return this.s.db
      .selectFrom("containers")
      .select([
        "id",
        "uuid",
        "service_uuid",
        "node_uuid",
        "name",
        "number",
        "state",
        "desired",
        "engine_id",
        "generation",
        "exit_code",
        "private_ip",
        "link_hosts",
        sql<
          string | null
        >`case when state = 'Stopped' and desired = 'running' and exit_code is not null then spec end`.as(
          "spec",
        ),
      ])
      .where("state", "!=", "Terminated")
      .where("id", ">", afterId)
      .orderBy("id")
      .limit(limit)
      .execute();
  }

  /** What placement needs of the namespace's live containers (no definitions). */
  async containerLoads(namespace: string) {
    return this.s.db
      .selectFrom("containers")
      .select(["uuid", "node_uuid", "service_uuid", "state", "number"])
      .where("namespace", "=", namespace)
      .where("state", "!=", "Terminated")
      .orderBy("id")
      .execute();
  }

  /**
   * Live containers on each node (nodes without any are absent from the map), counted from the
   * index of live containers alone (`containers_live_node`, migration 0017): a page of nodes costs
   * its nodes' live containers, never the namespace's containers nor those the nodes ran before.
   * `namespaces` gets the namespace of every container counted (cached answers check them).
   */
  async countLiveContainersOnNodes(
    nodeUuids: readonly string[],
    namespaces?: Set<string>,
  ): Promise<Map<string, number>> {
    const rows = await inChunks(nodeUuids, (part) =>
      this.s.db
        .selectFrom("containers")
        .select((eb) => ["node_uuid", "namespace", eb.fn.countAll<number>().as("n")])
        .where("node_uuid", "in", part)
        .where("state", "<>", TERMINATED)
        .groupBy(["node_uuid", "namespace"])
        .execute(),
    );
    const out = new Map<string, number>();
    for (const r of rows) {
      out.set(r.node_uuid, (out.get(r.node_uuid) ?? 0) + Number(r.n));
      namespaces?.add(r.namespace);
    }
    return out;
  }

  async listContainers(q: ContainerQuery): Promise<{ rows: ContainerRow[]; total: number }> {
    let base = this.s.db.selectFrom("containers").where("namespace", "=", q.namespace);
    if (q.uuid !== undefined) base = base.where("uuid", "=", q.uuid);
    if (q.uuidPrefix !== undefined) base = base.where("uuid", "like", like(q.uuidPrefix));
    if (q.state !== undefined) base = base.where("state", "=", q.state);
    if (q.stateNot !== undefined) base = base.where("state", "!=", q.stateNot);
    if (q.name !== undefined) base = base.where("name", "=", q.name);
    if (q.service !== undefined) base = base.where("service_uuid", "=", q.service);
    if (q.node !== undefined) base = base.where("node_uuid", "=", q.node);
    if (q.serviceStackName !== undefined) {
      const stackName = q.serviceStackName;
      base = base.where("service_uuid", "in", (eb) =>
        eb
          .selectFrom("services")
          .select("services.uuid")
          .where("services.stack_uuid", "in", (eb2) =>
            eb2
              .selectFrom("stacks")
              .select("stacks.uuid")
              .where("stacks.namespace", "=", q.namespace)
              .where("stacks.name", "=", stackName),
          ),
      );
    }
    if (q.failing !== undefined)
      base = base.where((eb) => (q.failing ? containerFailing(eb) : eb.not(containerFailing(eb))));
    if (q.nameContains !== undefined) base = base.where(containsText(["name"], q.nameContains));
    const count = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst();
    // A search reads the matching ids from the (namespace, state, name) index, not every row.
    const matching =
      q.nameContains === undefined
        ? base
        : this.s.db.selectFrom("containers").where("id", "in", base.select("id"));
    const rows = await matching
      .selectAll()
      .orderBy(orderOf(q.orderBy))
      .limit(q.limit)
      .offset(q.offset)
      .execute();
    return { rows, total: Number(count?.n ?? 0) };
  }
}
