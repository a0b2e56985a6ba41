// Reads of container rows: one container or several by uuid or service, the few columns the
// reconciler, placement and settling read (heads, loads, compared pages), what a service's view
// reads (viewed containers, deployed definitions, versions), live counts per node, and the list
// behind `GET /containers`. Writes are container-writes.ts; `store.services` (services.ts) composes.
import { sql } from "kysely";
import { inChunks } from "./batches.ts";
import { containsText, type ListOrder, orderOf, prefixLike } from "./list-search.ts";
import { containerFailing } from "./overview.ts";
import { runCompiled } from "./query-texts.ts";
import type { ContainerRow, Kernel } from "./types.ts";

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

export class ContainerReads {
  constructor(private readonly s: Kernel) {}

  async findContainer(uuid: string): Promise<ContainerRow | undefined> {
    return this.s.db.selectFrom("containers").selectAll().where("uuid", "=", uuid).executeTakeFirst();
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
      runCompiled(this.s, `container versions of ${part.length}`, [...part, "Terminated"], () =>
        this.s.db
          .selectFrom("containers")
          .select(["uuid", "namespace", "service_uuid", "version"])
          .where("service_uuid", "in", part)
          .where("state", "!=", "Terminated")
          .orderBy("service_uuid")
          .orderBy("uuid"),
      ),
    );
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
  /**
   * The namespace's live containers as placement counts them; `only` narrows them to some nodes
   * (a placement snapshot counts those again) or some services (a plan checks what its services hold).
   */
  async containerLoads(
    namespace: string,
    only?: { nodes?: readonly string[]; services?: readonly string[] },
  ) {
    let q = this.s.db
      .selectFrom("containers")
      .select(["uuid", "node_uuid", "service_uuid", "state", "number"])
      .where("namespace", "=", namespace)
      .where("state", "!=", "Terminated");
    if (only?.nodes) {
      if (only.nodes.length === 0) return [];
      q = q.where("node_uuid", "in", only.nodes);
    }
    if (only?.services) {
      if (only.services.length === 0) return [];
      q = q.where("service_uuid", "in", only.services);
    }
    return q.orderBy("id").execute();
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
    if (q.uuidPrefix !== undefined) base = base.where("uuid", "like", prefixLike(q.uuidPrefix));
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
