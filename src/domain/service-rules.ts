// The rules of a service definition shared by create and update (domain/service-spec.ts), past its
// schema: forms (names, paths, commands), references to other services through a small context
// (SpecContext), duplicates within a list, and rules across fields. Problems are collected, not
// thrown, so one 400 names every field. Pure functions.

import { isIP } from "node:net";
import type { BodyCheck } from "../contract/check.ts";
import { SERVICE_LIMITS as L } from "../contract/limits.ts";
import type {
  EnvVarBody,
  ServiceBindingBody,
  ServiceLinkBody,
  ServicePortBody,
  TagBody,
} from "../contract/service.ts";
import { ApiError, type FieldProblem, invalidField } from "./errors.ts";
import { type HealthCheck, normalizeHealthCheck } from "./health.ts";
import { envPrefix } from "./links.ts";
import { normalizeRollout, type RolloutStrategy } from "./rollout.ts";
import {
  DEFAULT_SPEC,
  type EnvVar,
  type Protocol,
  type ServiceBinding,
  type ServiceLink,
  type ServicePort,
  type ServiceSpec,
  withTag,
} from "./service.ts";
import { ShellSyntaxError, splitShellWords } from "./shell-words.ts";
import { STOP_SIGNAL_PROBLEM, stopSignalName } from "./stop.ts";

// ---------------------------------------------------------------------------------------------
// Context

export interface ResolvedService {
  uuid: string;
  /** The default link name is the target's name, so the resolver must give it. */
  name: string;
}

export interface SpecContext {
  /**
   * Resolves a reference from a body (`to_service`, `volumes_from`) to a service of the same
   * namespace: a resource URI, with or without its namespace segment; stacks also resolve the
   * names of services of the same stack. Undefined when there is no such service.
   */
  resolveService(ref: string): ResolvedService | undefined;
  /** The service being created or updated, when it already has a uuid: it may not refer to itself. */
  serviceUuid?: string;
}

// ---------------------------------------------------------------------------------------------
// Rules shared by create and update
//
// Types, enumerations, lengths and bounds are the schema's (contract/service.ts), checked by its
// one compiled check (contract/check.ts) before these functions see a body: what follows are the
// rules a schema cannot say — forms (names, paths, commands), references to other services,
// duplicates within a list, and rules across fields.

/**
 * Service names are lower-case DNS labels: they become host names (`web-1`), FQDN labels and the
 * prefix of link variables. At most 59 characters, so a container name with its `-<number>` suffix
 * (up to `-100`, the scale limit) still fits the 63 characters of a DNS label.
 */
export const NAME_RE = /^[a-z0-9]([a-z0-9-]{0,57}[a-z0-9])?$/;
export const NAME_MAX_LENGTH = L.nameMaxLength;
export const NAME_PROBLEM =
  "must be a lower-case DNS label of at most 59 characters (a-z, 0-9 and '-', not starting or ending with '-'): it names the containers' hosts (web-1) and prefixes link variables";
/** Link names become host names and variable prefixes (`DB_PORT`); Docker also allows `_`. */
const LINK_NAME_RE = /^[A-Za-z0-9]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?$/;
const ENV_KEY_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
const CPUSET_RE = /^\d+(-\d+)?(,\d+(-\d+)?)*$/;
export const CAPABILITY_RE = /^[A-Za-z_]+$/;
const MAC_RE = /^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$/;
export const HOST_NAME_RE =
  /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
const DEVICE_PERMISSIONS_RE = /^[rwm]{1,3}$/;
/** Docker refuses smaller memory limits (0 means none). */
const MIN_MEMORY_MB = 6;
export const MAX_CONTAINERS = 100;
export const ROLES = ["global"] as const;

/** Fields that only steer the platform (placement, redeploy triggers); containers never see them. */
export const SCHEDULING_FIELDS = [
  "tags",
  "autoredeploy",
  "deployment_strategy",
  "rollout",
] as const satisfies readonly (keyof ServiceSpec)[];

/** Collects problems, prefixing field names, and throws them as one 400. */
export class Problems {
  readonly list: FieldProblem[] = [];

  constructor(private readonly prefix: string) {}

  add(field: string, problem: string): void {
    this.list.push({ field: this.prefix + field, problem });
  }

  throwIfAny(): void {
    const [first, ...rest] = this.list;
    if (!first) return;
    if (rest.length === 0) throw invalidField(first.field, first.problem);
    const more = rest.length === 1 ? "1 more problem" : `${rest.length} more problems`;
    throw new ApiError(
      "bad_request",
      "invalid_field",
      `${first.field}: ${first.problem} (and ${more})`,
      this.list,
    );
  }
}

