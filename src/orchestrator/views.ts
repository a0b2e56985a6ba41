// The wire views of services and containers (spec "Service", "Container"; schemas in
// src/contract/): pure functions from rows to views, and the batched reads a page of them needs.
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
import {
  calculatedEnvvars,
  type LinkTargets,
  linkEnvironmentCurrent,
  linkHosts,
} from "../domain/container-spec.ts";
import { deepFreeze, madeJson } from "../domain/json.ts";
import {
  containerLinkVariables,
  type LinkTarget,
  linkedToContainer,
  linkVariablesOf,
} from "../domain/links.ts";
import type { ServiceSpec } from "../domain/service.ts";
import { containerFqdn, portView, serviceFqdn, serviceUriFields } from "../domain/service-spec.ts";
import { restTime } from "../domain/time.ts";
import { containerUri, nodeUri, serviceUri, stackUri } from "../domain/uri.ts";
import { decodeSpec, environmentOf, linkHostsOf, portsOf, specOf } from "../store/codec.ts";
import type { NodeRow } from "../store/nodes.ts";
import type { ContainerRow, IncomingLink, ServiceRow, ViewedContainer } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import { platformHosts } from "./engine-specs.ts";
import {
  deployedKey,
  followedLinks,
  linkedServices,
  linkTargetOf,
  sameEntries,
  TARGET_STATES,
} from "./links.ts";

type PlatformHosts = ReturnType<typeof platformHosts>;

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

/**
 * Whether a container is what its service's definition and links would make now: the same
 * definition version, the link variables it was created with still the ones its links give (a
 * running container's environment cannot change: new ones need a redeploy), and the link host
 * entries written into it the current ones.
 */
function synchronizedWith(
  c: ViewedContainer,
  deployed: () => ServiceSpec | undefined,
  service: ServiceRow,
  links: readonly LinkTargets[],
): boolean {
  if (c.spec_version !== service.spec_version) return false;
  if (c.environment === null || c.state === "Terminated") return true;
  const recorded = environmentOf(c) ?? [];
  const userEnvvars = deployed()?.container_envvars ?? [];
  if (!linkEnvironmentCurrent(recorded, links, { name: c.name, userEnvvars })) return false;
  return sameEntries(linkHostsOf(c), linkHosts(links));
}

/** The fields of a definition that service and container views both show (contract DefinitionFields). */
function definitionFields(spec: ServiceSpec) {
  return {
    labels: spec.labels,
    working_dir: spec.working_dir,
    user: spec.user,
    hostname: spec.hostname,
    domainname: spec.domainname,
    mac_address: spec.mac_address,
    cgroup_name: spec.cgroup_parent,
    cgroup_parent: spec.cgroup_parent,
    tty: spec.tty,
    stdin_open: spec.stdin_open,
    dns: spec.dns,
    dns_search: spec.dns_search,
    cap_add: spec.cap_add,
    cap_drop: spec.cap_drop,
    devices: spec.devices,
    extra_hosts: spec.extra_hosts,
    security_opt: spec.security_opt,
    secuirty_opt: spec.security_opt,
    entrypoint: spec.entrypoint ?? "",
    run_command: spec.run_command ?? "",
  };
}

