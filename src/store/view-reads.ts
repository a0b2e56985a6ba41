// What a page of service views is keyed by (orchestrator/views.ts), read in one statement: the
// versions of the live containers of the page's services (and of those they link to), and the live
// links pointing at the page's services. Two statements before; after a PATCH its answer's view
// is built again (its row's version moved), so each PATCH paid both, on PostgreSQL two round trips
// (issue 34, item 1).
import { sql } from "kysely";
import { chunks } from "./batches.ts";
import { ContainerReads } from "./container-reads.ts";
import { runCompiled } from "./query-texts.ts";
import { type IncomingLink, ServiceRows } from "./service-rows.ts";
import type { ContainerRow, Kernel } from "./types.ts";

export type ContainerVersion = Pick<ContainerRow, "uuid" | "namespace" | "service_uuid" | "version">;

/**
 * The live containers' versions of `versionsOf` (ordered by service, then uuid) and the live links
 * to `linksTo` (ordered as ServiceRows.linksTo orders them: by the linking service's id, then the
 * link's position). One statement when each list fits one chunk of an IN list, else the two reads
 * of their own.
 */
export async function viewVersions(
  k: Kernel,
  versionsOf: readonly string[],
  linksTo: readonly string[],
): Promise<{ versions: ContainerVersion[]; links: IncomingLink[] }> {
  const [ofContainers = [], ...moreContainers] = chunks(versionsOf);
  const [ofLinks = [], ...moreLinks] = chunks(linksTo);
  if (ofContainers.length === 0 || ofLinks.length === 0 || moreContainers.length || moreLinks.length) {
    return {
      versions: await new ContainerReads(k).containerVersions(versionsOf),
      links: await new ServiceRows(k).linksTo(linksTo),
    };
  }
  const rows = await runCompiled(
    k,
    `view versions of ${ofContainers.length}, links to ${ofLinks.length}`,
    [...ofContainers, "Terminated", ...ofLinks, "Terminated"],
    () =>
      k.db
        .selectFrom("containers")
        .select([
          sql<string>`'c'`.as("kind"),
          "uuid",
          "namespace",
          "service_uuid",
          "version",
          sql<string | null>`null`.as("name"),
          sql<number | null>`null`.as("sid"),
          sql<number | null>`null`.as("position"),
        ])
        .where("service_uuid", "in", ofContainers)
        .where("state", "!=", "Terminated")
        .unionAll((eb) =>
          eb
            .selectFrom("service_links as l")
            .innerJoin("services as s", "s.uuid", "l.from_uuid")
            .select([
              sql<string>`'l'`.as("kind"),
              "l.from_uuid as uuid",
              "s.namespace",
              "l.to_uuid as service_uuid",
              // (typed as the first part's column: a link has no version, and none is read from it)
              sql<number>`null`.as("version"),
              "l.name",
              "s.id as sid",
              "l.position",
            ])
            .where("l.to_uuid", "in", ofLinks)
            .where("s.state", "!=", "Terminated")
            .whereRef("l.from_uuid", "!=", "l.to_uuid"),
        ),
    // Put in order here: an ORDER BY over the compound made SQLite sort each part in a temporary
    // b-tree, which cost more than the two statements it replaced.
  );
  const versions: ContainerVersion[] = [];
  const links: (IncomingLink & { sid: number; position: number })[] = [];
  for (const r of rows) {
    if (r.kind === "c")
      versions.push({
        uuid: r.uuid,
        namespace: r.namespace,
        service_uuid: r.service_uuid,
        version: Number(r.version),
      });
    else
      links.push({
        namespace: r.namespace,
        from_uuid: r.uuid,
        to_uuid: r.service_uuid,
        name: r.name!,
        sid: Number(r.sid),
        position: Number(r.position),
      });
  }
  versions.sort((a, b) => compare(a.service_uuid, b.service_uuid) || compare(a.uuid, b.uuid));
  links.sort((a, b) => a.sid - b.sid || a.position - b.position);
  return {
    versions,
    links: links.map((l) => ({
      namespace: l.namespace,
      from_uuid: l.from_uuid,
      to_uuid: l.to_uuid,
      name: l.name,
    })),
  };
}

/** Text order as the databases' binary collation gives it (uuids: ASCII). */
const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