/** The schema's problems of a body that did not go through a route's validator (stack items). */
export function schemaProblems(check: BodyCheck<unknown>, body: unknown, fieldPrefix: string): void {
  const p = new Problems("");
  for (const { field, problem } of check.problems(body))
    p.add(field === "body" ? fieldPrefix.replace(/\.$/, "") || "body" : fieldPrefix + field, problem);
  p.throwIfAny();
}

export function image(p: Problems, value: string): string {
  if (/\s/.test(value) || value.trim() === "") {
    p.add("image", "must be an image name such as nginx or registry.example.com/team/app:1.2 (no spaces)");
    return "";
  }
  return withTag(value);
}

/** `run_command` and `entrypoint`: "" means unset (the image's), and the text must split. */
export function command(p: Problems, field: string, value: string | null | undefined): string | null {
  if (value === undefined || value === null || value.trim() === "") return null;
  try {
    splitShellWords(value);
  } catch (error) {
    p.add(field, error instanceof ShellSyntaxError ? error.message : "cannot be split into words");
  }
  return value;
}

export function ports(p: Problems, items: ServicePortBody[] | undefined): ServicePort[] {
  const out: ServicePort[] = [];
  const inner = new Map<string, number>();
  const outer = new Map<string, number>();
  (items ?? []).forEach((item, i) => {
    const f = `container_ports[${i}]`;
    const protocol = item.protocol as Protocol;
    // 0 and null both mean "no fixed port" (CONTRACT §12).
    const outerPort = item.outer_port || null;
    const published = item.published ?? false;
    if (!published && outerPort !== null) {
      p.add(
        `${f}.outer_port`,
        "is only used for a published port: set published to true or leave outer_port out",
      );
    }
    const key = `${item.inner_port}/${protocol}`;
    const seen = inner.get(key);
    if (seen !== undefined) p.add(`${f}.inner_port`, `${key} is already listed in container_ports[${seen}]`);
    else inner.set(key, i);
    if (published && outerPort !== null) {
      const outerKey = `${outerPort}/${protocol}`;
      const taken = outer.get(outerKey);
      if (taken !== undefined)
        p.add(`${f}.outer_port`, `${outerKey} is already published by container_ports[${taken}]`);
      else outer.set(outerKey, i);
    }
    out.push({ protocol, inner_port: item.inner_port, outer_port: outerPort, published });
  });
  return out;
}

export function envvars(p: Problems, items: EnvVarBody[] | undefined): EnvVar[] {
  const out: EnvVar[] = [];
  const seen = new Map<string, number>();
  (items ?? []).forEach(({ key, value }, i) => {
    const f = `container_envvars[${i}]`;
    if (!ENV_KEY_RE.test(key)) {
      p.add(`${f}.key`, "must be a variable name: letters, digits and _, not starting with a digit");
      return;
    }
    const first = seen.get(key);
    if (first !== undefined) {
      p.add(`${f}.key`, `${key} is already set by container_envvars[${first}]`);
      return;
    }
    seen.set(key, i);
    out.push({ key, value });
  });
  return out;
}

/** Resolves a service reference, naming the field when it does not resolve. */
function reference(p: Problems, field: string, ref: string, ctx: SpecContext): ResolvedService | undefined {
  const target = ref === "" ? undefined : ctx.resolveService(ref);
  if (!target) {
    p.add(field, "no such service in this namespace");
    return undefined;
  }
  if (ctx.serviceUuid !== undefined && target.uuid === ctx.serviceUuid) {
    p.add(field, "a service cannot refer to itself");
    return undefined;
  }
  return target;
}

export function links(p: Problems, items: ServiceLinkBody[] | undefined, ctx: SpecContext): ServiceLink[] {
  const out: ServiceLink[] = [];
  const prefixes = new Map<string, number>();
  (items ?? []).forEach((item, i) => {
    const f = `linked_to_service[${i}]`;
    const target = reference(p, `${f}.to_service`, item.to_service, ctx);
    if (!target) return;
    const name = item.name || target.name;
    if (!LINK_NAME_RE.test(name)) {
      p.add(
        `${f}.name`,
        "must be a host name of at most 63 characters: letters, digits, '-' and '_', starting and ending with a letter or digit",
      );
      return;
    }
    const prefix = envPrefix(name);
    const first = prefixes.get(prefix);
    if (first !== undefined) {
      // `db` and `DB`, or `my-db` and `my_db`, would set the same variables.
      p.add(`${f}.name`, `link name ${name} is already used by linked_to_service[${first}]`);
      return;
    }
    prefixes.set(prefix, i);
    out.push({ to_service: target.uuid, name });
  });
  return out;
}

