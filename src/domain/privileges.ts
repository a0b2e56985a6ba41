// The privilege model of containers (issue 26): which options of a service definition reach the
// node a container runs on, and whether a namespace's policy allows them. Pure functions.
//
// A container that runs privileged, joins the host's network or PID namespace, holds a capability
// beyond Docker's default set, maps a device, changes its security profile, picks its cgroup
// parent or bind-mounts a host path can reach the node, and through it every other namespace's
// containers on that node (and, on provider `local`, the Berth host itself). Such options are
// refused unless an administrator allowed them for the namespace (`Privileges`, stored per
// namespace; nothing by default, everything for an administrator's personal namespace).
//
// The same classification serves both checks: a service definition when it is written (fields
// named as the Create service body names them), and the engine's spec of a container just before
// it is created (domain/container-spec.ts output), so a definition written before a policy, or
// under a policy later narrowed, never yields a container that reaches its node.
import { ApiError, type FieldProblem } from "./errors.ts";
import type { ServiceSpec } from "./service.ts";

/** What an administrator allowed a namespace. */
export interface Privileges {
  /** `privileged: true` */
  privileged: boolean;
  /** `net: "host"` */
  host_network: boolean;
  /** `pid: "host"` */
  host_pid: boolean;
  /** Capabilities beyond Docker's default set that `cap_add` may name, or "all" (which allows `ALL`). */
  capabilities: string[] | "all";
  /** `devices` (any host device). */
  devices: boolean;
  /** `security_opt` (any: AppArmor, seccomp and SELinux profiles, no-new-privileges). */
  security_opt: boolean;
  /** `cgroup_parent` (any). */
  cgroup_parent: boolean;
  /** Host paths that bindings may mount: each allows itself and what lies under it. */
  host_paths: string[];
  /** Node clusters of provider `local` (engines on the Berth host) and engines attached on it. */
  local_nodes: boolean;
}

export type Grant = Exclude<keyof Privileges, "capabilities" | "host_paths"> | "capability" | "host_path";

/** Nothing allowed: every namespace's policy until an administrator changes it. */
export const NO_PRIVILEGES: Privileges = Object.freeze({
  privileged: false,
  host_network: false,
  host_pid: false,
  capabilities: [],
  devices: false,
  security_opt: false,
  cgroup_parent: false,
  host_paths: [],
  local_nodes: false,
}) as Privileges;

/** Everything allowed: an administrator's personal namespace (administrators own the host anyway). */
export const ALL_PRIVILEGES: Privileges = Object.freeze({
  privileged: true,
  host_network: true,
  host_pid: true,
  capabilities: "all",
  devices: true,
  security_opt: true,
  cgroup_parent: true,
  host_paths: ["/"],
  local_nodes: true,
}) as Privileges;

/** The keys of a policy, in the order the API and the CLI show them. */
export const PRIVILEGE_KEYS = Object.keys(NO_PRIVILEGES) as (keyof Privileges)[];

/**
 * Docker's default capability set (moby `oci/caps/defaults.go`): a container holds these unless
 * `cap_drop` removes them, so adding one of them reaches nothing more.
 */
export const DEFAULT_CAPABILITIES: readonly string[] = [
  "CHOWN",
  "DAC_OVERRIDE",
  "FSETID",
  "FOWNER",
  "MKNOD",
  "NET_RAW",
  "SETGID",
  "SETUID",
  "SETFCAP",
  "SETPCAP",
  "NET_BIND_SERVICE",
  "SYS_CHROOT",
  "KILL",
  "AUDIT_WRITE",
];

/** A capability as the engine reads it: case does not matter and `CAP_` is optional (`sys_admin` is SYS_ADMIN). */
export function capabilityName(cap: string): string {
  const upper = cap.trim().toUpperCase();
  return upper.startsWith("CAP_") ? upper.slice(4) : upper;
}

/**
 * A host path as the engine will mount it: `..`, `.` and repeated or trailing slashes resolved
 * (`/srv/data/../../etc` is `/etc`). Written out rather than node:path, so the dashboard and the
 * CLI share it.
 */
export function normalHostPath(p: string): string {
  const out: string[] = [];
  for (const part of p.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") out.pop();
    else out.push(part);
  }
  return `/${out.join("/")}`;
}

/** Whether `p` is `prefix` or lies under it, path segment by segment (`/srv` allows `/srv/x`, not `/srvx`). */
export function underPrefix(p: string, prefix: string): boolean {
  const a = normalHostPath(p);
  const b = normalHostPath(prefix);
  return b === "/" || a === b || a.startsWith(`${b}/`);
}

