// From a service definition to what one of its containers asks of an engine (drivers/engine.ts
// `ContainerSpec`), and the environment a container sees (CONTRACT §10). Pure: the caller gathers
// the live link targets, the engine ids to mount volumes from and the platform's addresses.
//
// Environment precedence, lowest first: image < platform < user.
// - The image's ENV is the engine's business: it merges it under whatever `env` we pass, as
//   `docker run -e` does, so anything we pass wins over the image.
// - Platform variables are the link variables and the PLATFORM_*/DOCKERCLOUD_* identity; the
//   identity wins over a link variable of the same name (a link cannot spoof PLATFORM_AUTH).
// - The user's container_envvars win over everything: the spec says they override the image's,
//   Docker lets an explicit -e override link variables too, and a user who sets
//   PLATFORM_REST_HOST (say, to go through a proxy) means it.
import type { ContainerSpec, DeviceMapping, PortBinding, RestartPolicy } from "../drivers/engine.ts";
import { engineHealthcheck } from "./health.ts";
import { hostsFor, type LinkTarget, linkVariables } from "./links.ts";
import type { Autorestart, ServiceSpec } from "./service.ts";
import { LABELS } from "./service.ts";
import { parseDevice } from "./service-rules.ts";
import { containerFqdn, serviceFqdn } from "./service-views.ts";
import { splitShellWords } from "./shell-words.ts";

/**
 * Every injected variable exists under both prefixes **(compat)**: the historical SDKs, CLI and
 * load balancer read DOCKERCLOUD_*. Same list as api/compat.ts `ENV_PREFIXES` (domain does not
 * import from api).
 */
export const ENV_PREFIXES = ["PLATFORM_", "DOCKERCLOUD_"] as const;

export interface LinkTargets {
  /** The link name (`db`). */
  alias: string;
  /** The target service's live containers. */
  targets: readonly LinkTarget[];
}

export interface PlatformEndpoints {
  /** The REST API's base URL, `http://berth.example:8000`. */
  restHost: string;
  /** The stream API's base URL, `ws://berth.example:8000`. */
  streamHost: string;
  /** A full Authorization header value (`Basic …`) made for this service; injected only with role global. */
  auth?: string;
}

export interface ContainerSpecInput {
  spec: ServiceSpec;
  service: { uuid: string; name: string; resource_uri: string; namespace: string };
  container: { uuid: string; name: string; number: number; resource_uri: string };
  node: { uuid: string; resource_uri: string; external_fqdn: string };
  /**
   * Live targets of every link of the spec. With sequential deployment, the caller adds the
   * service's own earlier containers as one more link named after the service.
   */
  links: readonly LinkTargets[];
  /** Engine references mounted with `--volumes-from` (see `volumesFromRefs`), `id[:ro]`. */
  volumesFrom: readonly string[];
  platform: PlatformEndpoints;
  /** The image's ENV; only `calculatedEnvvars` needs it (the engine applies it itself). */
  imageEnv?: Record<string, string>;
}

/** What `calculatedEnvvars` needs; without a container or node (a service's view) their variables are left out. */
export type EnvInput = Omit<ContainerSpecInput, "container" | "node" | "volumesFrom"> & {
  container?: ContainerSpecInput["container"];
  node?: ContainerSpecInput["node"];
};

export type EnvOrigin = "user" | "image" | "platform";

export interface CalculatedEnvVar {
  key: string;
  value: string;
  origin: EnvOrigin;
}

/**
 * The engine's name for a container: `<container name>-<first 8 characters of its uuid>`.
 * Engine names are unique per engine, while Berth's container names are unique only per
 * namespace: two namespaces may both run a `web-1` on one engine (an engine attached in more than
 * one namespace, or a shared local engine). The suffix keeps them apart and still reads well in
 * `docker ps`; ownership is proven by labels, never by the name.
 */
export function engineContainerName(container: { name: string; uuid: string }): string {
  return `${container.name}-${container.uuid.slice(0, 8)}`;
}

/**
 * `--volumes-from` references for the spec's `volumes_from` bindings, given the engine ids of each
 * source service's containers; a binding that is not rewritable mounts them read-only.
 */
