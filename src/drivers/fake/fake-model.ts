// What the fake engine (fake-engine.ts) keeps: images and containers as records, their options, and
// the small helpers over them (Docker-style ids, addresses, image configs, shared host lists).

import { randomBytes } from "node:crypto";
import type { EngineHealthcheck } from "../../domain/health.ts";
import {
  type AsyncQueue,
  type ContainerSpec,
  type ContainerState,
  type ContainerSummary,
  type ContainerView,
  type ExposedPort,
  envToList,
  type LogLine,
  type OutputStream,
  type PortKey,
  portKey,
} from "../engine.ts";
import type { FakeHealthMonitor } from "./health.ts";
import type { FakeProcess } from "./shell.ts";

export interface FakeImage {
  ref: string;
  cmd?: string[];
  entrypoint?: string[];
  env?: Record<string, string>;
  exposedPorts?: ExposedPort[];
  workingDir?: string;
  labels?: Record<string, string>;
  /**
   * Long-running programs the image has besides the busybox-like builtins (servers that run until
   * stopped). By default, the program its entrypoint or command names.
   */
  programs?: string[];
  /** The image's HEALTHCHECK (domain/health.ts EngineHealthcheck). */
  healthcheck?: EngineHealthcheck;
  /** Ports its servers listen on while its main process runs, and the HTTP status they answer (200). */
  serves?: { ports: number[]; status?: number };
}

export interface FakeRegistryImage extends FakeImage {
  /** Credentials the registry wants for this image; anyone may pull it when absent. */
  auth?: { username: string; password: string };
}

export interface FakeEngineOptions {
  id?: string;
  name?: string;
  cpus?: number;
  memoryMb?: number;
  diskGb?: number;
  engineVersion?: string;
  apiVersion?: string;
  operatingSystem?: string;
  /** Images present on the engine from the start. Defaults to `busybox:local`. */
  images?: FakeImage[];
  /** Images a pull can fetch; any other reference fails like a registry without it. */
  registry?: FakeRegistryImage[];
  /** The bridge network containers get addresses from; the first address is the gateway. */
  subnet?: string;
  /** Host ports handed out for bindings without one, inclusive (Docker's default range). */
  portRange?: [number, number];
  /** Lines kept per container; Docker keeps everything, the fake bounds memory for long simulations. */
  maxLogLines?: number;
  now?: () => number;
}

export const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

export const FAKE_BUSYBOX: FakeImage = { ref: "busybox:local", cmd: ["sh"] };

export interface StoredImage {
  id: string;
  config: ImageConfig;
  programs: Set<string>;
}

/** The part of an image's config (as in `docker save`) that shapes its containers. */
export interface ImageConfig {
  Cmd?: string[] | null;
  Entrypoint?: string[] | null;
  Env?: string[] | null;
  ExposedPorts?: Record<string, object> | null;
  WorkingDir?: string;
  Labels?: Record<string, string> | null;
  Healthcheck?: EngineHealthcheck | null;
  /** The fake's own: what the image's servers answer (FakeImage.serves). */
  Serves?: { ports: number[]; status: number } | null;
}

export interface FakeContainer {
  id: string;
  name: string;
  spec: ContainerSpec;
  image: StoredImage;
  env: Record<string, string>;
  hostname: string;
  /** The `host:ip` entries of its /etc/hosts beyond the defaults (extra hosts, rewritten ones). */
  hosts: string[];
  createdAt: number;
  state: ContainerState;
  exitCode: number | undefined;
  startedAt: number | undefined;
  finishedAt: number | undefined;
  ipAddress: string | undefined;
  ports: Partial<Record<PortKey, number>>;
  restartCount: number;
  restartDelayMs: number;
  restartTimer: NodeJS.Timeout | undefined;
  oomKilled: boolean;
  error: string;
  /** Set by stop, a SIGKILL or the stop signal: the restart policy no longer applies (Docker's rule). */
  manuallyStopped: boolean;
  process: FakeProcess | undefined;
  stdin: AsyncQueue<string> | undefined;
  execs: Set<FakeProcess>;
  logs: LogLine[];
  partial: Record<OutputStream, string>;
  followers: Set<AsyncQueue<LogLine>>;
  /** The health checks of its current run (its own, or its image's HEALTHCHECK). */
  health: FakeHealthMonitor | undefined;
}

export const NAME_PATTERN = /^\/?[a-zA-Z0-9][a-zA-Z0-9_.-]+$/;
export const EVENTS_REMEMBERED = 256;

export function ipToNumber(ip: string): number {
  return ip.split(".").reduce((total, part) => total * 256 + Number(part), 0);
}

export function numberToIp(value: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(value / 2 ** shift) % 256).join(".");
}

/** Random bytes drawn from a pool refilled 8 KiB at a time (one call per id costs more than the id). */
const RANDOM_POOL_BYTES = 8192;
let randomPool = Buffer.alloc(0);
let randomAt = 0;

export function randomHex(bytes: number): string {
  if (randomAt + bytes > randomPool.length) {
    randomPool = randomBytes(Math.max(RANDOM_POOL_BYTES, bytes));
    randomAt = 0;
  }
  randomAt += bytes;
  return randomPool.toString("hex", randomAt - bytes, randomAt);
}

export function dockerStyleId(): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  const bytes = randomBytes(48);
  const groups: string[] = [];
  for (let group = 0; group < 12; group += 1) {
    let text = "";
    for (let i = 0; i < 4; i += 1) text += alphabet[bytes[group * 4 + i]! % 32];
    groups.push(text);
  }
  return groups.join(":");
}