/** One option of a definition (or an engine spec) that reaches the node. */
export interface Reach {
  /** The field as the Create service body names it: `privileged`, `cap_add[1]`, `bindings[0].host_path`. */
  field: string;
  grant: Grant;
  /** What it asks for (a capability, a host path, a device…), compared across versions of a definition. */
  value: string;
}

function capabilityReach(caps: readonly string[], field: (i: number) => string): Reach[] {
  const out: Reach[] = [];
  caps.forEach((cap, i) => {
    const name = capabilityName(cap);
    if (!DEFAULT_CAPABILITIES.includes(name)) out.push({ field: field(i), grant: "capability", value: name });
  });
  return out;
}

/** Every option of a service definition that reaches the node. */
export function serviceReach(spec: ServiceSpec): Reach[] {
  const out: Reach[] = [];
  if (spec.privileged) out.push({ field: "privileged", grant: "privileged", value: "true" });
  if (spec.net !== "bridge") out.push({ field: "net", grant: "host_network", value: spec.net });
  if (spec.pid !== "none") out.push({ field: "pid", grant: "host_pid", value: spec.pid });
  out.push(...capabilityReach(spec.cap_add, (i) => `cap_add[${i}]`));
  spec.devices.forEach((d, i) => {
    out.push({ field: `devices[${i}]`, grant: "devices", value: d });
  });
  spec.security_opt.forEach((o, i) => {
    out.push({ field: `security_opt[${i}]`, grant: "security_opt", value: o });
  });
  if (spec.cgroup_parent !== "")
    out.push({ field: "cgroup_parent", grant: "cgroup_parent", value: spec.cgroup_parent });
  spec.bindings.forEach((b, i) => {
    if (b.host_path !== null && b.host_path !== "")
      out.push({ field: `bindings[${i}].host_path`, grant: "host_path", value: normalHostPath(b.host_path) });
  });
  return out;
}

/**
 * The fields of an engine's container spec (drivers/engine.ts `ContainerSpec`) that can reach the
 * node, stated here so that the dashboard and the CLI can import this module without the driver.
 */
export interface EngineSpecFields {
  privileged?: boolean;
  networkMode?: string;
  pidMode?: string;
  capAdd?: string[];
  devices?: { pathOnHost: string; pathInContainer: string }[];
  securityOpt?: string[];
  cgroupParent?: string;
  binds?: string[];
}

/**
 * Every option of an engine spec that reaches the node, named by the service field it comes from.
 * This reads what the engine would really receive, so a rule of buildContainerSpec that changed
 * cannot slip an option past the policy.
 */
export function engineSpecReach(spec: EngineSpecFields): Reach[] {
  const out: Reach[] = [];
  if (spec.privileged) out.push({ field: "privileged", grant: "privileged", value: "true" });
  const net = spec.networkMode;
  if (net !== undefined && net !== "" && net !== "bridge" && net !== "default")
    out.push({ field: "net", grant: "host_network", value: net });
  if (spec.pidMode !== undefined && spec.pidMode !== "")
    out.push({ field: "pid", grant: "host_pid", value: spec.pidMode });
  out.push(...capabilityReach(spec.capAdd ?? [], (i) => `cap_add[${i}]`));
  (spec.devices ?? []).forEach((d, i) => {
    out.push({ field: `devices[${i}]`, grant: "devices", value: `${d.pathOnHost}:${d.pathInContainer}` });
  });
  (spec.securityOpt ?? []).forEach((o, i) => {
    out.push({ field: `security_opt[${i}]`, grant: "security_opt", value: o });
  });
  if (spec.cgroupParent !== undefined && spec.cgroupParent !== "")
    out.push({ field: "cgroup_parent", grant: "cgroup_parent", value: spec.cgroupParent });
  (spec.binds ?? []).forEach((bind, i) => {
    // `source:target[:mode]` mounts a host path (or a named volume); a lone `target` is an
    // anonymous volume of the container.
    const parts = bind.split(":");
    if (parts.length < 2) return;
    const source = parts[0]!;
    out.push(
      source.startsWith("/")
        ? { field: `bindings[${i}].host_path`, grant: "host_path", value: normalHostPath(source) }
        : // A named volume is an engine-wide name: another namespace's data on a shared engine.
          { field: `bindings[${i}].host_path`, grant: "host_path", value: `volume ${source}` },
    );
  });
  return out;
}

/** Whether the policy allows one option. */
export function allows(policy: Privileges, reach: Reach): boolean {
  switch (reach.grant) {
    case "capability":
      return (
        policy.capabilities === "all" ||
        (reach.value !== "ALL" && policy.capabilities.map(capabilityName).includes(reach.value))
      );
    case "host_path":
      return reach.value.startsWith("/") && policy.host_paths.some((p) => underPrefix(reach.value, p));
    default:
      return policy[reach.grant];
  }
}

