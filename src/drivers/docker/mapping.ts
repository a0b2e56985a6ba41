// Translation between Berth's plain engine types and the Engine API's JSON. Pure functions, so the
// mapping rules can be read (and tested) apart from the HTTP calls.
import type Dockerode from "dockerode";
import type { HealthReport } from "../../domain/health.ts";
import {
  type ContainerEvent,
  type ContainerSpec,
  type ContainerState,
  type ContainerSummary,
  type ContainerView,
  envToList,
  envToRecord,
  type PortKey,
  portKey,
  type RestartPolicy,
} from "../engine.ts";
import { parseDockerTime } from "./streams.ts";

const MB = 1024 * 1024;

/** Options that a remapping engine runs only in the host's user namespace (Docker refuses them otherwise). */
export function needsHostUserNamespace(spec: ContainerSpec): boolean {
  return spec.privileged === true || spec.networkMode === "host" || spec.pidMode === "host";
}

/** The body of `POST /containers/create`. Undefined fields are dropped by JSON encoding. */
export function createBody(spec: ContainerSpec): Dockerode.ContainerCreateOptions {
  const exposed: Record<string, Record<string, never>> = {};
  for (const port of spec.exposedPorts ?? []) exposed[portKey(port)] = {};
  const bindings: Record<string, Array<{ HostIp: string; HostPort: string }>> = {};
  for (const binding of spec.portBindings ?? []) {
    const key = portKey(binding);
    exposed[key] = {};
    // An empty HostPort asks the engine to choose a free port.
    const list = bindings[key] ?? [];
    list.push({ HostIp: binding.hostIp ?? "", HostPort: binding.hostPort ? String(binding.hostPort) : "" });
    bindings[key] = list;
  }
  const hasPorts = Object.keys(exposed).length > 0;
  return {
    Image: spec.image,
    Env: spec.env ? envToList(spec.env) : undefined,
    Cmd: spec.cmd,
    Entrypoint: spec.entrypoint,
    Labels: spec.labels,
    ExposedPorts: hasPorts ? exposed : undefined,
    WorkingDir: spec.workingDir,
    User: spec.user,
    Hostname: spec.hostname,
    Domainname: spec.domainname,
    MacAddress: spec.macAddress,
    Tty: spec.tty ?? false,
    OpenStdin: spec.openStdin ?? false,
    StopSignal: spec.stopSignal,
    StopTimeout: spec.stopTimeoutS,
    Healthcheck: healthcheckBody(spec),
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    HostConfig: {
      Binds: spec.binds,
      VolumesFrom: spec.volumesFrom,
      CapAdd: spec.capAdd,
      CapDrop: spec.capDrop,
      Devices: spec.devices?.map((device) => ({
        PathOnHost: device.pathOnHost,
        PathInContainer: device.pathInContainer,
        CgroupPermissions: device.cgroupPermissions ?? "rwm",
      })),
      Dns: spec.dns,
      DnsSearch: spec.dnsSearch,
      ExtraHosts: spec.extraHosts,
      CpuShares: spec.cpuShares,
      CpusetCpus: spec.cpuset,
      Memory: spec.memoryMb === undefined ? undefined : spec.memoryMb * MB,
      MemorySwap:
        spec.memorySwapMb === undefined ? undefined : spec.memorySwapMb < 0 ? -1 : spec.memorySwapMb * MB,
      Privileged: spec.privileged,
      // An engine that remaps user namespaces refuses privileged containers and the host's network
      // or PID namespace unless the container stays in the host's user namespace. Only containers an
      // administrator's policy allowed these options ask for it; on other engines it changes nothing.
      UsernsMode: needsHostUserNamespace(spec) ? "host" : undefined,
      ReadonlyRootfs: spec.readOnly,
      NetworkMode: spec.networkMode,
      PidMode: spec.pidMode,
      CgroupParent: spec.cgroupParent,
      SecurityOpt: spec.securityOpt,
      PortBindings: Object.keys(bindings).length > 0 ? bindings : undefined,
      RestartPolicy: spec.restartPolicy
        ? { Name: spec.restartPolicy.name, MaximumRetryCount: spec.restartPolicy.maximumRetryCount ?? 0 }
        : undefined,
    },
  };
}

const NS_PER_MS = 1_000_000;

/**
 * Docker's HealthConfig: durations in nanoseconds (0 means the engine's default, so a 0 start
 * period is sent as 0, which means none). Absent: the image's HEALTHCHECK applies.
 */
function healthcheckBody(spec: ContainerSpec): Dockerode.ContainerCreateOptions["Healthcheck"] {
  const h = spec.healthcheck;
  if (!h) return undefined;
  if (h.test[0] === "NONE") return { Test: ["NONE"] };
  return {
    Test: h.test,
    Interval: h.intervalMs === undefined ? undefined : h.intervalMs * NS_PER_MS,
    Timeout: h.timeoutMs === undefined ? undefined : h.timeoutMs * NS_PER_MS,
    Retries: h.retries,
    StartPeriod: h.startPeriodMs === undefined ? undefined : h.startPeriodMs * NS_PER_MS,
  };
}

/** Docker's State.Health; undefined when the container has no check ("none" or absent). */
function healthReport(info: Dockerode.ContainerInspectInfo): HealthReport | undefined {
  const h = (info.State as { Health?: DockerHealth }).Health;
  if (!h || (h.Status !== "starting" && h.Status !== "healthy" && h.Status !== "unhealthy")) return undefined;
  const last = h.Log?.at(-1);
  return {
    status: h.Status,
    failingStreak: h.FailingStreak ?? 0,
    lastOutput: (last?.Output ?? "").trim().slice(-2000),
    lastExitCode: last?.ExitCode,
  };
}