/** How a definition's containers are stopped (contract StopFields); null in definitions stored before. */
function stopFields(spec: ServiceSpec) {
  return { stop_signal: spec.stop_signal ?? null, stop_grace_period: spec.stop_grace_period ?? null };
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

/** A service reference's name and URI, as the namespace's live services resolve it. */
function lookupIn(data: ViewData, namespace: string) {
  return (uuid: string) => {
    const s = data.services.get(uuid);
    return s && s.state !== "Terminated" && s.namespace === namespace
      ? { resource_uri: serviceUri(s), name: s.name }
      : undefined;
  };
}

/** The view of one service, from its row, its parsed definition and the page's data. */
export function serviceView(
  s: ServiceRow,
  spec: ServiceSpec,
  data: ViewData,
  platform: PlatformHosts,
): Service {
  const liveOnes = data.live.get(s.uuid) ?? [];
  const uri = serviceUri(s);
  const refs = serviceUriFields(spec, { resourceUri: uri, lookup: lookupIn(data, s.namespace) });
  const publicDns = serviceFqdn(s.name, s.namespace);
  const targetsOf = (uuid: string) => (data.services.has(uuid) ? (data.targets.get(uuid) ?? []) : []);
  const synchronized = liveOnes.every((c) =>
    synchronizedWith(
      c,
      () => data.deployedSpec(c),
      s,
      followedLinks(spec, { serviceUuid: s.uuid, serviceName: s.name, number: c.number }, targetsOf),
    ),
  );
  const linkedFrom = (data.incoming.get(s.uuid) ?? [])
    .filter((l) => l.namespace === s.namespace)
    .map((l) => ({
      name: l.name,
      from_service: serviceUri({ namespace: l.namespace, uuid: l.from_uuid }),
      to_service: uri,
    }));
  return {
    uuid: s.uuid,
    resource_uri: uri,
    image_name: spec.image_name,
    name: s.name,
    nickname: s.nickname,
    public_dns: publicDns,
    state: s.state,
    net: spec.net,
    pid: spec.pid,
    synchronized,
    deployed_datetime: restTime(s.deployed_at),
    started_datetime: restTime(s.started_at),
    stopped_datetime: restTime(s.stopped_at),
    destroyed_datetime: restTime(s.destroyed_at),
    target_num_containers:
      spec.deployment_strategy === "EVERY_NODE" ? liveOnes.length : s.target_num_containers,
    current_num_containers: liveOnes.length,
    running_num_containers: liveOnes.filter((c) => c.state === "Running").length,
    stopped_num_containers: liveOnes.filter((c) => c.state === "Stopped").length,
    stack: s.stack_uuid ? stackUri(s.namespace, s.stack_uuid) : null,
    containers: liveOnes.map(containerUri),
    container_ports: spec.container_ports.map((p) => {
      const { uri_protocol: _omit, ...view } = portView(p, {
        serviceName: s.name,
        endpointHost: publicDns,
      });
      return view;
    }),
    container_envvars: spec.container_envvars,
    calculated_envvars: calculatedEnvvars(
      {
        spec,
        service: { uuid: s.uuid, name: s.name, resource_uri: uri, namespace: s.namespace },
        links: spec.linked_to_service.map((l) => ({ alias: l.name, targets: targetsOf(l.to_service) })),
        platform,
      },
      { includeSecrets: false },
    ),
    ...definitionFields(spec),
    ...stopFields(spec),
    sequential_deployment: spec.sequential_deployment,
    cpu_shares: spec.cpu_shares,
    cpuset: spec.cpuset,
    memory: spec.memory,
    memory_swap: spec.memory_swap,
    linked_from_service: linkedFrom,
    linked_to_service: refs.linked_to_service,
    bindings: refs.bindings,
    autorestart: spec.autorestart,
    autodestroy: spec.autodestroy,
    roles: spec.roles,
    link_variables: linkVariablesOf(s.name, targetsOf(s.uuid)),
    privileged: spec.privileged,
    read_only: spec.read_only,
    deployment_strategy: spec.deployment_strategy,
    tags: spec.tags.map((name) => ({ name })),
    autoredeploy: spec.autoredeploy,
  };
}

/** The view of one container, from its row, its deployed definition and the page's data. */
export function containerView(c: ContainerRow, spec: ServiceSpec, data: ViewData): Container {
  const service = data.services.get(c.service_uuid);
  const node = data.nodes.get(c.node_uuid);
  const uri = containerUri(c);
  const reported = portsOf(c);
  const targetsOf = (uuid: string) => (data.services.has(uuid) ? (data.targets.get(uuid) ?? []) : []);
  // The links it follows now: its service's current ones, to the targets' live containers.
  const serviceSpec = service && c.state !== "Terminated" ? data.currentSpec(service) : undefined;
  const followed =
    service && serviceSpec
      ? followedLinks(
          serviceSpec,
          { serviceUuid: service.uuid, serviceName: service.name, number: c.number },
          targetsOf,
        )
      : [];
  const links = followed.slice(0, serviceSpec?.linked_to_service.length ?? 0);
  const refs = serviceUriFields(spec, {
    resourceUri: service ? serviceUri(service) : "",
    lookup: lookupIn(data, c.namespace),
  });
  return {
    uuid: c.uuid,
    resource_uri: uri,
    image_name: spec.image_name,
    name: c.name,
    public_dns: containerFqdn(c.name, c.namespace),
    state: c.state,
    synchronized: service ? synchronizedWith(c, () => spec, service, followed) : true,
    deployed_datetime: restTime(c.deployed_at),
    started_datetime: restTime(c.started_at),
    stopped_datetime: restTime(c.stopped_at),
    destroyed_datetime: restTime(c.destroyed_at),
    node: node ? nodeUri(node) : null,
    service: service ? serviceUri(service) : null,
    exit_code: c.exit_code,
    exit_code_msg: c.exit_code_msg,
    exit_code_message: c.exit_code_msg,
    private_ip: c.private_ip,
    container_ports: spec.container_ports.map((p) =>
      portView(p, {
        serviceName: service?.name ?? c.name,
        endpointHost: node?.external_fqdn,
        reportedOuterPort:
          c.state === "Terminated"
            ? undefined
            : reported.find((r) => r.inner_port === p.inner_port && r.protocol === p.protocol)?.outer_port,
      }),
    ),
    container_envvars: spec.container_envvars,
    // Exactly what its engine container was created with, as the engine reports it (none before).
    calculated_envvars: environmentOf(c) ?? [],
    ...definitionFields(spec),
    ...stopFields(spec),
    hostname: spec.hostname || c.name,
    cpu_shares: spec.cpu_shares,
    cpuset: spec.cpuset,
    memory: spec.memory,
    memory_swap: spec.memory_swap,
    autorestart: spec.autorestart,
    autodestroy: spec.autodestroy,
    roles: spec.roles,
    link_variables: containerLinkVariables(
      service?.name ?? c.name,
      // Looked up, not searched: a page of one service's many containers stays linear.
      service ? data.targetByUri.get(uri) : undefined,
    ),
    privileged: spec.privileged,
    read_only: spec.read_only,
    net: spec.net,
    pid: spec.pid,
    bindings: refs.bindings.map((b) => ({ volume: null, ...b })),
    linked_to_container: links.flatMap((l) => linkedToContainer(uri, l.alias, l.targets)),
  };
}

/**
 * Views already built, each under the key of the rows it was built from (see serviceKey), with
 * their JSON as text and bytes (domain/json.ts: a page's bytes join its views' own). A view is frozen once kept: it is
 * shared by every answer that shows it. Bounded by the characters of JSON kept, least recently used
 * first out.
 */
export class ViewFragments<T extends object> {
  private readonly entries = new Map<string, { key: string; view: T; chars: number }>();
  private chars = 0;

  constructor(private readonly maxChars: number) {}

  /** The view kept for `id` when it was built from the rows `key` names. */
  get(id: string, key: string): T | undefined {
    const e = this.entries.get(id);
    if (e?.key !== key) return undefined;
    // Most recently used last: the first entry is the one to drop.
    this.entries.delete(id);
    this.entries.set(id, e);
    return e.view;
  }

  /** Keeps `view` for `id` under `key` (frozen, its JSON noted, as text and bytes); answers it. */
  keep(id: string, key: string, view: T): T {
    const json = JSON.stringify(view);
    madeJson(deepFreeze(view), { text: json, bytes: Buffer.from(json) });
    this.drop(id);
    if (json.length > this.maxChars) return view;
    this.entries.set(id, { key, view, chars: json.length });
    this.chars += json.length;
    while (this.chars > this.maxChars) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.drop(oldest);
    }
    return view;
  }

  private drop(id: string): void {
    const e = this.entries.get(id);
    if (!e) return;
    this.chars -= e.chars;
    this.entries.delete(id);
  }
}

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

/** Characters of JSON of service views kept at most (ViewFragments; their bytes and objects are held too). */
const SERVICE_FRAGMENT_CHARS = 16 * 1024 * 1024;

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
    const versions = new Map<string, string>();
    for (const c of await store.services.containerVersions([...rows.map((s) => s.uuid), ...linked])) {
      versions.set(c.service_uuid, `${versions.get(c.service_uuid) ?? ""}${c.uuid}.${c.version},`);
      read?.add(c.namespace);
    }
    const incoming = new Map<string, IncomingLink[]>();
    for (const l of await store.services.linksTo(rows.map((s) => s.uuid))) addTo(incoming, l.to_uuid, l);
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
    if (missing.length === 0) return out as Service[];
    const missingDeps = rows
      .flatMap((_, i) => (out[i] === undefined ? deps[i]!.linked : []))
      .filter((uuid) => services.has(uuid));
    // The services they link to are read with them, in the same statement.
    const withContainers = [...new Set([...missing.map((s) => s.uuid), ...missingDeps])];
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
    return out as Service[];
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
