// Service definitions: from a Create or Update body to the stored ServiceSpec, and from the
// stored spec back to the wire views of its references and ports. Pure functions: whatever needs
// the store (does this service URI exist?) comes in through a small context.
//
// A body's types, enumerations, lengths and bounds are its schema's (contract/service.ts), held by
// one compiled check (contract/check.ts): the route's validator for /service/, `parseCreate` and
// `parseUpdate` for stack items. The rules here collect every remaining problem of a body and
// throw one 400 (`code: invalid_field`) whose `details` name each field, so a client fixes a body
// in one round trip. Field names carry `fieldPrefix`, so stacks report
// `services.web.container_ports[0].inner_port`.
import { isIP } from "node:net";
import { type BodyCheck, serviceCreateCheck, serviceUpdateCheck } from "../contract/check.ts";
import { SERVICE_LIMITS as L } from "../contract/limits.ts";
import type {
  EnvVarBody,
  ServiceBindingBody,
  ServiceCreateBody,
  ServiceField,
  ServiceLinkBody,
  ServicePortBody,
  ServiceUpdateBody,
  TagBody,
} from "../contract/service.ts";
import { ApiError, type FieldProblem, invalidField } from "./errors.ts";
import { envPrefix } from "./links.ts";
import {
  DEFAULT_SPEC,
  type EnvVar,
  nameFromImage,
  type Protocol,
  type ServiceBinding,
  type ServiceLink,
  type ServicePort,
  type ServiceSpec,
  withTag,
} from "./service.ts";
import { STOP_SIGNAL_PROBLEM, stopSignalName } from "./stop.ts";

/**
 * Fields of the definition that the stored spec (ServiceSpec) spells otherwise; the others keep
 * their name there, and `name` is the service's, not its spec's.
 */
const SPEC_SPELLINGS = {
  image: "image_name",
  cgroup_name: "cgroup_parent",
  secuirty_opt: "security_opt",
} as const satisfies Partial<Record<ServiceField, keyof ServiceSpec>>;

/** The ServiceSpec field a field of Create service sets, or undefined (`name`, an unknown key). */
export function specFieldOf(field: string): keyof ServiceSpec | undefined {
  const spelled: string | undefined = (SPEC_SPELLINGS as Record<string, string>)[field];
  if (spelled !== undefined) return spelled as keyof ServiceSpec;
  return Object.hasOwn(DEFAULT_SPEC, field) ? (field as keyof ServiceSpec) : undefined;
}

// ---------------------------------------------------------------------------------------------
// Context and results

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

export interface NormalizedService {
  name: string;
  nickname: string;
  /**
   * 1 by default. EVERY_NODE services run one container per node, so the body's value is ignored
   * and this is 0: the caller sets it from the eligible nodes when it deploys.
   */
  target_num_containers: number;
  spec: ServiceSpec;
}

export interface UpdatedService {
  spec: ServiceSpec;
  /** Present when the body set it ("" falls back to the service name). */
  nickname?: string;
  /** Present when the body set it. */
  target_num_containers?: number;
  /** The definition changed in a way containers see: they are no longer synchronized. */
  changed: boolean;
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
const NAME_RE = /^[a-z0-9]([a-z0-9-]{0,57}[a-z0-9])?$/;
export const NAME_MAX_LENGTH = L.nameMaxLength;
const NAME_PROBLEM =
  "must be a lower-case DNS label of at most 59 characters (a-z, 0-9 and '-', not starting or ending with '-'): it names the containers' hosts (web-1) and prefixes link variables";
/** Link names become host names and variable prefixes (`DB_PORT`); Docker also allows `_`. */
const LINK_NAME_RE = /^[A-Za-z0-9]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?$/;
const ENV_KEY_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
const CPUSET_RE = /^\d+(-\d+)?(,\d+(-\d+)?)*$/;
const CAPABILITY_RE = /^[A-Za-z_]+$/;
const MAC_RE = /^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$/;
const HOST_NAME_RE =
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
] as const satisfies readonly (keyof ServiceSpec)[];

