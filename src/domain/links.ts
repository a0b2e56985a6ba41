// Docker-link-style variables and host entries (CONTRACT §10). Berth does not use the engine's
// legacy links (they cannot cross nodes); it computes what a link would have given from the
// target service's live containers and hands it to the client container as environment and
// /etc/hosts entries. Pure functions.
//
// For a link named `db` to containers `postgres-1` (10.0.0.2) and `postgres-2` (10.0.0.3), both
// exposing 5432/tcp, a client container `web-1` gets:
//
//   DB_PORT=tcp://10.0.0.2:5432                 the first target's lowest port (Docker's rule)
//   DB_PORT_5432_TCP=tcp://10.0.0.2:5432        and _ADDR, _PORT, _PROTO
//   DB_NAME=/web-1/db                           Docker's /<client>/<alias>
//   DB_ENV_<KEY>=…                              the first target's user variables
//   DB_1_PORT, DB_1_PORT_5432_TCP…, DB_1_NAME=/web-1/db_1, DB_1_ENV_<KEY>   per container
//   DB_2_…                                      numbered by the container name's suffix
//
// and the host names db (the first target), postgres-1 and postgres-2.
import type { Protocol } from "./service.ts";

/** A container counts as a link target while it runs or starts. */
export const TARGET_STATES = ["Running", "Starting"] as const;

/** The address a container offers its link clients ("" when it offers none). */
export function offeredAddress(c: { state: string; private_ip: string }): string {
  return (TARGET_STATES as readonly string[]).includes(c.state) ? c.private_ip : "";
}

export interface LinkTarget {
  /** The container's name, `postgres-2`; its number suffix numbers the per-container variables. */
  name: string;
  resource_uri: string;
  /** Targets without an address (not running) give no variables and no host entry. */
  private_ip: string | null | undefined;
  /** The ports the target exposes. */
  ports: { inner_port: number; protocol: Protocol }[];
  /** The target's user variables (its service's container_envvars). */
  envvars: { key: string; value: string }[];
}

/** A container's `linked_to_container` item. */
export interface ContainerLink {
  name: string;
  from_container: string;
  to_container: string;
  /** `"5432/tcp"` → `"tcp://10.0.0.2:5432"` */
  endpoints: Record<string, string>;
}

/** `my-db` → `MY_DB`: upper case, anything but letters and digits becomes `_`. */
export function envPrefix(alias: string): string {
  return alias.toUpperCase().replace(/[^A-Z0-9]/g, "_");
}

/** `postgres-2` → 2; a name without a number suffix takes its position instead. */
function numberOf(name: string, position: number): number {
  const match = /-(\d+)$/.exec(name);
  return match ? Number(match[1]) : position + 1;
}

interface Numbered {
  target: LinkTarget & { private_ip: string };
  number: number;
}

/** Reachable targets in container-number order, so "the first" is stable across calls. */
function reachable(targets: readonly LinkTarget[]): Numbered[] {
  return targets
    .map((target, i) => ({ target, number: numberOf(target.name, i) }))
    .filter((t): t is Numbered => typeof t.target.private_ip === "string" && t.target.private_ip !== "")
    .sort((a, b) => a.number - b.number);
}

/** sortedPorts of a list of ports: the targets of one definition share theirs (never changed). */
const sorted = new WeakMap<LinkTarget["ports"], LinkTarget["ports"]>();

/** Docker's order: by port number, tcp before udp on a tie. Duplicates are dropped. */
function sortedPorts(ports: LinkTarget["ports"]): LinkTarget["ports"] {
  let out = sorted.get(ports);
  if (!out) {
    out = sortPorts(ports);
    sorted.set(ports, out);
  }
  return out;
}

