// The wire views of services and containers (spec "Service", "Container"; schemas in
// src/contract/) for a page of rows: the batched reads (view-data.ts), the pure views
// (wire-views.ts) and the views kept (view-fragments.ts) put together.
//
// A page of views is built from a fixed number of queries, whatever its length and whatever else
// the namespace holds: the rows' own containers, the services and nodes they name, the running
// containers of linked services and the links pointing at them are each read once for the page
// (ViewData), then every view is assembled in memory. Long pages yield to the event loop now and
// then, so one large list never holds up other callers for long.
//
// A service's view is kept with its JSON (ViewFragments) under a key made of the versions of every
// row it was built from: its own row, its live containers, the services it links to or takes
// volumes from and their live containers, and the links pointing at it. Every write of such a row
// raises its version, so a page checks its views with a few narrow reads (the containers' versions
// come from one index) and builds again only the services whose rows changed.

import { createHash } from "node:crypto";
import { setImmediate as nextTurn } from "node:timers/promises";
import type { Container } from "../contract/container.ts";
import type { Service } from "../contract/service.ts";
import { addTo } from "../domain/collections.ts";
import { withCertificates } from "../router/domain-views.ts";
import { specOf } from "../store/codec.ts";
import type { ContainerRow, IncomingLink, ServiceRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import { platformHosts } from "./engine-specs.ts";
import { readViewData } from "./view-data.ts";
import { ViewFragments } from "./view-fragments.ts";
import { containerView, type PlatformHosts, serviceView } from "./wire-views.ts";

/**
 * The key of a service's view: a digest of the versions of every row the view reads (serviceView):
 * its row, its live containers, each service it links to or takes volumes from (whether it exists,
 * its row and live containers) and each link pointing at it. Versions only grow, so a key equal to
 * the one of a kept view means none of those rows was written since that view's rows were read.
 */
function serviceKey(
  s: ServiceRow,
  deps: readonly string[],
  services: ReadonlyMap<string, ServiceRow>,
  versions: ReadonlyMap<string, string>,
  incoming: readonly IncomingLink[],
): string {
  const h = createHash("sha256");
  h.update(`${s.uuid}.${s.version}\n${versions.get(s.uuid) ?? ""}\n`);
  for (const uuid of deps) {
    const t = services.get(uuid);
    h.update(`${uuid}.${t ? t.version : "-"}\n${versions.get(uuid) ?? ""}\n`);
  }
  for (const l of incoming) h.update(`${l.namespace}/${l.from_uuid}/${l.name}\n`);
  return h.digest("base64");
}

/**
 * Characters of JSON of service views kept at most (ViewFragments; their bytes and objects are held
 * too). 16 M kept the last views of 300 services of 100 containers each after all of them were
 * terminated, 212,100 objects of their link variables among them (issue 34, bench scale); 4 M still
 * keeps a page of large services.
 */
const SERVICE_FRAGMENT_CHARS = 4 * 1024 * 1024;

/**
 * The wire views of services and containers: one page of rows in, their views out, from a fixed
 * number of batched reads (readViewData) whatever the page's length or the namespace's size.
 */
export class Views {
  private readonly platform: PlatformHosts;
  /** Service views kept with the versions of their rows. */
  private readonly serviceFragments = new ViewFragments<Service>(SERVICE_FRAGMENT_CHARS);
  /** Off: every view is built again (tests that count the statements of a build). */
  keepViews = true;

  constructor(private readonly d: { store: Store; publicUrl: string }) {
    this.platform = platformHosts(d.publicUrl);
  }

  async serviceView(s: ServiceRow, read?: Set<string>): Promise<Service> {
    return (await this.serviceViews([s], read))[0]!;
  }

  /**
   * Views of a page of services, in their order; `read` gets the namespace of every row they
   * were built from. Views kept from an earlier page whose rows did not change are reused.
   */
  async serviceViews(rows: ServiceRow[], read?: Set<string>): Promise<Service[]> {
    const store = this.d.store;
    const specs = rows.map(specOf);
    // What each view reads besides its own row and containers: the services it links to (their
    // containers are link targets) and those it takes volumes from (their names).
    const deps = rows.map((s, i) => {
      const spec = specs[i]!;
      const linked = spec.linked_to_service.map((l) => l.to_service);
      const bound = spec.bindings.flatMap((b) => (b.volumes_from ? [b.volumes_from] : []));
      return { linked, all: [...new Set([...linked, ...bound])].filter((uuid) => uuid !== s.uuid) };
    });
    const services = new Map<string, ServiceRow>(rows.map((r) => [r.uuid, r]));
    const others = [...new Set(deps.flatMap((d) => d.all))].filter((uuid) => !services.has(uuid));
    if (others.length) for (const r of await store.services.servicesByUuid(others)) services.set(r.uuid, r);
    const linked = [...new Set(deps.flatMap((d) => d.linked))].filter((uuid) => services.has(uuid));
    // Versions are read before the containers a view is built from: a view kept under a key is
    // never older than the rows the key names.
    // (The links pointing at them are read in the same statement.)
    const keyed = await store.services.viewVersions(
      [...rows.map((s) => s.uuid), ...linked],
      rows.map((s) => s.uuid),
    );
    const versions = new Map<string, string>();
    for (const c of keyed.versions) {
      versions.set(c.service_uuid, `${versions.get(c.service_uuid) ?? ""}${c.uuid}.${c.version},`);
      read?.add(c.namespace);
    }
    const incoming = new Map<string, IncomingLink[]>();
    for (const l of keyed.links) addTo(incoming, l.to_uuid, l);
    if (read) {
      for (const r of services.values()) read.add(r.namespace);
      for (const list of incoming.values()) for (const l of list) read.add(l.namespace);
    }
    const keys = rows.map((s, i) =>
      serviceKey(s, deps[i]!.all, services, versions, incoming.get(s.uuid) ?? []),
    );
    const out = rows.map((s, i) =>
      this.keepViews ? this.serviceFragments.get(s.uuid, keys[i]!) : undefined,
    );
    const missing = rows.filter((_, i) => out[i] === undefined);
    const namespaces = rows.map((s) => s.namespace);
    if (missing.length === 0) return withCertificates(store, out as Service[], namespaces);
    const missingDeps = rows
      .flatMap((_, i) => (out[i] === undefined ? deps[i]!.linked : []))
      .filter((uuid) => services.has(uuid));
    // The services they link to are read with them, in the same statement; a service without a
    // live container among the versions just read has none to read (its view's key says so).
    const withContainers = [...new Set([...missing.map((s) => s.uuid), ...missingDeps])].filter((uuid) =>
      versions.has(uuid),
    );
    const data = await readViewData(store, {
      withContainers,
      targetsOf: withContainers,
      named: [],
      known: [...services.values()],
      incoming,
      read,
    });
    let built = 0;
    for (const [i, s] of rows.entries()) {
      if (out[i] !== undefined) continue;
      out[i] = this.serviceFragments.keep(s.uuid, keys[i]!, serviceView(s, specs[i]!, data, this.platform));
      if (++built % 50 === 0) await nextTurn();
    }
    return withCertificates(store, out as Service[], namespaces);
  }

  async containerView(c: ContainerRow, read?: Set<string>): Promise<Container> {
    return (await this.containerViews([c], read))[0]!;
  }

  /**
   * Views of a page of containers, in their order; `read` gets the namespace of every row they
   * were built from.
   */
  async containerViews(rows: ContainerRow[], read?: Set<string>): Promise<Container[]> {
    for (const c of rows) read?.add(c.namespace);
    const specs = rows.map(specOf);
    const data = await readViewData(this.d.store, {
      targetsOf: rows.map((c) => c.service_uuid),
      // linked_to_container follows the service's current links (not the deployed definition's).
      linksOf: rows.map((c) => c.service_uuid),
      named: specs.flatMap((spec) => spec.bindings.flatMap((b) => (b.volumes_from ? [b.volumes_from] : []))),
      nodes: rows.map((c) => c.node_uuid),
      read,
    });
    const out = [];
    for (const [i, c] of rows.entries()) {
      out.push(containerView(c, specs[i]!, data));
      if (i % 50 === 49) await nextTurn();
    }
    return out;
  }
}
