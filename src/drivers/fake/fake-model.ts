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
  envToRecord,
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
 * data copied deeply and frozen, the extra hosts shared (see sharedHosts). Unlike structuredClone it
 * keeps the strings themselves, which are immutable, so the copy costs no memory per string. A
 * field whose value equals the last create's (a service's command, ports, restart policy) shares
 * that copy: a simulated node's containers mostly come from a few services (issue 34).
 */
export function copySpec(spec: ContainerSpec): ContainerSpec {
  // Built key by key (not spread): specs of the same keys then share one hidden class, where a
  // spread copy gave each its own (half a kilobyte per container).
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(spec) as (keyof ContainerSpec)[]) {
    const value = spec[key];
    if (key === "extraHosts") out[key] = value === undefined ? value : sharedHosts(value as string[]);
    // Frozen: the engine never changes a container's labels, and its events share them (fake-events.ts).
    else if (key === "labels" || key === "env")
      out[key] =
        value === undefined
          ? value
          : Object.freeze(internedRecord(`${key}:`, value as Record<string, string>)!);
    else out[key] = value !== null && typeof value === "object" ? sharedField(key, value) : value;
  }
  return out as unknown as ContainerSpec;
}

function deepFrozenCopy<T>(v: T): T {
  if (Array.isArray(v)) return Object.freeze(v.map(deepFrozenCopy)) as T;
  if (v !== null && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = deepFrozenCopy(x);
    return Object.freeze(out) as T;
  }
  return v;
}

/** The last create's copy of each object-valued field, with its JSON (what an equal value matches). */
const lastFields = new Map<string, { json: string; value: unknown }>();

function sharedField<T>(key: string, value: T): T {
  const json = JSON.stringify(value);
  const last = lastFields.get(key);
  if (last?.json === json) return last.value as T;
  const copy = deepFrozenCopy(value);
  if (lastFields.size >= LAST_VALUES_MAX) lastFields.clear();
  lastFields.set(key, { json, value: copy });
  return copy;
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

/**
 * The members of a container's set that nobody has joined yet (its execs, its log followers): one
 * shared empty set, replaced by the container's own at the first `joined` (issue 34: two empty sets
 * per container were a tenth of a simulated container's memory). Adding to it is a bug, and throws.
 */
class NoMembers<T> extends Set<T> {
  override add(_value: T): this {
    throw new Error("a container's shared empty set is never added to: use joined()");
  }
}
const NO_MEMBERS: Set<never> = new NoMembers<never>();

export function noMembers<T>(): Set<T> {
  return NO_MEMBERS as Set<T>;
}

/** The container's own set in `field` (made at its first member), with `member` added. */
export function joined<K extends "execs" | "followers">(
  container: FakeContainer,
  field: K,
  member: FakeContainer[K] extends Set<infer T> ? T : never,
): void {
  let set = container[field] as Set<unknown>;
  if (set === NO_MEMBERS) {
    set = new Set();
    container[field] = set as FakeContainer[K];
  }
  set.add(member);
}

/** A container's output not yet ended by a newline: none (shared, frozen; output() makes its own). */
export const NO_PARTIAL: Readonly<Record<OutputStream, string>> = Object.freeze({ stdout: "", stderr: "" });

/**
 * The environment a container's processes get from the engine: the image's, then the create
 * request's. Without image variables it is the request's own (the engine's copy) rather than a
 * copy of it: one object per container fewer.
 */
export function containerEnv(
  imageEnv: readonly string[] | null | undefined,
  specEnv: Record<string, string> | undefined,
): Record<string, string> {
  if (!imageEnv?.length) return specEnv ?? {};
  return { ...envToRecord(imageEnv), ...specEnv };
}

/**
 * The values of a create request's labels and environment that repeat from one container to the
 * next (a service's image, its platform-env list, its API host) kept once rather than once per
 * container: each key remembers the last value it had, and an equal value takes that one's place.
 * Values that differ per container (ids) simply replace it. Bounded by the number of keys.
 */
const lastValues = new Map<string, string>();
const LAST_VALUES_MAX = 4096;

function interned(key: string, value: string): string {
  const last = lastValues.get(key);
  if (last === value) return last;
  if (lastValues.size >= LAST_VALUES_MAX) lastValues.clear();
  lastValues.set(key, value);
  return value;
}

function internedRecord(
  scope: string,
  record: Record<string, string> | undefined,
): Record<string, string> | undefined {
  if (record === undefined || record === null || typeof record !== "object") return record;
  const out: Record<string, string> = {};
  for (const key in record) {
    const value = record[key];
    out[key] = typeof value === "string" ? interned(`${scope}${key}`, value) : value!;
  }
  return out;
}

/** A container as Docker records it at create: no process, no address, nothing run yet. */
export function newFakeContainer(
  fields: Pick<
    FakeContainer,
    "id" | "name" | "spec" | "image" | "env" | "hostname" | "hosts" | "createdAt" | "state"
  >,
): FakeContainer {
  // Every field named in one literal: containers share one hidden class (a spread gave each its own).
  return {
    id: fields.id,
    name: fields.name,
    spec: fields.spec,
    image: fields.image,
    env: fields.env,
    hostname: fields.hostname,
    hosts: fields.hosts,
    createdAt: fields.createdAt,
    state: fields.state,
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
    execs: noMembers(),
    logs: [],
    partial: NO_PARTIAL as Record<OutputStream, string>,
    followers: noMembers(),
    health: undefined,
  };
}