function sortPorts(ports: LinkTarget["ports"]): LinkTarget["ports"] {
  const seen = new Set<string>();
  return [...ports]
    .sort((a, b) => a.inner_port - b.inner_port || (a.protocol === "tcp" ? -1 : b.protocol === "tcp" ? 1 : 0))
    .filter((p) => {
      const key = `${p.inner_port}/${p.protocol}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
}

/** The variables one link alias gives for one container, as Docker's `--link` would. */
function variablesFor(
  prefix: string,
  target: Numbered["target"],
  name: string | undefined,
  out: Record<string, string>,
): void {
  const ip = target.private_ip;
  const ports = sortedPorts(target.ports);
  const first = ports[0];
  if (first) out[`${prefix}_PORT`] = `${first.protocol}://${ip}:${first.inner_port}`;
  for (const port of ports) {
    const base = `${prefix}_PORT_${port.inner_port}_${port.protocol.toUpperCase()}`;
    out[base] = `${port.protocol}://${ip}:${port.inner_port}`;
    out[`${base}_ADDR`] = ip;
    out[`${base}_PORT`] = String(port.inner_port);
    out[`${base}_PROTO`] = port.protocol;
  }
  if (name !== undefined) out[`${prefix}_NAME`] = name;
  for (const { key, value } of target.envvars) out[`${prefix}_ENV_${key}`] = value;
}

/**
 * The variables a link named `alias` gives a client container. `clientName` (the client container's
 * name) adds Docker's `<ALIAS>_NAME=/<client>/<alias>`; without it there are no NAME variables.
 */
export function linkVariables(
  alias: string,
  targets: readonly LinkTarget[],
  options: { clientName?: string } = {},
): Record<string, string> {
  const prefix = envPrefix(alias);
  const ordered = reachable(targets);
  const out: Record<string, string> = {};
  const nameOf = (linkName: string) =>
    options.clientName === undefined ? undefined : `/${options.clientName}/${linkName}`;
  const first = ordered[0];
  if (first) variablesFor(prefix, first.target, nameOf(alias), out);
  for (const { target, number } of ordered) {
    variablesFor(`${prefix}_${number}`, target, nameOf(`${alias}_${number}`), out);
  }
  return out;
}

/**
 * A service's `link_variables` field: what a client linking it under its own name gets (there is
 * no client, so no NAME variables).
 */
export function linkVariablesOf(
  serviceName: string,
  containers: readonly LinkTarget[],
): Record<string, string> {
  return linkVariables(serviceName, containers);
}

/**
 * A container's `link_variables` field: the service's, applied to the single container (spec
 * "Containers"): what it gives a client as `<SERVICE>_<n>_…`. Nothing while it has no address.
 */
export function containerLinkVariables(
  serviceName: string,
  self: LinkTarget | undefined,
): Record<string, string> {
  const out: Record<string, string> = {};
  const [own] = self ? reachable([self]) : [];
  if (own) variablesFor(`${envPrefix(serviceName)}_${own.number}`, own.target, undefined, out);
  return out;
}

/**
 * A client container's `linked_to_container` items for one link: one per reachable target,
 * named like its variables' prefix (`DB_1`), with the address of every exposed port.
 */
export function linkedToContainer(
  fromContainerUri: string,
  alias: string,
  targets: readonly LinkTarget[],
): ContainerLink[] {
  const prefix = envPrefix(alias);
  return reachable(targets).map(({ target, number }) => {
    const endpoints: Record<string, string> = {};
    for (const port of sortedPorts(target.ports)) {
      endpoints[`${port.inner_port}/${port.protocol}`] =
        `${port.protocol}://${target.private_ip}:${port.inner_port}`;
    }
    return {
      name: `${prefix}_${number}`,
      from_container: fromContainerUri,
      to_container: target.resource_uri,
      endpoints,
    };
  });
}

/**
 * `/etc/hosts` entries (`host:ip`, the engine's extra-hosts form) for one link: the alias resolves
 * to the first reachable target, each container name to its own address.
 */
export function hostsFor(alias: string, targets: readonly LinkTarget[]): string[] {
  const ordered = reachable(targets);
  const first = ordered[0];
  if (!first) return [];
  const entries = [`${alias}:${first.target.private_ip}`];
  for (const { target } of ordered) {
    if (target.name !== alias) entries.push(`${target.name}:${target.private_ip}`);
  }
  return entries;
}