export function bindings(
  p: Problems,
  items: ServiceBindingBody[] | undefined,
  ctx: SpecContext,
): ServiceBinding[] {
  const out: ServiceBinding[] = [];
  const mounted = new Map<string, number>();
  (items ?? []).forEach((item, i) => {
    const f = `bindings[${i}]`;
    // "" means unset (CONTRACT §12).
    const hostPath = item.host_path || null;
    const containerPath = item.container_path || null;
    const volumesFrom = item.volumes_from || null;
    const rewritable = item.rewritable ?? true;
    let ok = true;
    // Paths end up in Docker bind strings `host:container[:ro]`, so they may not hold ':'.
    for (const [name, path] of [
      ["host_path", hostPath],
      ["container_path", containerPath],
    ] as const) {
      if (path === null) continue;
      if (!path.startsWith("/") || path.includes(":")) {
        p.add(`${f}.${name}`, "must be an absolute path without ':'");
        ok = false;
      } else if (name === "container_path" && path.replace(/\/+$/, "") === "") {
        p.add(`${f}.container_path`, "cannot be / (the container's root)");
        ok = false;
      }
    }
    if (volumesFrom !== null) {
      if (hostPath !== null || containerPath !== null) {
        p.add(
          `${f}.volumes_from`,
          "mounts every volume of another service: give either volumes_from or container_path (with an optional host_path), not both",
        );
        return;
      }
      const target = reference(p, `${f}.volumes_from`, volumesFrom, ctx);
      if (!target) return;
      const key = `from:${target.uuid}`;
      const first = mounted.get(key);
      if (first !== undefined) {
        p.add(`${f}.volumes_from`, `that service's volumes are already mounted by bindings[${first}]`);
        return;
      }
      mounted.set(key, i);
      out.push({ host_path: null, container_path: null, rewritable, volumes_from: target.uuid });
      return;
    }
    if (containerPath === null) {
      p.add(`${f}.container_path`, "is required unless volumes_from is given");
      return;
    }
    if (!ok) return;
    const path = containerPath.replace(/(.)\/+$/, "$1");
    const first = mounted.get(path);
    if (first !== undefined) {
      p.add(`${f}.container_path`, `${path} is already mounted by bindings[${first}]`);
      return;
    }
    mounted.set(path, i);
    out.push({ host_path: hostPath, container_path: containerPath, rewritable, volumes_from: null });
  });
  return out;
}

export const unique = <T>(items: readonly T[]): T[] => [...new Set(items)];

export function tags(p: Problems, items: TagBody[] | undefined): string[] {
  const names = (items ?? []).map((tag, i) => {
    const name = typeof tag === "string" ? tag : tag.name;
    if (name.trim() === "") p.add(`tags[${i}]`, "must be a tag {name} with a name that is not blank");
    return name;
  });
  return unique(names.filter((n) => n.trim() !== ""));
}

export function workingDir(p: Problems, dir: string | undefined): string {
  if (dir === undefined || dir === "") return DEFAULT_SPEC.working_dir;
  if (!dir.startsWith("/")) p.add("working_dir", "must be an absolute path");
  return dir;
}

/** null, undefined and 0 mean "the engine's default" and are stored as null. */
export const resource = (value: number | null | undefined): number | null => value || null;

export function memory(p: Problems, value: number | null | undefined): number | null {
  const mb = resource(value);
  if (mb !== null && mb < MIN_MEMORY_MB) {
    p.add("memory", `must be at least ${MIN_MEMORY_MB} (MB), the engine's smallest limit`);
    return null;
  }
  return mb;
}

/** Each item passing `check`. */
export function strings(
  p: Problems,
  field: string,
  items: string[] | undefined,
  check: (s: string) => boolean,
  problem: string,
): string[] {
  const out: string[] = [];
  (items ?? []).forEach((item, i) => {
    if (!check(item)) p.add(`${field}[${i}]`, problem);
    else out.push(item);
  });
  return out;
}