const basename = (path: string): string => path.slice(path.lastIndexOf("/") + 1);

export function imageConfig(image: FakeImage): ImageConfig {
  const exposed: Record<string, object> = {};
  for (const port of image.exposedPorts ?? []) exposed[portKey(port)] = {};
  return {
    Cmd: image.cmd ?? null,
    Entrypoint: image.entrypoint ?? null,
    Env: image.env ? envToList(image.env) : null,
    ExposedPorts: image.exposedPorts ? exposed : null,
    WorkingDir: image.workingDir ?? "",
    Labels: image.labels ?? null,
    ...(image.healthcheck ? { Healthcheck: image.healthcheck } : {}),
    ...(image.serves ? { Serves: { ports: image.serves.ports, status: image.serves.status ?? 200 } } : {}),
  };
}

export function configJson(config: ImageConfig): string {
  return JSON.stringify({
    architecture: "amd64",
    os: "linux",
    config,
    rootfs: { type: "layers", diff_ids: [] },
  });
}

export function defaultPrograms(config: ImageConfig): Set<string> {
  const program = config.Entrypoint?.[0] ?? config.Cmd?.[0];
  return new Set(program ? [basename(program)] : []);
}

/**
 * Extra-hosts lists, shared by every fake container given the same entries. A simulated cluster
 * gives each container a hosts entry per node of its namespace (CONTRACT §13); a real engine keeps
 * them on its own disk, so the fake keeps one frozen copy per distinct list rather than one per
 * container (at 1,000 nodes, that was most of a simulation's memory). Lists are only ever replaced,
 * never changed in place.
 */
const hostLists = new Map<string, readonly string[]>();
const HOST_LISTS_MAX = 256;

/** The list shared last: a burst of creates mostly repeats it, and comparing is cheaper than a key. */
let lastHosts: readonly string[] = [];

export function sharedHosts(hosts: readonly string[] | undefined): string[] {
  if (!hosts?.length) return [];
  // A frozen list (callers that share one among their specs) cannot change: it is kept as it is.
  if (hosts === lastHosts || Object.isFrozen(hosts)) return hosts as string[];
  return sharedList(hosts) as string[];
}

function sharedList(hosts: readonly string[]): readonly string[] {
  if (hosts.length === lastHosts.length && hosts.every((h, i) => h === lastHosts[i])) {
    return lastHosts as string[];
  }
  const key = hosts.join("\n");
  let list = hostLists.get(key);
  if (!list) {
    if (hostLists.size >= HOST_LISTS_MAX) hostLists.clear();
    list = Object.freeze([...hosts]);
    hostLists.set(key, list);
  }
  lastHosts = list;
  return list as string[];
}

/**
 * The engine's own copy of a create request (the caller may change its object afterwards): plain
 * data copied deeply, the extra hosts shared (see sharedHosts). Unlike structuredClone it keeps the
 * strings themselves, which are immutable, so the copy costs no memory per string.
 */
export function copySpec(spec: ContainerSpec): ContainerSpec {
  const copy = <T>(v: T): T => {
    if (Array.isArray(v)) return v.map(copy) as T;
    if (v !== null && typeof v === "object") {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) out[k] = copy(x);
      return out as T;
    }
    return v;
  };
  const { extraHosts, ...rest } = spec;
  const out: ContainerSpec = copy(rest);
  if (extraHosts !== undefined) out.extraHosts = sharedHosts(extraHosts);
  return out;
}

/** What `docker inspect` shows of a container. */
export function viewOf(container: FakeContainer): ContainerView {
  const running = container.state === "running" || container.state === "paused";
  const policy = container.spec.restartPolicy ?? { name: "no" as const };
  return {
    id: container.id,
    name: container.name,
    image: container.spec.image,
    imageId: container.image.id,
    state: container.state,
    running,
    exitCode: container.exitCode,
    createdAt: container.createdAt,
    startedAt: container.startedAt,
    finishedAt: container.finishedAt,
    ipAddress: running ? container.ipAddress : undefined,
    ports: running ? { ...container.ports } : {},
    labels: { ...container.spec.labels },
    env: { ...container.env },
    restartCount: container.restartCount,
    restartPolicy:
      policy.name === "on-failure"
        ? { name: policy.name, maximumRetryCount: policy.maximumRetryCount ?? 0 }
        : { name: policy.name },
    oomKilled: container.oomKilled,
    error: container.error,
    ...(container.health ? { health: container.health.report() } : {}),
  };
}

/** What `docker ps` shows of a container. */
export function summaryOf(container: FakeContainer): ContainerSummary {
  return {
    id: container.id,
    name: container.name,
    image: container.spec.image,
    imageId: container.image.id,
    state: container.state,
    labels: { ...container.spec.labels },
    createdAt: container.createdAt,
  };
}

/** A container as Docker records it at create: no process, no address, nothing run yet. */
export function newFakeContainer(
  fields: Pick<
    FakeContainer,
    "id" | "name" | "spec" | "image" | "env" | "hostname" | "hosts" | "createdAt" | "state"
  >,
): FakeContainer {
  return {
    ...fields,
    exitCode: undefined,
    startedAt: undefined,
    finishedAt: undefined,
    ipAddress: undefined,
    ports: {},
    restartCount: 0,
    restartDelayMs: 0,
    restartTimer: undefined,
    oomKilled: false,
    error: "",
    manuallyStopped: false,
    process: undefined,
    stdin: undefined,
    execs: new Set(),
    logs: [],
    partial: { stdout: "", stderr: "" },
    followers: new Set(),
    health: undefined,
  };
}
