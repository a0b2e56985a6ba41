// The wire views of services and containers (spec "Service", "Container"; schemas in
// src/contract/): pure functions from rows and a page's ViewData (view-data.ts) to views.

import type { Container } from "../contract/container.ts";
import type { Service } from "../contract/service.ts";
import {
  calculatedEnvvars,
  type LinkTargets,
  linkEnvironmentCurrent,
  linkHosts,
} from "../domain/container-spec.ts";
import { healthView, serviceHealth } from "../domain/health.ts";
import { containerLinkVariables, linkedToContainer, linkVariablesOf } from "../domain/links.ts";
import type { ServiceSpec } from "../domain/service.ts";
import { containerFqdn, portView, serviceFqdn, serviceUriFields } from "../domain/service-views.ts";
import { restTime } from "../domain/time.ts";
import { containerUri, nodeUri, serviceUri, stackUri } from "../domain/uri.ts";
import { domainViews } from "../router/domain-views.ts";
import { environmentOf, linkHostsOf, portsOf } from "../store/codec.ts";
import type { ContainerRow, ServiceRow, ViewedContainer } from "../store/services.ts";
import type { platformHosts } from "./engine-specs.ts";
import { followedLinks, sameEntries } from "./links.ts";
import type { ViewData } from "./view-data.ts";

export type PlatformHosts = ReturnType<typeof platformHosts>;

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
export function definitionFields(spec: ServiceSpec) {
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
export function stopFields(spec: ServiceSpec) {
  return {
    stop_signal: spec.stop_signal ?? null,
    stop_grace_period: spec.stop_grace_period ?? null,
    // Its health check (domain/health.ts); null in definitions stored before, or without one.
    health_check: spec.health_check ?? null,
  };
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
    health: serviceHealth(liveOnes),
    restart_count: liveOnes.reduce((n, c) => n + c.restart_count, 0),
    rollout: spec.rollout ?? null,
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
    domains: domainViews(spec),
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
    health: healthView(c.health),
    restart_count: c.restart_count,
    health_output: c.health === null ? null : (c.health_output ?? null),
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