interface DockerHealth {
  Status?: string;
  FailingStreak?: number;
  Log?: { ExitCode?: number; Output?: string }[] | null;
}

/** Docker's status words; "removing" is a moment during removal and reads as exited. */
export function normalizeState(status: string): ContainerState {
  switch (status) {
    case "created":
    case "running":
    case "paused":
    case "restarting":
    case "exited":
    case "dead":
      return status;
    case "removing":
      return "exited";
    default:
      return "dead";
  }
}

function restartPolicy(name: string | undefined, maximumRetryCount: number | undefined): RestartPolicy {
  if (name === "always" || name === "on-failure") {
    return name === "on-failure" ? { name, maximumRetryCount: maximumRetryCount ?? 0 } : { name };
  }
  // "unless-stopped" is not something Berth creates; it behaves like "always" for our purposes.
  if (name === "unless-stopped") return { name: "always" };
  return { name: "no" };
}

/** Docker reports 0 for containers that never exited; only a finished run (or a failed start) has a code. */
function exitCode(state: ContainerState, code: number): number | undefined {
  if (state === "running" || state === "paused") return undefined;
  if (state === "created") return code === 0 ? undefined : code;
  return code;
}

export function containerView(info: Dockerode.ContainerInspectInfo): ContainerView {
  const state = normalizeState(info.State.Status);
  const running = state === "running" || state === "paused";
  const networks = Object.values(info.NetworkSettings?.Networks ?? {});
  const legacyIp = (info.NetworkSettings as { IPAddress?: string } | undefined)?.IPAddress;
  const ip = legacyIp || networks.find((network) => network.IPAddress)?.IPAddress || undefined;
  const ports: Partial<Record<PortKey, number>> = {};
  for (const [key, bindings] of Object.entries(info.NetworkSettings?.Ports ?? {})) {
    // Exposed but unpublished ports are listed with null bindings; only published ones count.
    const hostPort = bindings?.find((binding) => binding.HostPort)?.HostPort;
    if (hostPort) ports[key as PortKey] = Number(hostPort);
  }
  return {
    id: info.Id,
    name: info.Name.replace(/^\//, ""),
    image: info.Config.Image,
    imageId: info.Image,
    state,
    running,
    exitCode: exitCode(state, info.State.ExitCode),
    createdAt: parseDockerTime(info.Created) ?? 0,
    startedAt: parseDockerTime(info.State.StartedAt),
    finishedAt: parseDockerTime(info.State.FinishedAt),
    ipAddress: running ? ip : undefined,
    ports: running ? ports : {},
    labels: info.Config.Labels ?? {},
    env: envToRecord(info.Config.Env),
    restartCount: info.RestartCount,
    restartPolicy: restartPolicy(
      info.HostConfig.RestartPolicy?.Name,
      info.HostConfig.RestartPolicy?.MaximumRetryCount,
    ),
    oomKilled: info.State.OOMKilled,
    error: info.State.Error ?? "",
    ...healthOf(info),
  };
}

function healthOf(info: Dockerode.ContainerInspectInfo): { health?: HealthReport } {
  const health = healthReport(info);
  return health ? { health } : {};
}

export function containerSummary(info: Dockerode.ContainerInfo): ContainerSummary {
  return {
    id: info.Id,
    name: (info.Names[0] ?? "").replace(/^\//, ""),
    image: info.Image,
    imageId: info.ImageID,
    state: normalizeState(info.State),
    labels: info.Labels ?? {},
    createdAt: info.Created * 1000,
  };
}

/** The JSON of one `/events` message, as far as Berth reads it. */
export interface DockerEventMessage {
  Type?: string;
  Action?: string;
  status?: string;
  id?: string;
  Actor?: { ID?: string; Attributes?: Record<string, string> };
  time?: number;
  timeNano?: number;
}

/**
 * Docker mixes the container's labels with its own attributes (image, name, exitCode, signal, execID)
 * in one map; those keys are taken out, so a label with one of these names cannot be told apart.
 */
const EVENT_ATTRIBUTES = new Set(["image", "name", "exitCode", "signal", "execID"]);

export function containerEvent(message: DockerEventMessage): ContainerEvent | undefined {
  if (message.Type !== "container") return undefined;
  const rawAction = message.Action ?? message.status ?? "";
  // Exec and health actions carry a suffix ("exec_start: sh -c …", "health_status: healthy").
  const action = rawAction.split(":")[0]!.trim();
  const attributes = message.Actor?.Attributes ?? {};
  const labels: Record<string, string> = {};
  for (const [key, value] of Object.entries(attributes)) if (!EVENT_ATTRIBUTES.has(key)) labels[key] = value;
  const event: ContainerEvent = {
    type: "container",
    action,
    id: message.Actor?.ID ?? message.id ?? "",
    name: attributes.name ?? "",
    image: attributes.image ?? "",
    labels,
    timeMs: message.timeNano ? Math.floor(message.timeNano / 1e6) : (message.time ?? 0) * 1000,
  };
  if (attributes.exitCode !== undefined) event.exitCode = Number(attributes.exitCode);
  if (attributes.signal !== undefined) event.signal = attributes.signal;
  return event;
}
