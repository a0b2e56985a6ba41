// A stack's services as a stack file again (export): stack-file keys, leaving out every value that
// is the default. Pure functions.

import { healthCheckToStackFile } from "./health.ts";
import type { ServiceSpec } from "./service.ts";
import { durationText } from "./stop.ts";

export interface ExportInput {
  name: string;
  nickname: string;
  target_num_containers: number;
  spec: ServiceSpec;
  /** How the stack file names a service (by uuid): `db`, `db.otherstack`; undefined when gone. */
  refOf(uuid: string): string | undefined;
}

function memoryText(mb: number): string {
  return mb % 1024 === 0 ? `${mb / 1024}g` : `${mb}m`;
}

/** A service as stack-file keys, leaving out every value that is the default. */
export function exportService(s: ExportInput): Record<string, unknown> {
  const spec = s.spec;
  const out: Record<string, unknown> = { image: spec.image_name };
  if (spec.run_command !== null) out.command = spec.run_command;
  if (spec.entrypoint !== null) out.entrypoint = spec.entrypoint;
  if (spec.container_envvars.length)
    out.environment = Object.fromEntries(spec.container_envvars.map((e) => [e.key, e.value]));
  const portText = (p: ServiceSpec["container_ports"][number]) =>
    `${p.outer_port !== null ? `${p.outer_port}:` : ""}${p.inner_port}${p.protocol === "udp" ? "/udp" : ""}`;
  const published = spec.container_ports.filter((p) => p.published);
  const exposed = spec.container_ports.filter((p) => !p.published);
  if (published.length) out.ports = published.map(portText);
  if (exposed.length) out.expose = exposed.map(portText);
  const links = spec.linked_to_service.flatMap((l) => {
    const ref = s.refOf(l.to_service);
    if (ref === undefined) return [];
    return [ref.split(".")[0] === l.name ? ref : `${ref}:${l.name}`];
  });
  if (links.length) out.links = links;
  const volumes = spec.bindings
    .filter((b) => b.volumes_from === null)
    .map(
      (b) =>
        `${b.host_path !== null ? `${b.host_path}:` : ""}${b.container_path}${b.rewritable ? "" : ":ro"}`,
    );
  if (volumes.length) out.volumes = volumes;
  const volumesFrom = spec.bindings.flatMap((b) => {
    const ref = b.volumes_from === null ? undefined : s.refOf(b.volumes_from);
    return ref === undefined ? [] : [`${ref}${b.rewritable ? "" : ":ro"}`];
  });
  if (volumesFrom.length) out.volumes_from = volumesFrom;
  if (spec.deployment_strategy !== "EVERY_NODE" && s.target_num_containers !== 1)
    out.target_num_containers = s.target_num_containers;
  if (spec.deployment_strategy !== "EMPTIEST_NODE")
    out.deployment_strategy = spec.deployment_strategy.toLowerCase();
  if (spec.tags.length) out.tags = [...spec.tags];
  if (spec.roles.length) out.roles = [...spec.roles];
  if (spec.autorestart !== "OFF") out.restart = spec.autorestart === "ALWAYS" ? "always" : "on-failure";
  if (spec.autodestroy !== "OFF") out.autodestroy = spec.autodestroy === "ALWAYS" ? "always" : "on-success";
  if (spec.autoredeploy) out.autoredeploy = true;
  if (spec.sequential_deployment) out.sequential_deployment = true;
  if (spec.memory !== null) out.mem_limit = memoryText(spec.memory);
  if (spec.memory_swap !== null)
    out.memswap_limit = spec.memory_swap === -1 ? -1 : memoryText(spec.memory_swap);
  if (spec.cpu_shares !== null) out.cpu_shares = spec.cpu_shares;
  if (spec.cpuset !== "") out.cpuset = spec.cpuset;
  if (spec.privileged) out.privileged = true;
  if (spec.read_only) out.read_only = true;
  if (spec.net !== "bridge") out.net = spec.net;
  if (spec.pid !== "none") out.pid = spec.pid;
  if (spec.working_dir !== "/") out.working_dir = spec.working_dir;
  for (const key of ["user", "hostname", "domainname", "mac_address", "cgroup_parent"] as const) {
    if (spec[key] !== "") out[key] = spec[key];
  }
  for (const key of [
    "dns",
    "dns_search",
    "cap_add",
    "cap_drop",
    "devices",
    "extra_hosts",
    "security_opt",
  ] as const) {
    if (spec[key].length) out[key] = [...spec[key]];
  }
  if (Object.keys(spec.labels).length) out.labels = { ...spec.labels };
  if (spec.tty) out.tty = true;
  if (spec.stdin_open) out.stdin_open = true;
  if (s.nickname !== s.name) out.nickname = s.nickname;
  // How the containers are stopped (null or absent: the defaults).
  if (spec.stop_signal) out.stop_signal = spec.stop_signal;
  if (spec.stop_grace_period !== undefined && spec.stop_grace_period !== null)
    out.stop_grace_period = durationText(spec.stop_grace_period);
  if (spec.health_check) out.healthcheck = healthCheckToStackFile(spec.health_check);
  if (spec.domains?.length) out.domains = spec.domains.map((d) => ({ ...d }));
  return out;
}
