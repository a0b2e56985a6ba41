// What the service form sends: its values (strings as typed) → a Create or Update service body,
// and per field of the contract whether the form offers it or why not. Pure, so a test can hold
// the form to the contract without a browser (test/domain/service-definition.test.ts).
import type { ServiceField } from "../../../src/contract/service.ts";

/** Why a field of the definition is not in the form; the form offers every other. */
type NotOffered = { notOffered: string };
const ENGINE_OPTION: NotOffered = {
  notOffered: "an engine option few services need: set it with the API or a stack file",
};
const PRIVILEGE: NotOffered = {
  notOffered:
    "reaches the node, allowed per namespace by an administrator: set it with the API or a stack file",
};
const ALIAS: NotOffered = { notOffered: "another spelling of a field the form offers under its own name" };

/**
 * Each field of Create service (contract/service.ts): `"offered"` when the form has an input for
 * it, or why not. The compiler refuses a field of the contract missing here; the test checks
 * that `formBody` sends exactly the offered ones.
 */
export const FORM_FIELDS: Record<ServiceField, "offered" | NotOffered> = {
  image: "offered",
  name: "offered",
  nickname: "offered",
  target_num_containers: "offered",
  run_command: "offered",
  entrypoint: "offered",
  container_ports: "offered",
  container_envvars: "offered",
  linked_to_service: "offered",
  bindings: "offered",
  autorestart: "offered",
  autodestroy: "offered",
  sequential_deployment: "offered",
  roles: "offered",
  privileged: "offered",
  deployment_strategy: "offered",
  tags: "offered",
  autoredeploy: "offered",
  net: "offered",
  pid: "offered",
  working_dir: "offered",
  cpu_shares: "offered",
  memory: "offered",
  stop_signal: "offered",
  stop_grace_period: "offered",
  health_check: "offered",
  rollout: "offered",
  memory_swap: ENGINE_OPTION,
  cpuset: ENGINE_OPTION,
  dns: ENGINE_OPTION,
  dns_search: ENGINE_OPTION,
  extra_hosts: ENGINE_OPTION,
  labels: ENGINE_OPTION,
  user: ENGINE_OPTION,
  hostname: ENGINE_OPTION,
  domainname: ENGINE_OPTION,
  mac_address: ENGINE_OPTION,
  tty: ENGINE_OPTION,
  stdin_open: ENGINE_OPTION,
  read_only: ENGINE_OPTION,
  cap_add: PRIVILEGE,
  cap_drop: ENGINE_OPTION,
  devices: PRIVILEGE,
  security_opt: PRIVILEGE,
  cgroup_parent: PRIVILEGE,
  secuirty_opt: ALIAS,
  cgroup_name: ALIAS,
  domains: { notOffered: "shown and changed on the service page's Domains section" },
};

export interface FormPort {
  protocol: string;
  inner_port: string;
  outer_port: string;
  published: boolean;
}
export interface FormEnv {
  key: string;
  value: string;
}
export interface FormLink {
  to_service: string;
  name: string;
}
/** The health check inputs (contract HealthCheckBody); `type` "" is the image's HEALTHCHECK. */
export interface FormHealth {
  type: string;
  command: string;
  port: string;
  path: string;
  status: string;
  interval: string;
  timeout: string;
  retries: string;
  startPeriod: string;
}
/** The rollout inputs (contract RolloutBody); `order` "" replaces every container at once. */
export interface FormRollout {
  order: string;
  maxUnavailable: string;
  maxSurge: string;
  delay: string;
  failureAction: string;
}
export interface FormBinding {
  host_path: string;
  container_path: string;
  rewritable: boolean;
  volumes_from: string;
}

/** The form's values as the inputs hold them. */
export interface FormValues {
  image: string;
  name: string;
  nickname: string;
  target: string;
  runCommand: string;
  entrypoint: string;
  strategy: string;
  autorestart: string;
  autodestroy: string;
  autoredeploy: boolean;
  global: boolean;
  privileged: boolean;
  sequential: boolean;
  memory: string;
  cpuShares: string;
  net: string;
  pid: string;
  workingDir: string;
  tags: string;
  stopSignal: string;
  stopGracePeriod: string;
  ports: FormPort[];
  envs: FormEnv[];
  links: FormLink[];
  bindings: FormBinding[];
  health: FormHealth;
  rollout: FormRollout;
}

