// Service definitions: from a Create or Update body to the stored ServiceSpec (the rules each field
// follows: service-rules.ts; the wire views of a spec's references and ports: service-views.ts).
// Pure functions: whatever needs the store (does this service URI exist?) comes in through a small
// context.
//
// A body's types, enumerations, lengths and bounds are its schema's (contract/service.ts), held by
// one compiled check (contract/check.ts): the route's validator for /service/, `parseCreate` and
// `parseUpdate` for stack items. The rules here collect every remaining problem of a body and
// throw one 400 (`code: invalid_field`) whose `details` name each field, so a client fixes a body
// in one round trip. Field names carry `fieldPrefix`, so stacks report
// `services.web.container_ports[0].inner_port`.

import { isIP } from "node:net";
import { serviceCreateCheck, serviceUpdateCheck } from "../contract/check.ts";
import type { ServiceCreateBody, ServiceField, ServiceUpdateBody } from "../contract/service.ts";
import { parseDomains } from "./domains.ts";
import { DEFAULT_SPEC, nameFromImage, type ServiceSpec } from "./service.ts";
import {
  aliased,
  bindings,
  CAPABILITY_RE,
  command,
  crossChecks,
  envvars,
  formChecks,
  HOST_NAME_RE,
  healthCheck,
  image,
  isExtraHost,
  labels,
  links,
  memory,
  NAME_MAX_LENGTH,
  NAME_PROBLEM,
  NAME_RE,
  Problems,
  parseDevice,
  ports,
  resource,
  rollout,
  SCHEDULING_FIELDS,
  type SpecContext,
  schemaProblems,
  stopSignal,
  strings,
  tags,
  unique,
  workingDir,
} from "./service-rules.ts";

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
// Results

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
  spec.health_check = healthCheck(p, body.health_check);
  spec.rollout = rollout(p, body.rollout);
  // Domains (the router's) only when the body names some: a definition without them has none.
  if (body.domains !== undefined && body.domains.length > 0)
    spec.domains = parseDomains(body.domains, (f, problem) => p.add(f, problem));

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
  // A shallow copy: an update replaces whole fields, never part of one, so `current` is never
  // changed, and the fields it leaves are the very same values (definitionChanged, and whoever
  // asks whether the definition changed at all, compares those by identity first).
  const spec: ServiceSpec = { ...current };
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
  if (body.health_check !== undefined) {
    const check = healthCheck(p, body.health_check);
    if (!sameValue(check, current.health_check ?? null)) spec.health_check = check;
  }
  if (body.rollout !== undefined) {
    const strategy = rollout(p, body.rollout);
    if (!sameValue(strategy, current.rollout ?? null)) spec.rollout = strategy;
  }

  if (body.domains !== undefined)
    spec.domains = parseDomains(body.domains, (f, problem) => p.add(f, problem));

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
  // Every key of either; a field an update left is the very same value (applyUpdate), so most
  // compare by identity.
  const x = a as unknown as Record<string, unknown>;
  const y = b as unknown as Record<string, unknown>;
  for (const key in x) {
    if (x[key] !== y[key] && !UNSEEN_FIELDS.has(key) && !sameValue(x[key], y[key])) return true;
  }
  for (const key in y) {
    if (!(key in x) && !UNSEEN_FIELDS.has(key) && !sameValue(undefined, y[key])) return true;
  }
  return false;
}

/** Fields containers never see: scheduling, and domains (the router's). */
const UNSEEN_FIELDS: ReadonlySet<string> = new Set<string>([...SCHEDULING_FIELDS, "domains"]);

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
