// Writes of container rows: a new record's defaults (newContainerRow), inserting records, and
// version-checked updates of one record or many in one transaction with their change-feed
// entries (each record's derived `state` written with it, derived.ts). Reads are
// container-reads.ts; `store.services` (services.ts) composes.
import { randomUUID } from "node:crypto";
import { addTo } from "../domain/collections.ts";
import { VersionConflict } from "../domain/errors.ts";
import { inChunks, updateCasePostgres, updateEachSqlite } from "./batches.ts";
import { ContainerReads } from "./container-reads.ts";
import { derivedColumns } from "./derived.ts";
import type { ContainerRow, Kernel, NewRow, Patch, ServiceRow } from "./types.ts";

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

export class ContainerWrites {
  constructor(private readonly s: Kernel) {}

  /** Inserts a container record with its change-feed entry. */
  async insertContainer(r: NewContainer): Promise<ContainerRow> {
    const [row] = await this.insertContainers([r]);
    return row!;
  }

  /** Many container records with their change-feed entries (`Store.insertRows`), in the given order. */
  async insertContainers(rs: readonly NewContainer[]): Promise<ContainerRow[]> {
    return this.s.insertRows("container", rs);
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
        const rows = await new ContainerWrites(tx).currentRows(uuids, opts.known);
        const todo: { row: ContainerRow; patch: ContainerPatch }[] = [];
        for (const uuid of new Set(uuids)) {
          const c = rows.get(uuid);
          if (!c) continue;
          const p = fn(c);
          if (!p || Object.keys(p).length === 0) out.set(uuid, c);
          else todo.push({ row: c, patch: p });
        }
        for (const r of await new ContainerWrites(tx).updateContainers(todo)) out.set(r.uuid, r);
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
    for (const c of await new ContainerReads(this.s).containersByUuid(missing)) rows.set(c.uuid, c);
    return rows;
  }
}
