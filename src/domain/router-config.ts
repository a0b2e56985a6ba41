// What a namespace's routers serve (issue 30): a pure function from the namespace's services, their
// containers, the host names it holds and the containers being drained to the routes. One rule
// decides membership (`routable`): a container receives requests only while it runs, is wanted
// running, no operation is moving it, its health check (if any) says healthy, and it is not being
// drained before it leaves.
import {
  domainPort,
  isLoadBalancerImage,
  type ServiceDomain,
  type TlsMode,
  virtualHostDomains,
} from "./domains.ts";
import type { ContainerHealth } from "./health.ts";
import type { ServiceSpec } from "./service.ts";

/** Container health as the store keeps it (issue 29, domain/health.ts): null when the container has no check. */
export type RouteHealth = ContainerHealth | null;

export interface RouterService {
  uuid: string;
  namespace: string;
  name: string;
  state: string;
  created: number;
  spec: Pick<
    ServiceSpec,
    "image_name" | "container_ports" | "container_envvars" | "linked_to_service" | "domains"
  >;
}

export interface RouterContainer {
  uuid: string;
  service_uuid: string;
  name: string;
  state: string;
  desired: string;
  phase: string | null;
  private_ip: string;
  generation: string;
  health: RouteHealth;
  /** The node it runs on (an agent node's router reaches only its own node's containers). */
  node_uuid?: string;
}

export interface Upstream {
  container: string;
  name: string;
  /** `<private ip>:<port>`. */
  address: string;
  /** The node the container runs on ("" when not known). */
  node: string;
  /**
   * Kept routed while its record moved to a new generation (a start-first redeploy, or a rollout
   * paused after a failure, while it is paused; router/drains.ts).
   */
  held: boolean;
}

export interface Route {
  /** Stable id: service uuid, host and path. */
  id: string;
  namespace: string;
  service: string;
  service_name: string;
  host: string;
  path: string;
  port: number;
  tls: TlsMode;
  redirect_https: boolean;
  sticky: boolean;
  weight: number;
  /** Where the route comes from: the service's `domains`, or `VIRTUAL_HOST` under a load balancer. */
  source: "domains" | "virtual_host";
  upstreams: Upstream[];
}

export interface RoutesInput {
  services: readonly RouterService[];
  containers: readonly RouterContainer[];
  /** Host names and the namespace holding each (store/router.ts); a route's host must be its namespace's. */
  claims: ReadonlyMap<string, string>;
  /** `<container uuid>:<generation>` of engine containers being drained before they leave. */
  draining: ReadonlySet<string>;
  /**
   * Engine containers kept routed while their records move to a new generation (a start-first
   * redeploy: the old container serves until the new one is ready, then is drained); as their
   * records were when they were last routable.
   */
  held?: readonly RouterContainer[];
}

export interface RoutesOutput {
  routes: Route[];
  /** Routes left out, and why (a host held by another namespace, a path served twice). */
  problems: { service: string; host: string; problem: string }[];
}

/** Whether a container's health admits requests: no check, or a check that says healthy. */
export function healthAdmits(health: RouteHealth | undefined): boolean {
  return health === null || health === undefined || health === "healthy";
}

/** The one membership rule: whether a container receives requests now. */
export function routable(c: RouterContainer, draining: ReadonlySet<string>): boolean {
  return (
    c.state === "Running" &&
    c.desired === "running" &&
    c.phase === null &&
    c.private_ip !== "" &&
    healthAdmits(c.health) &&
    !draining.has(drainKey(c))
  );
}

export function drainKey(c: Pick<RouterContainer, "uuid" | "generation">): string {
  return `${c.uuid}:${c.generation}`;
}

/** The domains a service serves: its own, and its `VIRTUAL_HOST` ones when a load balancer links to it. */
export function domainsOf(
  s: RouterService,
  underLoadBalancer: boolean,
): { domain: ServiceDomain; source: Route["source"] }[] {
  const own = (s.spec.domains ?? []).map((domain) => ({ domain, source: "domains" as const }));
  if (!underLoadBalancer) return own;
  const vhosts = virtualHostDomains(s.spec.container_envvars, s.spec.container_ports).map((domain) => ({
    domain,
    source: "virtual_host" as const,
  }));
  return [...own, ...vhosts];
}

/** The services a live dockercloud/haproxy load balancer of their namespace links to. */
export function servicesUnderLoadBalancers(services: readonly RouterService[]): Set<string> {
  const under = new Set<string>();
  for (const s of services) {
    if (s.state === "Terminated" || !isLoadBalancerImage(s.spec.image_name)) continue;
    for (const l of s.spec.linked_to_service) under.add(l.to_service);
  }
  return under;
}

