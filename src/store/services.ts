// Queries of services and containers.
import { VersionConflict } from "../domain/errors.ts";
import type { ContainerTable, ServiceTable } from "./schema.ts";
import type { Store } from "./store.ts";

export type ServiceRow = Omit<ServiceTable, "id"> & { id: number };
export type ContainerRow = Omit<ContainerTable, "id"> & { id: number };
export type NewService = Omit<ServiceRow, "id" | "version">;
export type NewContainer = Omit<ContainerRow, "id" | "version">;

export interface ServiceQuery {
  namespace: string;
  uuid?: string;
  uuidPrefix?: string;
  state?: string;
  name?: string;
  stack?: string;
  stackName?: string;
  limit: number;
  offset: number;
}

export interface ContainerQuery {
  namespace: string;
  uuid?: string;
  uuidPrefix?: string;
  state?: string;
  name?: string;
  service?: string;
  node?: string;
  serviceStackName?: string;
  limit: number;
  offset: number;
}

const like = (prefix: string) => `${prefix.replace(/[%_\\]/g, "")}%`;

export class ServiceStore {
  constructor(private readonly s: Store) {}

  async insertService(r: NewService): Promise<ServiceRow> {
    return this.s.db
      .insertInto("services")
      .values({ ...r, version: 1 })
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  async findService(uuid: string): Promise<ServiceRow | undefined> {
    return this.s.db.selectFrom("services").selectAll().where("uuid", "=", uuid).executeTakeFirst();
  }

  async updateService(
    r: Pick<ServiceRow, "uuid" | "version">,
    patch: Partial<ServiceRow>,
  ): Promise<ServiceRow> {
    const row = await this.s.db
      .updateTable("services")
      .set({ ...patch, version: r.version + 1 })
      .where("uuid", "=", r.uuid)
      .where("version", "=", r.version)
      .returningAll()
      .executeTakeFirst();
    if (!row) throw new VersionConflict(`service ${r.uuid}`);
    return row;
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
    const count = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst();
    const rows = await base.selectAll().orderBy("id", "desc").limit(q.limit).offset(q.offset).execute();
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

  async insertContainer(r: NewContainer): Promise<ContainerRow> {
    return this.s.db
      .insertInto("containers")
      .values({ ...r, version: 1 })
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  async findContainer(uuid: string): Promise<ContainerRow | undefined> {
    return this.s.db.selectFrom("containers").selectAll().where("uuid", "=", uuid).executeTakeFirst();
  }

  async updateContainer(
    r: Pick<ContainerRow, "uuid" | "version">,
    patch: Partial<ContainerRow>,
  ): Promise<ContainerRow> {
    const row = await this.s.db
      .updateTable("containers")
      .set({ ...patch, version: r.version + 1 })
      .where("uuid", "=", r.uuid)
      .where("version", "=", r.version)
      .returningAll()
      .executeTakeFirst();
    if (!row) throw new VersionConflict(`container ${r.uuid}`);
    return row;
  }

  async containersOfService(serviceUuid: string): Promise<ContainerRow[]> {
    return this.s.db
      .selectFrom("containers")
      .selectAll()
      .where("service_uuid", "=", serviceUuid)
      .orderBy("number")
      .execute();
  }

  /** Containers that are not Terminated, optionally of one node or namespace. */
  async liveContainers(filter: { node?: string; namespace?: string } = {}): Promise<ContainerRow[]> {
    let q = this.s.db.selectFrom("containers").selectAll().where("state", "!=", "Terminated");
    if (filter.node !== undefined) q = q.where("node_uuid", "=", filter.node);
    if (filter.namespace !== undefined) q = q.where("namespace", "=", filter.namespace);
    return q.orderBy("id").execute();
  }

  async countLiveContainersOnNode(nodeUuid: string): Promise<number> {
    const row = await this.s.db
      .selectFrom("containers")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("node_uuid", "=", nodeUuid)
      .where("state", "!=", "Terminated")
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  async listContainers(q: ContainerQuery): Promise<{ rows: ContainerRow[]; total: number }> {
    let base = this.s.db.selectFrom("containers").where("namespace", "=", q.namespace);
    if (q.uuid !== undefined) base = base.where("uuid", "=", q.uuid);
    if (q.uuidPrefix !== undefined) base = base.where("uuid", "like", like(q.uuidPrefix));
    if (q.state !== undefined) base = base.where("state", "=", q.state);
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
    const count = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst();
    const rows = await base.selectAll().orderBy("id", "desc").limit(q.limit).offset(q.offset).execute();
    return { rows, total: Number(count?.n ?? 0) };
  }
}