/** Collects problems, prefixing field names, and throws them as one 400. */
class Problems {
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
function schemaProblems(check: BodyCheck<unknown>, body: unknown, fieldPrefix: string): void {
  const p = new Problems("");
  for (const { field, problem } of check.problems(body))
    p.add(field === "body" ? fieldPrefix.replace(/\.$/, "") || "body" : fieldPrefix + field, problem);
  p.throwIfAny();
}

function image(p: Problems, value: string): string {
  if (/\s/.test(value) || value.trim() === "") {
    p.add("image", "must be an image name such as nginx or registry.example.com/team/app:1.2 (no spaces)");
    return "";
  }
  return withTag(value);
}

/** `run_command` and `entrypoint`: "" means unset (the image's), and the text must split. */
function command(p: Problems, field: string, value: string | null | undefined): string | null {
  if (value === undefined || value === null || value.trim() === "") return null;
  try {
    splitShellWords(value);
  } catch (error) {
    p.add(field, error instanceof ShellSyntaxError ? error.message : "cannot be split into words");
  }
  return value;
}

function ports(p: Problems, items: ServicePortBody[] | undefined): ServicePort[] {
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

function envvars(p: Problems, items: EnvVarBody[] | undefined): EnvVar[] {
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

function links(p: Problems, items: ServiceLinkBody[] | undefined, ctx: SpecContext): ServiceLink[] {
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

function bindings(p: Problems, items: ServiceBindingBody[] | undefined, ctx: SpecContext): ServiceBinding[] {
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

const unique = <T>(items: readonly T[]): T[] => [...new Set(items)];

function tags(p: Problems, items: TagBody[] | undefined): string[] {
  const names = (items ?? []).map((tag, i) => {
    const name = typeof tag === "string" ? tag : tag.name;
    if (name.trim() === "") p.add(`tags[${i}]`, "must be a tag {name} with a name that is not blank");
    return name;
  });
  return unique(names.filter((n) => n.trim() !== ""));
}

function workingDir(p: Problems, dir: string | undefined): string {
  if (dir === undefined || dir === "") return DEFAULT_SPEC.working_dir;
  if (!dir.startsWith("/")) p.add("working_dir", "must be an absolute path");
  return dir;
}

/** null, undefined and 0 mean "the engine's default" and are stored as null. */
const resource = (value: number | null | undefined): number | null => value || null;

function memory(p: Problems, value: number | null | undefined): number | null {
  const mb = resource(value);
  if (mb !== null && mb < MIN_MEMORY_MB) {
    p.add("memory", `must be at least ${MIN_MEMORY_MB} (MB), the engine's smallest limit`);
    return null;
  }
  return mb;
}

/** Each item passing `check`. */
function strings(
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
function isExtraHost(entry: string): boolean {
  const colon = entry.indexOf(":");
  if (colon <= 0) return false;
  return HOST_NAME_RE.test(entry.slice(0, colon)) && isIP(entry.slice(colon + 1)) !== 0;
}

/** A field the spec's attribute list spells differently; both spellings must agree when both are sent. */
function aliased<T>(
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

function labels(p: Problems, value: Record<string, string> | undefined): Record<string, string> {
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
function stopSignal(p: Problems, value: string | null | undefined): string | null {
  if (value === undefined || value === null || value.trim() === "") return null;
  const name = stopSignalName(value);
  if (name === undefined) p.add("stop_signal", STOP_SIGNAL_PROBLEM);
  return name ?? null;
}

/** Forms of single fields, checked on the resulting spec. */
function formChecks(p: Problems, spec: ServiceSpec): void {
  if (spec.cpuset !== "" && !CPUSET_RE.test(spec.cpuset)) p.add("cpuset", "must list CPUs such as 0-2,4");
  if (spec.hostname !== "" && (!HOST_NAME_RE.test(spec.hostname) || spec.hostname.length > 63))
    p.add("hostname", "must be a host name of at most 63 characters (letters, digits, '-' and '.')");
  if (spec.domainname !== "" && !HOST_NAME_RE.test(spec.domainname))
    p.add("domainname", "must be a domain name (letters, digits, '-' and '.')");
  if (spec.mac_address !== "" && !MAC_RE.test(spec.mac_address))
    p.add("mac_address", "must be a MAC address such as 02:42:ac:11:00:02");
}

/** Rules between fields, checked on the resulting spec. `field` says whom to blame. */
function crossChecks(p: Problems, spec: ServiceSpec, blame: (field: keyof ServiceSpec) => string): void {
  if (spec.memory_swap !== null && spec.memory_swap !== -1) {
    if (spec.memory === null) p.add(blame("memory_swap"), "needs memory (it counts memory plus swap)");
    else if (spec.memory_swap < spec.memory)
      p.add(blame("memory_swap"), `must be at least memory (${spec.memory}): it counts memory plus swap`);
  }
  if (spec.net === "host" && spec.mac_address !== "") {
    p.add(blame("mac_address"), "cannot be set when net is host (the node's own interfaces are used)");
  }
}

// ---------------------------------------------------------------------------------------------
// Create and update

/**
 * Checks a Create service body that did not go through the route's validator (a stack item) with
 * the same compiled schema check, then applies the rules and defaults (`normalizeCreate`).
 */
export function parseCreate(input: unknown, ctx: SpecContext, fieldPrefix = ""): NormalizedService {
  schemaProblems(serviceCreateCheck, input, fieldPrefix);
  return normalizeCreate(input as ServiceCreateBody, ctx, fieldPrefix);
}

/** `parseCreate` for Update service bodies. */
export function parseUpdate(
  current: ServiceSpec,
  currentName: string,
  input: unknown,
  ctx: SpecContext,
  fieldPrefix = "",
): UpdatedService {
  schemaProblems(serviceUpdateCheck, input, fieldPrefix);
  return applyUpdate(current, currentName, input as ServiceUpdateBody, ctx, fieldPrefix);
}

/** Applies the rules and defaults to a Create service body its schema accepted (spec "Create service"). */
export function normalizeCreate(
  body: ServiceCreateBody,
  ctx: SpecContext,
  fieldPrefix = "",
): NormalizedService {
  const p = new Problems(fieldPrefix);
  const image_name = image(p, body.image);

  let name: string;
  if (body.name === undefined || body.name === "") {
    // The default must itself be a valid name, whatever the image is called.
    name =
      nameFromImage(image_name)
        .slice(0, NAME_MAX_LENGTH)
        .replace(/^-+|-+$/g, "") || "service";
  } else {
    name = body.name;
    if (!NAME_RE.test(name)) p.add("name", NAME_PROBLEM);
  }

  const deployment_strategy = body.deployment_strategy ?? DEFAULT_SPEC.deployment_strategy;
  const target_num_containers = deployment_strategy === "EVERY_NODE" ? 0 : (body.target_num_containers ?? 1);

  const spec: ServiceSpec = {
    ...DEFAULT_SPEC,
    image_name,
    run_command: command(p, "run_command", body.run_command),
    entrypoint: command(p, "entrypoint", body.entrypoint),
    container_ports: ports(p, body.container_ports),
    container_envvars: envvars(p, body.container_envvars),
    linked_to_service: links(p, body.linked_to_service, ctx),
    bindings: bindings(p, body.bindings, ctx),
    autorestart: body.autorestart ?? DEFAULT_SPEC.autorestart,
    autodestroy: body.autodestroy ?? DEFAULT_SPEC.autodestroy,
    sequential_deployment: body.sequential_deployment ?? false,
    roles: unique(body.roles ?? []),
    privileged: body.privileged ?? false,
    deployment_strategy,
    tags: tags(p, body.tags),
    autoredeploy: body.autoredeploy ?? false,
    net: body.net ?? DEFAULT_SPEC.net,
    pid: body.pid ?? DEFAULT_SPEC.pid,
    working_dir: workingDir(p, body.working_dir),
    user: body.user ?? "",
    hostname: body.hostname ?? "",
    domainname: body.domainname ?? "",
    mac_address: body.mac_address ?? "",
    cgroup_parent: aliased(p, body.cgroup_parent, body.cgroup_name, ["cgroup_parent", "cgroup_name"]) ?? "",
    tty: body.tty ?? false,
    stdin_open: body.stdin_open ?? false,
    dns: strings(p, "dns", body.dns, (s) => isIP(s) !== 0, "must be an IP address"),
    dns_search: strings(
      p,
      "dns_search",
      body.dns_search,
      (s) => HOST_NAME_RE.test(s),
      "must be a domain name",
    ),
    cap_add: strings(
      p,
      "cap_add",
      body.cap_add,
      (s) => CAPABILITY_RE.test(s),
      "must be a capability such as NET_ADMIN",
    ),
    cap_drop: strings(
      p,
      "cap_drop",
      body.cap_drop,
      (s) => CAPABILITY_RE.test(s),
      "must be a capability such as MKNOD",
    ),
    devices: strings(
      p,
      "devices",
      body.devices,
      (s) => parseDevice(s) !== undefined,
      "must be <host device>:<container device>[:<permissions rwm>], for example /dev/fuse:/dev/fuse:rwm",
    ),
    extra_hosts: strings(
      p,
      "extra_hosts",
      body.extra_hosts,
      isExtraHost,
      "must be <host name>:<ip>, for example db.example:10.0.0.5",
    ),
    security_opt: aliased(p, body.security_opt, body.secuirty_opt, ["security_opt", "secuirty_opt"]) ?? [],
    cpu_shares: resource(body.cpu_shares),
    cpuset: body.cpuset ?? "",
    memory: memory(p, body.memory),
    // -1 is Docker's "unlimited swap".
    memory_swap: body.memory_swap === -1 ? -1 : resource(body.memory_swap),
    labels: labels(p, body.labels),
    read_only: body.read_only ?? false,
  };
  // How the containers are stopped (domain/stop.ts).
  spec.stop_signal = stopSignal(p, body.stop_signal);
  spec.stop_grace_period = body.stop_grace_period ?? null;

  formChecks(p, spec);
  crossChecks(p, spec, (field) => field);
  p.throwIfAny();
  return { name, nickname: body.nickname || name, target_num_containers, spec };
}

/**
 * Applies an Update service body its schema accepted (spec "Update service") to the current
 * definition. Lists (ports, variables, links, tags) replace the current ones; an image without a
 * tag means latest.
 */
export function applyUpdate(
  current: ServiceSpec,
  currentName: string,
  body: ServiceUpdateBody,
  ctx: SpecContext,
  fieldPrefix = "",
): UpdatedService {
  const p = new Problems(fieldPrefix);
  const spec: ServiceSpec = structuredClone(current);
  const result: UpdatedService = { spec, changed: false };

  if (body.image !== undefined) spec.image_name = image(p, body.image);
  const next = body.deployment_strategy;
  if (next !== undefined) {
    if (
      next !== current.deployment_strategy &&
      (next === "EVERY_NODE" || current.deployment_strategy === "EVERY_NODE")
    ) {
      // EVERY_NODE services are placed and counted by the platform, the others by the user; a
      // service keeps the kind it was created with.
      p.add("deployment_strategy", "a service cannot be updated to or from EVERY_NODE");
    } else spec.deployment_strategy = next;
  }
  if (body.target_num_containers !== undefined) {
    if (current.deployment_strategy === "EVERY_NODE") {
      p.add(
        "target_num_containers",
        "an EVERY_NODE service runs one container per node and cannot be scaled",
      );
    } else result.target_num_containers = body.target_num_containers;
  }
  if (body.nickname !== undefined) result.nickname = body.nickname || currentName;
  if (body.run_command !== undefined) spec.run_command = command(p, "run_command", body.run_command);
  if (body.entrypoint !== undefined) spec.entrypoint = command(p, "entrypoint", body.entrypoint);
  if (body.container_ports !== undefined) spec.container_ports = ports(p, body.container_ports);
  if (body.container_envvars !== undefined) spec.container_envvars = envvars(p, body.container_envvars);
  if (body.linked_to_service !== undefined) spec.linked_to_service = links(p, body.linked_to_service, ctx);
  if (body.autorestart !== undefined) spec.autorestart = body.autorestart;
  if (body.autodestroy !== undefined) spec.autodestroy = body.autodestroy;
  if (body.sequential_deployment !== undefined) spec.sequential_deployment = body.sequential_deployment;
  if (body.roles !== undefined) spec.roles = unique(body.roles);
  if (body.privileged !== undefined) spec.privileged = body.privileged;
  if (body.tags !== undefined) spec.tags = tags(p, body.tags);
  if (body.autoredeploy !== undefined) spec.autoredeploy = body.autoredeploy;
  if (body.net !== undefined) spec.net = body.net;
  if (body.pid !== undefined) spec.pid = body.pid;
  if (body.working_dir !== undefined) spec.working_dir = workingDir(p, body.working_dir);
  if (body.cpu_shares !== undefined) spec.cpu_shares = resource(body.cpu_shares);
  if (body.memory !== undefined) spec.memory = memory(p, body.memory);
  // How the containers are stopped; a definition stored without these holds null.
  if (body.stop_signal !== undefined) {
    const signal = stopSignal(p, body.stop_signal);
    if (signal !== (current.stop_signal ?? null)) spec.stop_signal = signal;
  }
  if (body.stop_grace_period !== undefined && body.stop_grace_period !== (current.stop_grace_period ?? null))
    spec.stop_grace_period = body.stop_grace_period;

  // An update cannot send memory_swap or mac_address, so blame the field it did send.
  crossChecks(p, spec, (field) =>
    field === "memory_swap" ? "memory" : field === "mac_address" ? "net" : field,
  );
  p.throwIfAny();
  result.changed = definitionChanged(current, spec);
  return result;
}

/** Whether two definitions differ in anything a container sees (so containers must be redeployed). */
export function definitionChanged(a: ServiceSpec, b: ServiceSpec): boolean {
  const skip = new Set<string>(SCHEDULING_FIELDS);
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const key of keys) {
    if (skip.has(key)) continue;
    if (!sameValue(a[key as keyof ServiceSpec], b[key as keyof ServiceSpec])) return true;
  }
  return false;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Structural equality; object key order does not matter, array order does. */
function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return (
      Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => sameValue(x, b[i]))
    );
  }
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => k in b && sameValue(a[k], b[k]));
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Shell-style splitting of run_command and entrypoint

export class ShellSyntaxError extends Error {
  override readonly name = "ShellSyntaxError";
}

/**
 * Splits a command like a POSIX shell splits words, without running a shell: whitespace separates
 * words, '…' is literal, "…" keeps \" \\ \$ \` escapes, a backslash outside quotes escapes the next
 * character. There is no variable expansion or globbing: the words become the process's argv as
 * they are. Users who want a shell say so: `sh -c "echo $HOME"`.
 */
export function splitShellWords(command: string): string[] {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  let i = 0;
  while (i < command.length) {
    const c = command[i]!;
    if (c === "'") {
      const end = command.indexOf("'", i + 1);
      if (end < 0) throw new ShellSyntaxError("has an unterminated ' quote");
      word += command.slice(i + 1, end);
      inWord = true;
      i = end + 1;
    } else if (c === '"') {
      inWord = true;
      i++;
      for (;;) {
        if (i >= command.length) throw new ShellSyntaxError('has an unterminated " quote');
        const d = command[i]!;
        if (d === '"') {
          i++;
          break;
        }
        const next = command[i + 1];
        if (d === "\\" && next !== undefined && '"\\$`\n'.includes(next)) {
          if (next !== "\n") word += next;
          i += 2;
        } else {
          word += d;
          i++;
        }
      }
    } else if (c === "\\") {
      const next = command[i + 1];
      if (next === undefined) throw new ShellSyntaxError("ends with a lone backslash");
      // A backslash-newline joins lines, as in a shell.
      if (next !== "\n") {
        word += next;
        inWord = true;
      }
      i += 2;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
      i++;
    } else {
      word += c;
      inWord = true;
      i++;
    }
  }
  if (inWord) words.push(word);
  return words;
}

// ---------------------------------------------------------------------------------------------
// Wire views of a service's references and ports

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
