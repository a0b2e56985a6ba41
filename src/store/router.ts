// Queries of the router (issue 30): host names held by namespaces (first claim wins, reserved by
// administrators) and the certificates of routed host names. Reached as `new RouterStore(store)`
// (a transaction's store too): the Store's own file is at its size limit.
import { serviceUri, stackUri } from "../domain/uri.ts";
import { isUniqueViolation, UniqueViolation } from "./errors.ts";
import { runCompiled } from "./query-texts.ts";
import type { HostClaimTable, RouterCertificateTable, RouterDrainTable } from "./schema.ts";
import type { Kernel, ServiceRow } from "./types.ts";

export type HostClaimRow = HostClaimTable;
export type CertificateRow = RouterCertificateTable;
export type DrainRow = RouterDrainTable;

export class RouterStore {
  constructor(private readonly s: Kernel) {}

  async claimsOf(hosts: readonly string[]): Promise<HostClaimRow[]> {
    if (hosts.length === 0) return [];
    return this.s.db
      .selectFrom("host_claims")
      .selectAll()
      .where("host", "in", [...hosts])
      .execute();
  }

  async claimsOfNamespace(namespace: string): Promise<HostClaimRow[]> {
    return this.s.db
      .selectFrom("host_claims")
      .selectAll()
      .where("namespace", "=", namespace)
      .orderBy("host")
      .execute();
  }

  async listClaims(q: { namespace?: string; limit: number; offset: number }) {
    let base = this.s.db.selectFrom("host_claims");
    if (q.namespace !== undefined) base = base.where("namespace", "=", q.namespace);
    const count = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst();
    const rows = await base.selectAll().orderBy("host").limit(q.limit).offset(q.offset).execute();
    return { rows, total: Number(count?.n ?? 0) };
  }

  /** Throws UniqueViolation when another writer claimed the host meanwhile. */
  async insertClaim(row: HostClaimRow): Promise<void> {
    try {
      await this.s.db.insertInto("host_claims").values(row).execute();
    } catch (err) {
      if (isUniqueViolation(err)) throw new UniqueViolation(row.host);
      throw err;
    }
  }