/** `<host device>:<container device>[:<permissions>]` */
export function parseDevice(
  device: string,
): { pathOnHost: string; pathInContainer: string; cgroupPermissions?: string } | undefined {
  const parts = device.split(":");
  const [host, container, permissions] = parts;
  if (parts.length < 2 || parts.length > 3 || !host?.startsWith("/") || !container?.startsWith("/"))
    return undefined;
  if (permissions !== undefined && !DEVICE_PERMISSIONS_RE.test(permissions)) return undefined;
  return permissions === undefined
    ? { pathOnHost: host, pathInContainer: container }
    : { pathOnHost: host, pathInContainer: container, cgroupPermissions: permissions };
}

/** `<host name>:<ip>`; the address may be IPv6, so the split is at the first ':'. */
export function isExtraHost(entry: string): boolean {
  const colon = entry.indexOf(":");
  if (colon <= 0) return false;
  return HOST_NAME_RE.test(entry.slice(0, colon)) && isIP(entry.slice(colon + 1)) !== 0;
}

/** A field the spec's attribute list spells differently; both spellings must agree when both are sent. */
export function aliased<T>(
  p: Problems,
  value: T | undefined,
  alias: T | undefined,
  names: [string, string],
): T | undefined {
  if (alias === undefined) return value;
  if (value !== undefined && JSON.stringify(value) !== JSON.stringify(alias)) {
    p.add(names[1], `is another spelling of ${names[0]}, which has a different value: send one of them`);
  }
  return value ?? alias;
}

export function labels(p: Problems, value: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, v] of Object.entries(value ?? {})) {
    if (key === "") p.add("labels", "label names cannot be empty");
    else if (key.length > L.labelKeyMaxLength)
      p.add("labels", `label names must be at most ${L.labelKeyMaxLength} characters`);
    else if (key.startsWith("io.berth.")) {
      // Berth proves it owns an engine object by these labels; users may not forge them.
      p.add(`labels.${key}`, "the io.berth. prefix is reserved for the labels Berth sets");
    } else out[key] = v;
  }
  return out;
}

/** `stop_signal`: a signal name or number (domain/stop.ts), stored as its name; "" or null means unset. */
export function stopSignal(p: Problems, value: string | null | undefined): string | null {
  if (value === undefined || value === null || value.trim() === "") return null;
  const name = stopSignalName(value);
  if (name === undefined) p.add("stop_signal", STOP_SIGNAL_PROBLEM);
  return name ?? null;
}

/** `health_check` (domain/health.ts); null: the image's own check. */
export function healthCheck(
  p: Problems,
  value: Parameters<typeof normalizeHealthCheck>[0],
): HealthCheck | null {
  const problems: FieldProblem[] = [];
  const check = normalizeHealthCheck(value, "health_check", problems);
  for (const { field, problem } of problems) p.add(field, problem);
  return check;
}

/** `rollout` (domain/rollout.ts); null: redeploys replace every container at once. */
export function rollout(p: Problems, value: Parameters<typeof normalizeRollout>[0]): RolloutStrategy | null {
  const problems: FieldProblem[] = [];
  const out = normalizeRollout(value, "rollout", problems);
  for (const { field, problem } of problems) p.add(field, problem);
  return out;
}

/** Forms of single fields, checked on the resulting spec. */
export function formChecks(p: Problems, spec: ServiceSpec): void {
  if (spec.cpuset !== "" && !CPUSET_RE.test(spec.cpuset)) p.add("cpuset", "must list CPUs such as 0-2,4");
  if (spec.hostname !== "" && (!HOST_NAME_RE.test(spec.hostname) || spec.hostname.length > 63))
    p.add("hostname", "must be a host name of at most 63 characters (letters, digits, '-' and '.')");
  if (spec.domainname !== "" && !HOST_NAME_RE.test(spec.domainname))
    p.add("domainname", "must be a domain name (letters, digits, '-' and '.')");
  if (spec.mac_address !== "" && !MAC_RE.test(spec.mac_address))
    p.add("mac_address", "must be a MAC address such as 02:42:ac:11:00:02");
}

/** Rules between fields, checked on the resulting spec. `field` says whom to blame. */
export function crossChecks(
  p: Problems,
  spec: ServiceSpec,
  blame: (field: keyof ServiceSpec) => string,
): void {
  if (spec.memory_swap !== null && spec.memory_swap !== -1) {
    if (spec.memory === null) p.add(blame("memory_swap"), "needs memory (it counts memory plus swap)");
    else if (spec.memory_swap < spec.memory)
      p.add(blame("memory_swap"), `must be at least memory (${spec.memory}): it counts memory plus swap`);
  }
  if (spec.net === "host" && spec.mac_address !== "") {
    p.add(blame("mac_address"), "cannot be set when net is host (the node's own interfaces are used)");
  }
}