export function volumesFromRefs(
  spec: ServiceSpec,
  engineIdsOf: (serviceUuid: string) => readonly string[],
): string[] {
  const refs: string[] = [];
  for (const binding of spec.bindings) {
    if (binding.volumes_from === null) continue;
    for (const id of engineIdsOf(binding.volumes_from)) refs.push(binding.rewritable ? id : `${id}:ro`);
  }
  return refs;
}

/**
 * The PLATFORM_* identity variables, each also as DOCKERCLOUD_*. PLATFORM_AUTH only for role
 * global, and only with `includeSecrets` (views do not show it).
 */
export function platformVariables(
  input: EnvInput,
  options: { includeSecrets: boolean },
): Record<string, string> {
  const { service, container, node, platform } = input;
  const values: [string, string][] = [];
  if (container) values.push(["CONTAINER_API_URI", container.resource_uri]);
  values.push(["SERVICE_API_URI", service.resource_uri]);
  if (node) values.push(["NODE_API_URI", node.resource_uri]);
  if (container) values.push(["CONTAINER_FQDN", containerFqdn(container.name, service.namespace)]);
  values.push(["SERVICE_FQDN", serviceFqdn(service.name, service.namespace)]);
  if (node) values.push(["NODE_FQDN", node.external_fqdn]);
  values.push(["REST_HOST", platform.restHost], ["STREAM_HOST", platform.streamHost]);
  if (options.includeSecrets && input.spec.roles.includes("global") && platform.auth !== undefined) {
    values.push(["AUTH", platform.auth]);
  }
  const out: Record<string, string> = {};
  for (const prefix of ENV_PREFIXES) {
    for (const [name, value] of values) out[`${prefix}${name}`] = value;
  }
  return out;
}

/** Every link's variables; `NAME` variables name the client container when there is one. */
export function linkEnvironmentOf(
  links: readonly LinkTargets[],
  clientName: string | undefined,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const link of links) {
    Object.assign(
      out,
      linkVariables(link.alias, link.targets, clientName === undefined ? {} : { clientName }),
    );
  }
  return out;
}

function linkEnvironment(input: EnvInput): Record<string, string> {
  return linkEnvironmentOf(input.links, input.container?.name);
}

/**
 * Whether a container's recorded environment still holds exactly the link variables its links give
 * now. A running container's environment cannot change: when the targets' containers change (or
 * the links do), the container needs a redeploy to get the new variables, and says so by being
 * unsynchronized.
 */
export function linkEnvironmentCurrent(
  recorded: readonly CalculatedEnvVar[],
  links: readonly LinkTargets[],
  client: { name: string; userEnvvars: readonly { key: string; value: string }[] },
): boolean {
  const expected = linkEnvironmentOf(links, client.name);
  const user = new Set(client.userEnvvars.map((v) => v.key));
  const have = new Map(
    recorded
      .filter((v) => v.origin === "platform" && !ENV_PREFIXES.some((p) => v.key.startsWith(p)))
      .map((v) => [v.key, v.value]),
  );
  for (const [key, value] of Object.entries(expected)) {
    if (user.has(key)) continue;
    if (have.get(key) !== value) return false;
    have.delete(key);
  }
  return have.size === 0;
}

/**
 * Labels that let the engine container itself say how it was made, so that what Berth records of
 * it can always be re-read from the engine (after a crash too): the names of the variables Berth
 * injected (origin `platform`), and the link host entries written into its /etc/hosts.
 */
export const PLATFORM_ENV_LABEL = "io.berth.platform-env";
export const LINK_HOSTS_LABEL = "io.berth.link-hosts";

/** Variables that hold a credential: never recorded nor shown (views leave PLATFORM_AUTH out). */
const SECRET_KEYS = new Set(ENV_PREFIXES.map((p) => `${p}AUTH`));

/**
 * `calculated_envvars` of a container (CONTRACT §10), from what its engine reports: exactly the
 * environment the engine container was created with (the image's merged under Berth's), each
 * variable with its origin: `user` for the definition's container_envvars, `platform` for what
 * Berth injected (the label), `image` for the rest. Secrets are left out.
 */