  /** Moves a claim to another holder, only if it is still what the caller read (false otherwise). */
  async moveClaim(
    from: HostClaimRow,
    to: Pick<HostClaimRow, "namespace" | "reserved" | "created">,
  ): Promise<boolean> {
    const res = await this.s.db
      .updateTable("host_claims")
      .set(to)
      .where("host", "=", from.host)
      .where("namespace", "=", from.namespace)
      .where("reserved", "=", from.reserved)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  async deleteClaim(host: string): Promise<boolean> {
    const res = await this.s.db.deleteFrom("host_claims").where("host", "=", host).executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  }

  /** Host name → holding namespace, for the given namespaces. */
  async claimMap(namespaces: readonly string[]): Promise<Map<string, string>> {
    if (namespaces.length === 0) return new Map();
    // Compiled once per list length: the router controller reads it at every commit of a service.
    const rows = await runCompiled(this.s, `host claims of ${namespaces.length}`, namespaces, () =>
      this.s.db
        .selectFrom("host_claims")
        .select(["host", "namespace"])
        .where("namespace", "in", [...namespaces]),
    );
    return new Map(rows.map((r) => [r.host, r.namespace]));
  }

  // ---- certificates ---------------------------------------------------------------------------

  async certificatesOf(hosts: readonly string[]): Promise<CertificateRow[]> {
    if (hosts.length === 0) return [];
    return this.s.db
      .selectFrom("router_certificates")
      .selectAll()
      .where("host", "in", [...hosts])
      .execute();
  }

  async certificatesOfNamespace(namespace: string): Promise<CertificateRow[]> {
    return this.s.db
      .selectFrom("router_certificates")
      .selectAll()
      .where("namespace", "=", namespace)
      .execute();
  }

  /**
   * Writes a certificate's row (insert or replace) and, in the same transaction, an `update` event
   * of each service serving the host: certificate states are part of those services' views.
   */
  async putCertificate(row: CertificateRow, services: readonly ServiceRow[] = []): Promise<void> {
    if (services.length === 0) return this.writeCertificate(row);
    await this.s.transaction(async (tx) => {
      await new RouterStore(tx).writeCertificate(row);
      await tx.appendChanges(
        services.map((x) => ({
          namespace: x.namespace,
          type: "service",
          action: "update",
          resource_uri: serviceUri(x),
          state: x.state,
          parents: JSON.stringify(x.stack_uuid ? [stackUri(x.namespace, x.stack_uuid)] : []),
          datetime: row.updated,
        })),
      );
    });
  }

  private async writeCertificate(row: CertificateRow): Promise<void> {
    await this.s.db
      .insertInto("router_certificates")
      .values(row)
      .onConflict((oc) =>
        oc.column("host").doUpdateSet({
          namespace: row.namespace,
          state: row.state,
          issuer: row.issuer,
          expires_at: row.expires_at,
          error: row.error,
          sealed_cert: row.sealed_cert,
          sealed_key: row.sealed_key,
          updated: row.updated,
        }),
      )
      .execute();
  }

  async deleteCertificate(host: string): Promise<boolean> {
    const res = await this.s.db.deleteFrom("router_certificates").where("host", "=", host).executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  }

  // ---- serials of the certificates routers serve (renewals, router/controller.ts) --------------

  /** The serial each host name's certificate last had on the node's router. */
  async serialsOf(nodeUuid: string, hosts: readonly string[]): Promise<Map<string, string>> {
    if (hosts.length === 0) return new Map();
    const rows = await this.s.db
      .selectFrom("router_serials")
      .select(["host", "serial"])
      .where("node_uuid", "=", nodeUuid)
      .where("host", "in", [...hosts])
      .execute();
    return new Map(rows.map((r) => [r.host, r.serial]));
  }

  async putSerial(row: { node_uuid: string; host: string; serial: string; updated: number }): Promise<void> {
    await this.s.db
      .insertInto("router_serials")
      .values(row)
      .onConflict((oc) =>
        oc.columns(["node_uuid", "host"]).doUpdateSet({ serial: row.serial, updated: row.updated }),
      )
      .execute();
  }

  /** A node is gone: the serials its router served go with it. */
  async deleteSerialsOfNode(nodeUuid: string): Promise<void> {
    await this.s.db.deleteFrom("router_serials").where("node_uuid", "=", nodeUuid).execute();
  }

  // ---- drains and holds (router/drains.ts) ------------------------------------------------------

  /** Writes the rows (a later write of an engine container replaces its row) and drops expired ones. */
  async putDrains(rows: readonly DrainRow[], now: number): Promise<void> {
    await this.s.db.deleteFrom("router_drains").where("until", "<=", now).execute();
    for (const row of rows)
      await this.s.db
        .insertInto("router_drains")
        .values(row)
        .onConflict((oc) =>
          oc.column("key").doUpdateSet({ kind: row.kind, container: row.container, until: row.until }),
        )
        .execute();
  }

  /** The rows of a namespace that still hold (all namespaces when none is named). */
  async drainsOf(namespace: string | undefined, now: number): Promise<DrainRow[]> {
    let q = this.s.db.selectFrom("router_drains").selectAll().where("until", ">", now);
    if (namespace !== undefined) q = q.where("namespace", "=", namespace);
    return q.orderBy("key").execute();
  }

  /** The records' holds become paused ones (a rollout paused after a failure), lasting until `until`. */
  async pauseHolds(containerUuids: readonly string[], until: number): Promise<void> {
    if (containerUuids.length === 0) return;
    await this.s.db
      .updateTable("router_drains")
      .set({ kind: "paused", until })
      .where("kind", "=", "hold")
      .where("container_uuid", "in", [...containerUuids])
      .execute();
  }

  /** The held rows of the records (running or paused holds), turned into drains (their replacements are ready); answers them. */
  async releaseHolds(containerUuids: readonly string[], until: number): Promise<DrainRow[]> {
    if (containerUuids.length === 0) return [];
    const held = await this.s.db
      .selectFrom("router_drains")
      .selectAll()
      .where("kind", "in", ["hold", "paused"])
      .where("container_uuid", "in", [...containerUuids])
      .execute();
    if (held.length === 0) return [];
    await this.s.db
      .updateTable("router_drains")
      .set({ kind: "drain", container: null, until })
      .where(
        "key",
        "in",
        held.map((h) => h.key),
      )
      .execute();
    return held;
  }
}
