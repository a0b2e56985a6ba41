// What a page of service and container views reads (ViewData), in a fixed number of batched
// queries whatever the page's length and whatever else the namespace holds: the rows' own
// containers, the services and nodes they name, the running containers of linked services and the
// links pointing at them are each read once for the page; the views are then assembled in memory
// (wire-views.ts).

import { addTo } from "../domain/collections.ts";
import type { LinkTarget } from "../domain/links.ts";
import type { ServiceSpec } from "../domain/service.ts";
import { decodeSpec, specOf } from "../store/codec.ts";
import type { NodeRow } from "../store/nodes.ts";
import type { ContainerRow, IncomingLink, ServiceRow, ViewedContainer } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import { deployedKey, linkedServices, linkTargetOf, TARGET_STATES } from "./links.ts";

const isTargetState = (state: string) => (TARGET_STATES as readonly string[]).includes(state);

/** What a page of views reads, once for the page (readViewData). */
export interface ViewData {
  /** Services the page names, by uuid, in any state. */
  services: Map<string, ServiceRow>;
  nodes: Map<string, NodeRow>;
  /** Live containers of the page's services, by service (without their definitions: deployedSpec). */
  live: Map<string, ViewedContainer[]>;
  /** Running and starting containers as link targets, by service. */
  targets: Map<string, LinkTarget[]>;
  /** The same link targets by their container's resource URI (a container's own link variables). */
  targetByUri: Map<string, LinkTarget>;
  /** Links of live services pointing at the page's services, by target. */
  incoming: Map<string, IncomingLink[]>;
  /** A service's current definition (parsed once per page). */
  currentSpec(s: ServiceRow): ServiceSpec;
  /** The definition a live container was deployed with (one per service and version, read once). */
  deployedSpec(c: Pick<ContainerRow, "service_uuid" | "spec_version">): ServiceSpec | undefined;
}

/** The rows a page of views refers to, read in a fixed number of batched queries. */
export async function readViewData(
  store: Store,
  opts: {
    /** Services whose live containers the views count and list. */
    withContainers?: string[];
    /** Services whose running containers are link targets (own and linked services). */
    targetsOf: string[];
    /** Further services the views name (bindings, links, a container's service). */
    named: string[];
    nodes?: string[];
    /** Links pointing at the page's services, by target, when the views list them (read by the caller). */
    incoming?: Map<string, IncomingLink[]>;
    /**
     * Services (among `targetsOf`) whose current links the views follow: the services they link to
     * are read with them (through `service_links`), and their running containers are link targets.
     */
    linksOf?: string[];
    /** Service rows the caller already holds (the page's own). */
    known?: ServiceRow[];
    /** Gets the namespace of every row read (cached answers depend on them: api/answer-cache.ts). */
    read?: Set<string>;
  },
): Promise<ViewData> {
  // The page's own rows are not read again; only the services they refer to.
  const services = new Map<string, ServiceRow>((opts.known ?? []).map((r) => [r.uuid, r]));
  const wanted = [...new Set([...opts.targetsOf, ...opts.named])].filter((uuid) => !services.has(uuid));
  if (wanted.length || opts.linksOf?.length) {
    for (const r of await store.services.servicesByUuid(wanted, { linkedFrom: opts.linksOf }))
      services.set(r.uuid, r);
  }
  const specs = new Map<string, ServiceSpec>();
  const currentSpec = (s: ServiceRow) => {
    let spec = specs.get(s.uuid);
    if (!spec) {
      spec = specOf(s);
      specs.set(s.uuid, spec);
    }
    return spec;
  };
  const targetsOf = [...opts.targetsOf];
  for (const uuid of opts.linksOf ?? []) {
    const s = services.get(uuid);
    if (s) targetsOf.push(...linkedServices(currentSpec(s), s.uuid));
  }
  const nodes = new Map<string, NodeRow>();
  if (opts.nodes?.length) for (const n of await store.nodes.nodesByUuid(opts.nodes)) nodes.set(n.uuid, n);
  const live = new Map<string, ViewedContainer[]>();
  const targetSpecs = new Map<string, ServiceSpec>();
  /**
   * Live containers of services without their definitions, then the definition of each version
   * once: should a container be redeployed between the two reads, the records are read whole.
   */
  const liveOf = async (uuids: string[]): Promise<ViewedContainer[]> => {
    if (uuids.length === 0) return [];
    let rows: (ViewedContainer & { spec?: string })[] = await store.services.viewedContainers(uuids);
    for (const d of await store.services.deployedSpecs(uuids)) targetSpecs.set(deployedKey(d), specOf(d));
    if (rows.some((c) => !targetSpecs.has(deployedKey(c))))
      rows = await store.services.containersOfServices(uuids);
    for (const c of rows) {
      if (c.spec !== undefined && !targetSpecs.has(deployedKey(c)))
        targetSpecs.set(deployedKey(c), decodeSpec(c.spec));
    }
    return rows;
  };
  for (const c of await liveOf(opts.withContainers ?? [])) addTo(live, c.service_uuid, c);
  const targets = new Map<string, LinkTarget[]>();
  // The page's own services' running containers are among the live ones just read; only the
  // other services' are read again.
  const read = new Set(opts.withContainers);
  const others = [...new Set(targetsOf)].filter((uuid) => !read.has(uuid));
  const running = [...[...live.values()].flat(), ...(await liveOf(others))].filter((c) =>
    isTargetState(c.state),
  );
  const targetByUri = new Map<string, LinkTarget>();
  for (const c of running) {
    if (!services.has(c.service_uuid)) continue;
    const target = linkTargetOf(c, targetSpecs);
    targetByUri.set(target.resource_uri, target);
    addTo(targets, c.service_uuid, target);
  }
  const incoming = opts.incoming ?? new Map<string, IncomingLink[]>();
  const into = opts.read;
  if (into) {
    for (const rows of [services.values(), nodes.values(), running, ...live.values()])
      for (const r of rows) into.add(r.namespace);
    for (const list of incoming.values()) for (const l of list) into.add(l.namespace);
  }
  const deployedSpec = (c: Pick<ContainerRow, "service_uuid" | "spec_version">) =>
    targetSpecs.get(deployedKey(c));
  return { services, nodes, live, targets, targetByUri, incoming, currentSpec, deployedSpec };
}