export function environmentFromEngine(
  env: Record<string, string>,
  labels: Record<string, string>,
  userEnvvars: readonly { key: string; value: string }[],
): CalculatedEnvVar[] {
  const platform = new Set((labels[PLATFORM_ENV_LABEL] ?? "").split(",").filter(Boolean));
  const user = new Map(userEnvvars.map((v) => [v.key, v.value]));
  return Object.entries(env)
    .filter(([key]) => !SECRET_KEYS.has(key))
    .map(([key, value]) => ({
      key,
      value,
      origin: user.get(key) === value ? "user" : platform.has(key) ? "platform" : "image",
    }));
}

/**
 * The link host entries (`host:ip`) an engine container was given at create, from its label, as
 * the JSON the record keeps; null when it has no readable label (made before Berth wrote one): its
 * entries are unknown, so they are never rewritten and it stays unsynchronized until a redeploy.
 */
export function linkHostsFromEngine(labels: Record<string, string>): string | null {
  const label = labels[LINK_HOSTS_LABEL];
  if (label === undefined) return null;
  try {
    const parsed: unknown = JSON.parse(label);
    return Array.isArray(parsed) && parsed.every((x) => typeof x === "string")
      ? JSON.stringify(parsed)
      : null;
  } catch {
    return null;
  }
}

/** The link host entries (`host:ip`) of a container's links. */
export function linkHosts(links: readonly LinkTargets[]): string[] {
  return links.flatMap((l) => hostsFor(l.alias, l.targets));
}

/** The `env` passed to the engine: platform variables, then the user's over them. */
export function containerEnv(input: ContainerSpecInput): Record<string, string> {
  const env: Record<string, string> = {
    ...linkEnvironment(input),
    ...platformVariables(input, { includeSecrets: true }),
  };
  for (const { key, value } of input.spec.container_envvars) env[key] = value;
  return env;
}

/**
 * `calculated_envvars` (CONTRACT §10): the environment a container sees, one entry per variable,
 * with the origin of the value that wins (image < platform < user). A variable appears in the
 * group of its winning origin. PLATFORM_AUTH is left out unless `includeSecrets`: views must not
 * hand out the credential.
 */
export function calculatedEnvvars(
  input: EnvInput,
  options: { includeSecrets?: boolean } = {},
): CalculatedEnvVar[] {
  const entries = new Map<string, { value: string; origin: EnvOrigin }>();
  const put = (vars: Record<string, string>, origin: EnvOrigin) => {
    for (const [key, value] of Object.entries(vars)) {
      entries.delete(key);
      entries.set(key, { value, origin });
    }
  };
  put(input.imageEnv ?? {}, "image");
  put(linkEnvironment(input), "platform");
  put(platformVariables(input, { includeSecrets: options.includeSecrets ?? false }), "platform");
  put(Object.fromEntries(input.spec.container_envvars.map((v) => [v.key, v.value])), "user");
  return [...entries].map(([key, { value, origin }]) => ({ key, value, origin }));
}

const RESTART: Record<Autorestart, RestartPolicy> = {
  OFF: { name: "no" },
  // 0 retries means no limit, as the platform's ON_FAILURE has none.
  ON_FAILURE: { name: "on-failure", maximumRetryCount: 0 },
  ALWAYS: { name: "always" },
};

const nonEmpty = <T>(list: readonly T[]): T[] | undefined => (list.length > 0 ? [...list] : undefined);
const orUndefined = (s: string): string | undefined => (s === "" ? undefined : s);

/** Volumes and host directories as Docker bind strings. */
function binds(spec: ServiceSpec): string[] {
  const out: string[] = [];
  for (const b of spec.bindings) {
    if (b.container_path === null) continue; // volumes_from: see volumesFromRefs
    if (b.host_path !== null) out.push(`${b.host_path}:${b.container_path}${b.rewritable ? "" : ":ro"}`);
    // Only a container path: Docker creates an anonymous volume, removed with the container. It
    // starts empty, so read-only would be useless (and Docker refuses `/path:ro` without a source).
    else out.push(b.container_path);
  }
  return out;
}

