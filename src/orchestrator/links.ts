// How links follow running containers (what the HAProxy load balancer relies on): a container
// follows its service's current links (not the definition it was deployed with) to the targets'
// live containers, and with sequential_deployment its own service's earlier containers. Views,
// engine specs, the reconciler's host-entry check and the change feed all read links from here.
import type { LinkTargets } from "../domain/container-spec.ts";
import type { LinkTarget } from "../domain/links.ts";

export { offeredAddress, TARGET_STATES } from "../domain/links.ts";

import type { ServiceSpec } from "../domain/service.ts";
import { containerUri } from "../domain/uri.ts";
import { decodeSpec } from "../store/codec.ts";
import type { ContainerRow } from "../store/services.ts";

/** The key of a container's deployed definition among those of a page: service and version. */
export const deployedKey = (c: Pick<ContainerRow, "service_uuid" | "spec_version">) =>
  `${c.service_uuid}/${c.spec_version}`;

/** A container's target ports and variables, made once per definition (shared by its targets). */
const targetParts = new WeakMap<ServiceSpec, Pick<LinkTarget, "ports" | "envvars">>();

/**
 * A container as a link target. Ports and variables are its own (the definition it was deployed
 * with), as a Docker link reads them from the target container: a target whose definition changed
 * offers the new ones once it is redeployed. `specs` caches parsed definitions by service and
 * version (deployedKey); a record read without its definition needs its version's there.
 */
export function linkTargetOf(
  c: Pick<ContainerRow, "uuid" | "namespace" | "service_uuid" | "name" | "private_ip" | "spec_version"> & {
    spec?: string;
  },
  specs?: Map<string, ServiceSpec>,
): LinkTarget {
  const key = deployedKey(c);
  let spec = specs?.get(key);
  if (!spec) {
    if (c.spec === undefined)
      throw new Error(`the definition of ${c.name} (version ${c.spec_version}) was not read`);
    spec = decodeSpec(c.spec);
    specs?.set(key, spec);
  }
  let parts = targetParts.get(spec);
  if (!parts) {
    parts = {
      ports: spec.container_ports.map((p) => ({ inner_port: p.inner_port, protocol: p.protocol })),
      envvars: spec.container_envvars,
    };
    targetParts.set(spec, parts);
  }
  return { name: c.name, resource_uri: containerUri(c), private_ip: c.private_ip || null, ...parts };
}

/** A container as a link target for host entries only (its name and address). */
export function hostTargetOf(c: Pick<ContainerRow, "name" | "private_ip">): LinkTarget {
  return { name: c.name, resource_uri: "", private_ip: c.private_ip || null, ports: [], envvars: [] };
}

/** The services whose containers a container of this definition links to (its own with sequential_deployment). */
export function linkedServices(spec: ServiceSpec, serviceUuid: string): string[] {
  const out = spec.linked_to_service.map((l) => l.to_service);
  if (spec.sequential_deployment) out.push(serviceUuid);
  return out;
}

/**
 * The links a container follows: each of the definition's links to its target's live containers,
 * then (sequential_deployment) the service's containers numbered before it, under the service's name.
 */
export function followedLinks(
  spec: ServiceSpec,
  client: { serviceUuid: string; serviceName: string; number: number },
  targetsOf: (serviceUuid: string) => readonly LinkTarget[],
): LinkTargets[] {
  const out: LinkTargets[] = spec.linked_to_service.map((l) => ({
    alias: l.name,
    targets: [...targetsOf(l.to_service)],
  }));
  if (spec.sequential_deployment) {
    const earlier = targetsOf(client.serviceUuid).filter(
      (t) => Number(t.name.split("-").at(-1)) < client.number,
    );
    if (earlier.length) out.push({ alias: client.serviceName, targets: earlier });
  }
  return out;
}

/** Whether two lists hold the same entries, in any order. */
export function sameEntries(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && [...a].sort().join("\n") === [...b].sort().join("\n");
}