/** What each kind of option does, for the sentence of a refusal. */
const WHAT: Record<Grant, string> = {
  privileged: "privileged containers",
  host_network: "the node's network (net host)",
  host_pid: "the node's process namespace (pid host)",
  capability: "capabilities beyond Docker's default set",
  devices: "devices of the node",
  security_opt: "security options (security_opt)",
  cgroup_parent: "a cgroup parent of its choice",
  host_path: "bind mounts of host paths",
  local_nodes: "nodes on the Berth host (provider local)",
};

/** The privilege a refusal names in the policy (`PATCH /api/v1.1/namespaces/<ns>/ {privileges: {…}}`). */
export const POLICY_KEY: Record<Grant, keyof Privileges> = {
  privileged: "privileged",
  host_network: "host_network",
  host_pid: "host_pid",
  capability: "capabilities",
  devices: "devices",
  security_opt: "security_opt",
  cgroup_parent: "cgroup_parent",
  host_path: "host_paths",
  local_nodes: "local_nodes",
};

/** The problem of one refused option, for `details`. */
export function refusalProblem(namespace: string, reach: Reach): string {
  const value =
    reach.grant === "capability"
      ? `capability ${reach.value}`
      : reach.grant === "host_path"
        ? `host path ${reach.value}`
        : undefined;
  const asked = value ? `${value}: ` : "";
  return `${asked}namespace ${namespace} is not allowed ${WHAT[reach.grant]}; an administrator can allow it (privileges.${POLICY_KEY[reach.grant]} of the namespace)`;
}

/** The options of `reaches` the policy does not allow, as problems named by field. */
export function refused(namespace: string, policy: Privileges, reaches: readonly Reach[]): FieldProblem[] {
  return reaches
    .filter((r) => !allows(policy, r))
    .map((r) => ({ field: r.field, problem: refusalProblem(namespace, r) }));
}

/**
 * The options of a new version of a definition that the old one did not have: on an update only
 * what the request introduces or changes is judged, so a value an administrator set (or that was
 * allowed then) stays, and an unrelated change by a tenant still works.
 */
export function introduced(before: readonly Reach[], after: readonly Reach[]): Reach[] {
  const had = new Set(before.map((r) => `${r.grant}\u0000${r.value}`));
  return after.filter((r) => !had.has(`${r.grant}\u0000${r.value}`));
}

/** One problem per key of a policy body that is not well formed (PATCH of a namespace). */
export function policyProblems(
  body: Partial<Record<keyof Privileges, unknown>>,
  prefix: string,
): FieldProblem[] {
  const out: FieldProblem[] = [];
  if (Array.isArray(body.host_paths)) {
    body.host_paths.forEach((p, i) => {
      if (typeof p !== "string" || !p.startsWith("/") || p.includes(":") || p.includes("\u0000"))
        out.push({
          field: `${prefix}host_paths[${i}]`,
          problem: "must be an absolute host path without ':'",
        });
    });
  }
  if (Array.isArray(body.capabilities)) {
    body.capabilities.forEach((c, i) => {
      if (typeof c !== "string" || !/^[A-Za-z_]+$/.test(c) || capabilityName(c) === "ALL")
        out.push({
          field: `${prefix}capabilities[${i}]`,
          problem: 'must be a capability such as NET_ADMIN (allow every one with "all")',
        });
    });
  }
  return out;
}

/** A stored or patched policy in its canonical form: capabilities upper case, host paths normalised, no duplicates. */
export function canonicalPrivileges(p: Partial<Privileges>): Privileges {
  const merged = { ...NO_PRIVILEGES, ...p };
  return {
    ...merged,
    capabilities:
      merged.capabilities === "all" ? "all" : [...new Set(merged.capabilities.map(capabilityName))].sort(),
    host_paths: [...new Set(merged.host_paths.map(normalHostPath))].sort(),
  };
}

/** The refusal of options a namespace is not allowed: 403 `privilege_not_allowed`, each option in `details`. */
export function privilegeRefusal(problems: readonly FieldProblem[]): ApiError {
  const [first, ...rest] = problems;
  if (!first) throw new Error("privilegeRefusal needs a problem");
  const more =
    rest.length === 0 ? "" : ` (and ${rest.length} more refused option${rest.length === 1 ? "" : "s"})`;
  return new ApiError("forbidden", "privilege_not_allowed", `${first.field}: ${first.problem}${more}`, [
    ...problems,
  ]);
}
