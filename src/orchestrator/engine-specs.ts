// The engine spec of a container: what the runtime asks an engine to create, built from the
// container's deployed definition, its service, its node, the live containers of the services it
// links to (orchestrator/links.ts) and the namespace's nodes. It reads the store and depends on no
// other component, so the runtime takes it at construction (no late binding in platform.ts).
//
// The specs of a burst of containers (a batch of starts, a redeploy) share their reads: what the
// specs asked for during one turn of the event loop is read once when the turn ends (TurnReads), so
// a service's containers are read once per burst, not once per container linking to it.
import {
  buildContainerSpec,
  type LinkTargets,
  linkHosts,
  volumesFromRefs,
} from "../domain/container-spec.ts";
import type { LinkTarget } from "../domain/links.ts";
import type { ServiceSpec } from "../domain/service.ts";
import { containerUri, nodeUri, serviceUri } from "../domain/uri.ts";
import type { ContainerSpec } from "../drivers/engine.ts";
import type { NamespacePolicies } from "../identity/privileges.ts";
import type { SecretBox } from "../identity/secret-box.ts";
import { decodeSpec } from "../store/codec.ts";
import type { NodeRow } from "../store/nodes.ts";
import type { ContainerRow, ServiceRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import { TurnReads } from "../store/turn-reads.ts";
import { followedLinks, linkedServices, linkTargetOf, TARGET_STATES } from "./links.ts";

export interface EngineSpecDeps {
  store: Store;
  box: SecretBox;
  publicUrl: string;
  /**
   * The namespace's privileges, checked against every engine spec before its container is made:
   * a definition written before a policy, or under a policy later narrowed, never yields a
   * container that reaches its node.
   */
  policies: NamespacePolicies;
}

/** An engine spec that asks for more than its namespace is allowed now: the container is not created. */
export class PrivilegeRefused extends Error {
  override readonly name = "PrivilegeRefused";
}

/** The REST and stream hosts injected into containers (PLATFORM_REST_HOST, PLATFORM_STREAM_HOST). */
export function platformHosts(publicUrl: string): { restHost: string; streamHost: string } {
  return { restHost: publicUrl, streamHost: publicUrl.replace(/^http/, "ws") };
}

/**
 * The definition a row holds. The last one parsed is kept: a burst of containers deployed with one
 * definition (a service's) parses it once, not once per container. buildContainerSpec copies
 * what it takes from it, so sharing it is safe.
 */
let lastSpec: { json: string; spec: ServiceSpec } | undefined;
const cachedSpecOf = (row: Pick<ServiceRow, "spec"> | Pick<ContainerRow, "spec">): ServiceSpec => {
  if (lastSpec?.json !== row.spec) lastSpec = { json: row.spec, spec: decodeSpec(row.spec) };
  return lastSpec.spec;
};

/** A service's live containers, and those of them that are link targets. */
interface Containers {
  live: ContainerRow[];
  targets: LinkTarget[];
}

/** How long a namespace's node hosts are reused without a node change being announced. */
const NODE_HOSTS_TTL_MS = 5000;

export class EngineSpecs {
  /** Hosts entries of each namespace's nodes (every container gets them): read once per burst. */
  private readonly nodeHosts = new Map<string, { hosts: Promise<readonly string[]>; until: number }>();
  /** Live containers of services (links, volumes_from), by service. */
  private readonly containers = new TurnReads<string, Containers>(async (uuids) => {
    const out = new Map<string, Containers>(uuids.map((u) => [u, { live: [], targets: [] }]));
    const specs = new Map<string, ServiceSpec>();
    for (const c of await this.store.services.containersOfServices(uuids)) {
      const of = out.get(c.service_uuid)!;
      of.live.push(c);
      if ((TARGET_STATES as readonly string[]).includes(c.state)) of.targets.push(linkTargetOf(c, specs));
    }
    return out;
  });
  private readonly services = new TurnReads<string, ServiceRow>(async (uuids) => {
    return new Map((await this.store.services.servicesByUuid(uuids)).map((s) => [s.uuid, s]));
  });
  private readonly nodes = new TurnReads<string, NodeRow>(async (uuids) => {
    return this.store.nodes.knownNodes(uuids);
  });

  constructor(private readonly d: EngineSpecDeps) {
    d.store.onChange((type) => {
      if (type === "node" || type === "") this.nodeHosts.clear();
    });
  }

  private get store() {
    return this.d.store;
  }

  /**
   * `<fqdn>:<address>` of every live node of the namespace that has an address. The specs of a
   * burst of containers built at once share one read (the first caller's), not one each.
   */
  private nodeHostsOf(namespace: string): Promise<readonly string[]> {
    const now = performance.now();
    const hit = this.nodeHosts.get(namespace);
    if (hit && hit.until > now) return hit.hosts;
    const hosts = this.store.nodes
      .liveNodeSummaries(namespace)
      .then((nodes) =>
        Object.freeze(
          nodes.filter((n) => n.public_ip && n.external_fqdn).map((n) => `${n.external_fqdn}:${n.public_ip}`),
        ),
      );
    const entry = { hosts, until: now + NODE_HOSTS_TTL_MS };
    this.nodeHosts.set(namespace, entry);
    // A failed read is not kept: the next spec reads again.
    hosts.catch(() => {
      if (this.nodeHosts.get(namespace) === entry) this.nodeHosts.delete(namespace);
    });
    return hosts;
  }

  /**
   * The links a container follows now (orchestrator/links.ts), from `spec`'s links: its deployed
   * definition's when its engine container is made, its service's current one otherwise.
   */
  private async links(c: ContainerRow, spec: ServiceSpec, service: ServiceRow): Promise<LinkTargets[]> {
    const uuids = linkedServices(spec, service.uuid);
    const targets = new Map<string, LinkTarget[]>();
    for (const [i, found] of (await Promise.all(uuids.map((u) => this.containers.get(u)))).entries()) {
      targets.set(uuids[i]!, found?.targets ?? []);
    }
    return followedLinks(
      spec,
      { serviceUuid: service.uuid, serviceName: service.name, number: c.number },
      (u) => targets.get(u) ?? [],
    );
  }

  /**
   * The link host entries (`host:ip`) a container's /etc/hosts should hold now (its service's
   * current links); undefined for a container whose service is gone.
   */
  async desiredLinkHosts(c: ContainerRow): Promise<string[] | undefined> {
    const service = await this.services.get(c.service_uuid);
    if (!service || service.state === "Terminated") return undefined;
    return linkHosts(await this.links(c, cachedSpecOf(service), service));
  }

  /** `service` and `node`: the container's, when the caller has read them already (a batch). */
  async specFor(
    c: ContainerRow,
    opts: { volumesFrom: string[]; service?: ServiceRow; node?: NodeRow },
  ): Promise<ContainerSpec> {
    const [service, node] = await Promise.all([
      opts.service ?? this.services.get(c.service_uuid),
      opts.node ?? this.nodes.get(c.node_uuid),
    ]);
    if (!service) throw new Error(`the service of container ${c.name} is gone`);
    if (!node) throw new Error(`the node of container ${c.name} is gone`);
    const spec = cachedSpecOf(c);
    const sourceIds = new Map<string, string[]>();
    for (const b of spec.bindings) {
      if (!b.volumes_from) continue;
      const ids = ((await this.containers.get(b.volumes_from))?.live ?? [])
        .filter((x) => x.engine_id && x.node_uuid === c.node_uuid)
        .map((x) => x.engine_id!);
      sourceIds.set(b.volumes_from, ids);
    }
    const engineSpec = buildContainerSpec({
      spec,
      service: {
        uuid: service.uuid,
        name: service.name,
        resource_uri: serviceUri(service),
        namespace: service.namespace,
      },
      container: { uuid: c.uuid, name: c.name, number: c.number, resource_uri: containerUri(c) },
      node: {
        uuid: node.uuid,
        resource_uri: nodeUri(node),
        external_fqdn: node.external_fqdn,
      },
      links: await this.links(c, spec, service),
      volumesFrom: [...volumesFromRefs(spec, (u) => sourceIds.get(u) ?? []), ...opts.volumesFrom],
      platform: {
        ...platformHosts(this.d.publicUrl),
        auth: service.auth_secret ? this.d.box.open(service.auth_secret) : undefined,
      },
    });
    // Node FQDNs resolve through Berth's own records, never outside DNS (CONTRACT §13): every
    // container gets a hosts entry for each node of its namespace that has an address.
    // A container without hosts of its own shares the namespace's list (one entry per node: a
    // copy per container would cost in proportion to the nodes); engines only read it.
    const refused = await this.d.policies.engineSpecProblems(service.namespace, engineSpec);
    if (refused.length) {
      throw new PrivilegeRefused(
        `container ${c.name} was not created: ${refused.map((p) => `${p.field}: ${p.problem}`).join("; ")}`,
      );
    }
    const nodeHosts = await this.nodeHostsOf(service.namespace);
    engineSpec.extraHosts = engineSpec.extraHosts?.length
      ? [...engineSpec.extraHosts, ...nodeHosts]
      : (nodeHosts as string[]);
    return engineSpec;
  }
}