export const NO_HEALTH: FormHealth = {
  type: "",
  command: "",
  port: "",
  path: "",
  status: "",
  interval: "",
  timeout: "",
  retries: "",
  startPeriod: "",
};
export const NO_ROLLOUT: FormRollout = {
  order: "",
  maxUnavailable: "",
  maxSurge: "",
  delay: "",
  failureAction: "rollback",
};

const int = (s: string): number | undefined => (s.trim() === "" ? undefined : Number(s));
/** Only the inputs that hold something: the server's defaults fill the rest. */
const given = (o: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

/** The body's `health_check`: null (the image's own check) unless a kind is chosen. */
export function healthBody(h: FormHealth): Record<string, unknown> | null {
  if (h.type === "") return null;
  if (h.type === "none") return { type: "none" };
  return given({
    type: h.type,
    command: h.type === "command" ? h.command : undefined,
    port: h.type === "http" || h.type === "tcp" ? int(h.port) : undefined,
    path: h.type === "http" && h.path.trim() ? h.path.trim() : undefined,
    status: h.type === "http" ? int(h.status) : undefined,
    interval: int(h.interval),
    timeout: int(h.timeout),
    retries: int(h.retries),
    start_period: int(h.startPeriod),
  });
}

/** The body's `rollout`: null (every container at once) unless an order is chosen. */
export function rolloutBody(r: FormRollout): Record<string, unknown> | null {
  if (r.order === "") return null;
  return given({
    order: r.order,
    max_unavailable: int(r.maxUnavailable),
    max_surge: int(r.maxSurge),
    delay: int(r.delay),
    failure_action: r.failureAction || undefined,
  });
}

/**
 * The body the form sends. Values the server judges (enumerations, numbers) pass as typed, so a
 * wrong one comes back as the server's 400 naming the field; the static type is the contract's
 * with those loosened to what an input holds.
 */
export function formBody(v: FormValues, editing: boolean): Record<string, unknown> {
  const b: { [K in ServiceField]?: unknown } = {
    image: v.image,
    target_num_containers: int(v.target),
    run_command: v.runCommand,
    entrypoint: v.entrypoint,
    deployment_strategy: v.strategy,
    autorestart: v.autorestart,
    autodestroy: v.autodestroy,
    autoredeploy: v.autoredeploy,
    roles: v.global ? ["global"] : [],
    privileged: v.privileged,
    sequential_deployment: v.sequential,
    net: v.net,
    pid: v.pid,
    tags: v.tags
      .split(",")
      .map((t) => t.trim())
      .filter(Boolean)
      .map((t) => ({ name: t })),
    container_ports: v.ports.map((p) => ({
      protocol: p.protocol,
      inner_port: int(p.inner_port),
      ...(p.outer_port.trim() ? { outer_port: int(p.outer_port) } : {}),
      published: p.published,
    })),
    container_envvars: v.envs.filter((e) => e.key.trim()).map((e) => ({ key: e.key.trim(), value: e.value })),
    linked_to_service: v.links
      .filter((l) => l.to_service)
      .map((l) => ({ to_service: l.to_service, ...(l.name.trim() ? { name: l.name.trim() } : {}) })),
    // Empty: the image's signal; the stored value is null then, which the server takes too.
    stop_signal: v.stopSignal.trim() || null,
    stop_grace_period: int(v.stopGracePeriod) ?? null,
    health_check: healthBody(v.health),
    rollout: rolloutBody(v.rollout),
  };
  if (v.nickname.trim()) b.nickname = v.nickname.trim();
  if (v.workingDir.trim()) b.working_dir = v.workingDir.trim();
  if (v.memory.trim()) b.memory = int(v.memory);
  if (v.cpuShares.trim()) b.cpu_shares = int(v.cpuShares);
  if (!editing) {
    if (v.name.trim()) b.name = v.name.trim();
    b.bindings = v.bindings.map((x) => ({
      ...(x.host_path.trim() ? { host_path: x.host_path.trim() } : {}),
      ...(x.container_path.trim() ? { container_path: x.container_path.trim() } : {}),
      rewritable: x.rewritable,
      ...(x.volumes_from ? { volumes_from: x.volumes_from } : {}),
    }));
  }
  return b;
}