/** Builds the engine's ContainerSpec for one container of a service. */
export function buildContainerSpec(input: ContainerSpecInput): ContainerSpec {
  const { spec, service, container, node } = input;
  const hostNetwork = spec.net === "host";

  // Every port is exposed (so links see it); published ones are also bound on the node. With
  // host networking the container uses the node's ports directly and Docker ignores bindings.
  const portBindings: PortBinding[] = hostNetwork
    ? []
    : spec.container_ports
        .filter((p) => p.published)
        .map((p) =>
          p.outer_port === null
            ? { containerPort: p.inner_port, protocol: p.protocol }
            : { containerPort: p.inner_port, protocol: p.protocol, hostPort: p.outer_port },
        );
  const devices: DeviceMapping[] = [];
  for (const device of spec.devices) {
    const parsed = parseDevice(device);
    if (parsed) devices.push(parsed);
  }
  const fromLinks = linkHosts(input.links);
  const extraHosts = [...spec.extra_hosts, ...fromLinks];
  const env = containerEnv(input);
  const userKeys = new Set(spec.container_envvars.map((v) => v.key));
  const platformKeys = Object.keys(env).filter((k) => !userKeys.has(k));

  return {
    name: engineContainerName(container),
    image: spec.image_name,
    env,
    cmd: spec.run_command === null ? undefined : splitShellWords(spec.run_command),
    entrypoint: spec.entrypoint === null ? undefined : splitShellWords(spec.entrypoint),
    // Berth's labels last: a user label can never claim another owner.
    labels: {
      ...spec.labels,
      [PLATFORM_ENV_LABEL]: platformKeys.join(","),
      [LINK_HOSTS_LABEL]: JSON.stringify(fromLinks),
      [LABELS.container]: container.uuid,
      [LABELS.service]: service.uuid,
      [LABELS.namespace]: service.namespace,
      [LABELS.node]: node.uuid,
    },
    exposedPorts: nonEmpty(
      spec.container_ports.map((p) => ({ containerPort: p.inner_port, protocol: p.protocol })),
    ),
    portBindings: nonEmpty(portBindings),
    binds: nonEmpty(binds(spec)),
    volumesFrom: nonEmpty(input.volumesFrom),
    capAdd: nonEmpty(spec.cap_add),
    capDrop: nonEmpty(spec.cap_drop),
    devices: nonEmpty(devices),
    dns: nonEmpty(spec.dns),
    dnsSearch: nonEmpty(spec.dns_search),
    extraHosts: nonEmpty(extraHosts),
    cpuShares: spec.cpu_shares ?? undefined,
    cpuset: orUndefined(spec.cpuset),
    memoryMb: spec.memory ?? undefined,
    memorySwapMb: spec.memory_swap ?? undefined,
    privileged: spec.privileged,
    readOnly: spec.read_only,
    networkMode: spec.net,
    pidMode: spec.pid === "host" ? "host" : undefined,
    // "/" is the spec's default and means "not set": passing it would override the WORKDIR of
    // every image that has one, which is not what a user who left it out asked for.
    workingDir: spec.working_dir === "/" ? undefined : spec.working_dir,
    user: orUndefined(spec.user),
    // The container's own name by default, as its links and FQDN call it. On the host network
    // the container shares the node's identity, so Berth does not rename it.
    hostname: orUndefined(spec.hostname) ?? (hostNetwork ? undefined : hostLabel(container.name)),
    domainname: orUndefined(spec.domainname),
    macAddress: orUndefined(spec.mac_address),
    tty: spec.tty,
    openStdin: spec.stdin_open,
    cgroupParent: orUndefined(spec.cgroup_parent),
    securityOpt: nonEmpty(spec.security_opt),
    restartPolicy: RESTART[spec.autorestart],
    // How the engine stops it (domain/stop.ts); unset: the image's signal, the engine's timeout.
    ...(spec.stop_signal ? { stopSignal: spec.stop_signal } : {}),
    ...(typeof spec.stop_grace_period === "number" ? { stopTimeoutS: spec.stop_grace_period } : {}),
    // The service's health check, run by the engine inside the container (domain/health.ts);
    // without one the image's HEALTHCHECK applies.
    ...(spec.health_check ? { healthcheck: engineHealthcheck(spec.health_check) } : {}),
  };
}

/** Container names fit a host name label (63) for every valid service name; this guards the rest. */
function hostLabel(name: string): string {
  return name.slice(0, 63).replace(/-+$/, "");
}