/**
 * The routes of some services: one per domain of each live service, its upstreams the routable
 * containers on the domain's port; a domain whose host another namespace holds, or whose host and
 * path an older service of the namespace serves already, is left out with the reason. Routes are
 * ordered as a router must match them: higher weight first, then exact hosts before wildcards, then
 * longer path prefixes first.
 */
export function buildRoutes(input: RoutesInput): RoutesOutput {
  const problems: RoutesOutput["problems"] = [];
  const byService = new Map<string, RouterContainer[]>();
  for (const c of input.containers) {
    const list = byService.get(c.service_uuid) ?? [];
    list.push(c);
    byService.set(c.service_uuid, list);
  }
  const held = new Map<string, RouterContainer[]>();
  for (const c of input.held ?? []) {
    if (input.draining.has(drainKey(c))) continue;
    held.set(c.service_uuid, [...(held.get(c.service_uuid) ?? []), c]);
  }
  const under = servicesUnderLoadBalancers(input.services);
  const taken = new Map<string, string>();
  const routes: Route[] = [];
  const live = [...input.services]
    .filter((s) => s.state !== "Terminated" && s.state !== "Terminating")
    .sort((a, b) => a.created - b.created || a.uuid.localeCompare(b.uuid));
  for (const s of live) {
    for (const { domain: d, source } of domainsOf(s, under.has(s.uuid))) {
      const holder = input.claims.get(d.host);
      if (holder !== s.namespace) {
        problems.push({
          service: s.uuid,
          host: d.host,
          problem:
            holder === undefined
              ? `${d.host} is not held by namespace ${s.namespace}`
              : `${d.host} belongs to another namespace`,
        });
        continue;
      }
      const key = `${d.host}${d.path}`;
      const first = taken.get(key);
      if (first !== undefined) {
        if (first !== s.uuid)
          problems.push({ service: s.uuid, host: d.host, problem: `${key} is served by another service` });
        continue;
      }
      taken.set(key, s.uuid);
      const port = domainPort(d, s.spec.container_ports);
      const serving = (byService.get(s.uuid) ?? []).filter((c) => routable(c, input.draining));
      const now = new Set(serving.map(drainKey));
      const upstreams = [...serving, ...(held.get(s.uuid) ?? []).filter((c) => !now.has(drainKey(c)))]
        .sort(
          (a, b) =>
            a.name.localeCompare(b.name, "en", { numeric: true }) || a.generation.localeCompare(b.generation),
        )
        .map((c) => ({
          container: c.uuid,
          name: c.name,
          address: `${c.private_ip}:${port}`,
          node: c.node_uuid ?? "",
          held: !now.has(drainKey(c)),
        }));
      routes.push({
        id: `${s.uuid}|${d.host}|${d.path}`,
        namespace: s.namespace,
        service: s.uuid,
        service_name: s.name,
        host: d.host,
        path: d.path,
        port,
        tls: d.tls,
        redirect_https: d.redirect_https && d.tls !== "off",
        sticky: d.sticky,
        weight: d.weight,
        source,
        upstreams,
      });
    }
  }
  routes.sort(
    (a, b) =>
      b.weight - a.weight ||
      Number(a.host.startsWith("*.")) - Number(b.host.startsWith("*.")) ||
      b.path.length - a.path.length ||
      a.host.localeCompare(b.host) ||
      a.path.localeCompare(b.path),
  );
  return { routes, problems };
}

/** Every host name a definition asks for (its domains and its `VIRTUAL_HOST` entries): each must be claimed. */
export function hostsOfDefinition(spec: RouterService["spec"]): string[] {
  const hosts = new Set<string>();
  for (const d of spec.domains ?? []) hosts.add(d.host);
  for (const d of virtualHostDomains(spec.container_envvars, spec.container_ports)) hosts.add(d.host);
  return [...hosts];
}

/** The route a request matches, as a router matches them: the routes' order, host (or wildcard), path prefix. */
export function matchRoute(routes: readonly Route[], host: string, path: string): Route | undefined {
  const h = host.toLowerCase().replace(/:\d+$/, "");
  return routes.find(
    (r) =>
      (r.host === h || (r.host.startsWith("*.") && h.endsWith(r.host.slice(1)))) &&
      (r.path === "/" || path === r.path || path.startsWith(`${r.path}/`)),
  );
}
