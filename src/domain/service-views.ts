// The wire views of a service's references and ports (Berth's DNS names, resource URIs of linked
// and bound services, published ports with their URIs), from the stored ServiceSpec. Pure functions.

import type { Protocol, ServicePort, ServiceSpec } from "./service.ts";

/**
 * Berth's DNS names mirror the nodes' `<id>.<namespace>.node.berth.internal`: a service is
 * `<service>.<namespace>.svc.berth.internal` and a container `<container>.<namespace>.cont.berth.internal`
 * (container names are unique in a namespace because service names are). They are Berth's own
 * records, never outside DNS (CONTRACT §13).
 */
export const DNS_SUFFIX = "berth.internal";
export const serviceFqdn = (serviceName: string, namespace: string): string =>
  `${serviceName}.${namespace}.svc.${DNS_SUFFIX}`;
export const containerFqdn = (containerName: string, namespace: string): string =>
  `${containerName}.${namespace}.cont.${DNS_SUFFIX}`;

export interface ServiceRef {
  resource_uri: string;
  name: string;
}

/** The spec's Related service object. */
export interface RelatedService {
  name: string;
  from_service: string;
  to_service: string;
}

export interface ServiceBindingView {
  host_path: string | null;
  container_path: string | null;
  rewritable: boolean;
  volumes_from: string | null;
}

/**
 * The stored spec refers to services by uuid; the wire by resource URI (CONTRACT §4). References
 * whose target `lookup` no longer knows are left out rather than shown as a dangling URI.
 */
export function serviceUriFields(
  spec: ServiceSpec,
  options: { resourceUri: string; lookup: (uuid: string) => ServiceRef | undefined },
): { linked_to_service: RelatedService[]; bindings: ServiceBindingView[] } {
  const linked_to_service: RelatedService[] = [];
  for (const link of spec.linked_to_service) {
    const target = options.lookup(link.to_service);
    if (target)
      linked_to_service.push({
        name: link.name,
        from_service: options.resourceUri,
        to_service: target.resource_uri,
      });
  }
  const bindings: ServiceBindingView[] = [];
  for (const b of spec.bindings) {
    if (b.volumes_from === null) {
      bindings.push({
        host_path: b.host_path,
        container_path: b.container_path,
        rewritable: b.rewritable,
        volumes_from: null,
      });
      continue;
    }
    const source = options.lookup(b.volumes_from);
    if (source)
      bindings.push({
        host_path: null,
        container_path: null,
        rewritable: b.rewritable,
        volumes_from: source.resource_uri,
      });
  }
  return { linked_to_service, bindings };
}

/** A service's `linked_from_service`: the links of other services that point at it. */
export function linkedFromService(options: {
  serviceUuid: string;
  resourceUri: string;
  others: { resource_uri: string; spec: ServiceSpec }[];
}): RelatedService[] {
  const out: RelatedService[] = [];
  for (const other of options.others) {
    for (const link of other.spec.linked_to_service) {
      if (link.to_service === options.serviceUuid)
        out.push({ name: link.name, from_service: other.resource_uri, to_service: options.resourceUri });
    }
  }
  return out;
}

/**
 * Ports whose endpoint is shown as http(s) (CONTRACT §10): the well-known web ports and the usual
 * development servers (Rails/Node 3000, Flask 5000, Django 8000, 8008/8080/8888 proxies and notebooks).
 */
export const HTTP_PORTS: readonly number[] = [80, 3000, 5000, 8000, 8008, 8080, 8888];
export const HTTPS_PORTS: readonly number[] = [443, 8443];

export type UriProtocol = "http" | "https" | "tcp" | "udp";

/** Decided by the inner port: that is the port the application speaks on. */
export function uriProtocol(port: { inner_port: number; protocol: Protocol }): UriProtocol {
  if (port.protocol === "udp") return "udp";
  if (HTTP_PORTS.includes(port.inner_port)) return "http";
  if (HTTPS_PORTS.includes(port.inner_port)) return "https";
  return "tcp";
}

export interface PortView {
  protocol: Protocol;
  inner_port: number;
  outer_port: number | null;
  port_name: string;
  endpoint_uri: string | null;
  published: boolean;
  /** The container view's extra field; a service view may leave it out. */
  uri_protocol: UriProtocol;
}

/**
 * A port as the wire shows it. `endpointHost` is the node's FQDN for a container (the service's
 * public DNS for a service); `reportedOuterPort` is the host port the engine reports, which
 * matters when the port was published without a fixed `outer_port`. Unpublished ports, and
 * published ones whose host port is not known yet, have no endpoint.
 */
export function portView(
  port: ServicePort,
  options: { serviceName: string; endpointHost: string | null | undefined; reportedOuterPort?: number },
): PortView {
  const scheme = uriProtocol(port);
  const outer = port.published ? (options.reportedOuterPort ?? port.outer_port) : null;
  let endpoint: string | null = null;
  if (outer !== null && options.endpointHost) {
    endpoint =
      scheme === "http" || scheme === "https"
        ? `${scheme}://${options.endpointHost}:${outer}/`
        : `${scheme}://${options.endpointHost}:${outer}`;
  }
  return {
    protocol: port.protocol,
    inner_port: port.inner_port,
    outer_port: outer,
    port_name: options.serviceName,
    endpoint_uri: endpoint,
    published: port.published,
    uri_protocol: scheme,
  };
}
