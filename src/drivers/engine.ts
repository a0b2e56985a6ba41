// The Engine interface: everything Berth needs from one container engine (a node's Docker daemon).
// Two implementations keep the same observable behaviour: drivers/docker (the Engine API through
// dockerode) and drivers/fake (in memory, for simulated nodes and fast tests). Only drivers/ talks to
// engines; the rest of the platform sees these plain types and never a dockerode object.
import type { Readable } from "node:stream";
import type { EngineHealthcheck, HealthReport } from "../domain/health.ts";

export type EngineErrorKind = "not_found" | "conflict" | "unreachable" | "image_not_found" | "other";

/** An engine refused or failed a call. `message` is the engine's own reason, so users can act on it. */
export class EngineError extends Error {
  override readonly name = "EngineError";

  constructor(
    readonly kind: EngineErrorKind,
    message: string,
    /** The engine's HTTP status when it answered; undefined when it could not be reached. */
    readonly statusCode?: number,
  ) {
    super(message);
  }
}

export function isEngineError(error: unknown, kind?: EngineErrorKind): error is EngineError {
  return error instanceof EngineError && (kind === undefined || error.kind === kind);
}

export interface EngineInfo {
  /** The engine's own stable id (Docker's `ID`); distinct per engine. */
  id: string;
  /** The engine host's name. */
  name: string;
  cpus: number;
  memoryMb: number;
  /** Size of the filesystem holding the engine's data root; undefined when it cannot be known. */
  diskGb: number | undefined;
  engineVersion: string;
  apiVersion: string;
  /** The graph driver, for example "overlay2". */
  storageDriver: string;
  /** Docker no longer reports an execution driver; "native" is what it used to say. */
  execDriver: string;
  operatingSystem: string;
}

export interface RegistryAuth {
  username: string;
  password: string;
  /** The registry host the credentials are for, for example "registry.example.com:5000". */
  serverAddress: string;
}

export interface PullImageOptions {
  auth?: RegistryAuth;
  /** Receives each progress line the engine reports, for action logs. */
  onProgress?: (line: string) => void;
  signal?: AbortSignal;
}

export interface PushImageOptions {
  /** Credentials for the registry the reference names; none for a registry that takes anonymous pushes. */
  auth?: RegistryAuth;
  /** Receives each progress line the engine reports. */
  onProgress?: (line: string) => void;
  signal?: AbortSignal;
}

export type PortProtocol = "tcp" | "udp";

export interface ExposedPort {
  containerPort: number;
  /** Defaults to "tcp". */
  protocol?: PortProtocol;
}

export interface PortBinding extends ExposedPort {
  /** Without a host port the engine picks a free one and reports it in `ContainerView.ports`. */
  hostPort?: number;
  /** Host address to listen on; the engine's default when absent. */
  hostIp?: string;
}

export interface DeviceMapping {
  pathOnHost: string;
  pathInContainer: string;
  /** Defaults to "rwm". */
  cgroupPermissions?: string;
}

export type RestartPolicyName = "no" | "on-failure" | "always";

export interface RestartPolicy {
  name: RestartPolicyName;
  /** Only for "on-failure": 0 (or absent) means no limit. */
  maximumRetryCount?: number;
}

/** What Berth asks an engine to create. Absent fields take the image's or the engine's defaults. */
export interface ContainerSpec {
  name?: string;
  image: string;
  env?: Record<string, string>;
  cmd?: string[];
  entrypoint?: string[];
  labels?: Record<string, string>;
  exposedPorts?: ExposedPort[];
  /** Bound ports are exposed too; they need not be repeated in `exposedPorts`. */
  portBindings?: PortBinding[];
  /** Docker bind strings: `host-path:container-path[:ro]` or `volume:container-path`. */
  binds?: string[];
  volumesFrom?: string[];
  capAdd?: string[];
  capDrop?: string[];
  devices?: DeviceMapping[];
  dns?: string[];
  dnsSearch?: string[];
  /** `host:ip` entries added to the container's /etc/hosts. */
  extraHosts?: string[];
  cpuShares?: number;
  /** CPUs the container may run on, for example "0-1". */
  cpuset?: string;
  memoryMb?: number;
  /** Memory plus swap; -1 means unlimited swap. */
  memorySwapMb?: number;
  privileged?: boolean;
  readOnly?: boolean;
  networkMode?: string;
  pidMode?: string;
  workingDir?: string;
  user?: string;
  hostname?: string;
  domainname?: string;
  macAddress?: string;
  tty?: boolean;
  openStdin?: boolean;
  cgroupParent?: string;
  securityOpt?: string[];
  restartPolicy?: RestartPolicy;
  /** The signal a stop sends first (Docker's StopSignal); the image's, or SIGTERM, when absent. */
  stopSignal?: string;
  /**
   * Seconds a stop waits before it kills when its caller names no timeout: `docker stop` by hand
   * (Docker's StopTimeout). Berth's own stops always name one.
   */
  stopTimeoutS?: number;
  healthcheck?: EngineHealthcheck; // absent: the image's HEALTHCHECK applies; ["NONE"] turns it off
}

export type ContainerState = "created" | "running" | "paused" | "restarting" | "exited" | "dead";

/** Ports are keyed like the engine keys them: "80/tcp". */
export type PortKey = `${number}/${PortProtocol}`;

/** The engine's view of one container, normalized. Times are epoch milliseconds. */
export interface ContainerView {
  id: string;
  /** Without Docker's leading slash. */
  name: string;
  /** The image reference the container was created from. */
  image: string;
  imageId: string;
  state: ContainerState;
  /** True while a process exists (running or paused); a restarting container has none. */
  running: boolean;
  /**
   * The exit code of the last run; undefined while running and before the first exit (Docker clears it
   * at every start). A failed start leaves the container "created" with code 127 or 126.
   */
  exitCode: number | undefined;
  createdAt: number;
  startedAt: number | undefined;
  finishedAt: number | undefined;
  /** The address on the engine's network; undefined while the container is not running. */
  ipAddress: string | undefined;
  /** Published ports only: inner port → host port. Empty while the container is not running. */
  ports: Partial<Record<PortKey, number>>;
  labels: Record<string, string>;
  env: Record<string, string>;
  restartCount: number;
  restartPolicy: RestartPolicy;
  oomKilled: boolean;
  /** The engine's last error for this container (for example a failed start); empty when none. */
  error: string;
  health?: HealthReport; // Docker's State.Health; undefined when it has no check
}

export interface ContainerSummary {
  id: string;
  name: string;
  image: string;
  imageId: string;
  state: ContainerState;
  labels: Record<string, string>;
  createdAt: number;
}

export interface ListContainersOptions {
  /** Only containers carrying every one of these labels with these values. */
  labels?: Record<string, string>;
  /** Include containers that are not running. */
  all?: boolean;
}

export interface StopContainerOptions {
  /** Seconds between the stop signal (SIGTERM unless the container names another) and SIGKILL; 10 when absent. */
  timeoutS?: number;
}

/** What a stop came to. */
export interface StopOutcome {
  /** The command did not stop within the timeout after the stop signal: the engine killed it. */
  killed: boolean;
}

export interface KillContainerOptions {
  /** Defaults to "SIGKILL". */
  signal?: string;
}

export interface RemoveContainerOptions {
  /** Kill a running container first instead of refusing. */
  force?: boolean;
  /** Also remove the container's anonymous volumes. */
  removeVolumes?: boolean;
}

export type OutputStream = "stdout" | "stderr";

export interface LogLine {
  stream: OutputStream;
  /** One line as the container printed it, trailing newline kept (a last partial line has none). */
  line: string;
  timestampMs: number;
}

export interface LogsOptions {
  /** Only the last N lines already written (counted across stdout and stderr); all when absent. */
  tail?: number;
  /** Keep delivering new lines until the container stops or the signal aborts. */
  follow?: boolean;
  signal?: AbortSignal;
}

export interface ExecOptions {
  cmd: string[];
  tty?: boolean;
  env?: Record<string, string>;
  user?: string;
  workingDir?: string;
  signal?: AbortSignal;
}

export interface ExecOutput {
  stream: OutputStream;
  data: Buffer;
}

/** A command running inside a container. */
export interface ExecSession {
  write(data: string | Uint8Array): void;
  /** Closes stdin, so programs reading it (`cat`) see the end of input. */
  end(): void;
  /** Output as it arrives; with a tty everything comes as stdout. */
  output: AsyncIterable<ExecOutput>;
  /** Resolves with the command's exit code once it has finished. */
  exitCode: Promise<number>;
  /** Sets the terminal size of a tty exec (rows × columns); does nothing without a tty. */
  resize(size: TerminalSize): Promise<void>;
}

export interface TerminalSize {
  rows: number;
  cols: number;
}

/** Actions as Docker names them; exec actions lose their command suffix ("exec_start: sh" → "exec_start"). */
export type ContainerAction =
  | "create"
  | "start"
  | "die"
  | "stop"
  | "kill"
  | "destroy"
  | "restart"
  | "oom"
  | "pause"
  | "unpause"
  | "rename"
  | "exec_create"
  | "exec_start"
  | "exec_die"
  | (string & {});

export interface ContainerEvent {
  type: "container";
  action: ContainerAction;
  id: string;
  /** The container's name, without a leading slash. */
  name: string;
  image: string;
  /** Present on "die" (and "exec_die"). */
  exitCode?: number;
  /** Present on "kill", for example "9". */
  signal?: string;
  labels: Record<string, string>;
  timeMs: number;
}

export interface EventsOptions {
  signal?: AbortSignal;
  /** Replay events from this time (epoch ms) before live ones, as far back as the engine remembers. */
  since?: number;
}

export interface Engine {
  /** Who the engine is; `signal` ends the call (a probe's timeout), and with it the engine's answer. */
  info(options?: { signal?: AbortSignal }): Promise<EngineInfo>;
  /** Resolves when the engine answers; throws an EngineError of kind "unreachable" within a few seconds otherwise. */
  ping(): Promise<void>;

  hasImage(ref: string): Promise<boolean>;
  /** Throws kind "image_not_found" when the registry has no such image, with the engine's reason. */
  pullImage(ref: string, options?: PullImageOptions): Promise<void>;
  /** Loads a `docker save` archive; resolves with the references (or ids) the engine reports loaded. */
  loadImage(tar: Readable): Promise<string[]>;
  /** The image's id ("sha256:…"), or undefined when the engine does not have it. */
  imageId(ref: string): Promise<string | undefined>;
  /** Gives an image the engine has another reference (`docker tag`); kind "image_not_found" without it. */
  tagImage(source: string, target: string): Promise<void>;
  /** Pushes a reference the engine has to the registry it names; throws with the registry's reason. */
  pushImage(ref: string, options?: PushImageOptions): Promise<void>;

  /** Resolves with the new container's id. */
  createContainer(spec: ContainerSpec): Promise<string>;
  /** Starting a running container does nothing. */
  startContainer(id: string): Promise<void>;
  /** Stopping a container that is not running does nothing. */
  stopContainer(id: string, options?: StopContainerOptions): Promise<StopOutcome>;
  killContainer(id: string, options?: KillContainerOptions): Promise<void>;
  removeContainer(id: string, options?: RemoveContainerOptions): Promise<void>;
  /** Accepts an id, an unambiguous id prefix or a name; undefined when there is no such container. */
  inspectContainer(id: string): Promise<ContainerView | undefined>;
  listContainers(options?: ListContainersOptions): Promise<ContainerSummary[]>;

  logs(id: string, options?: LogsOptions): AsyncIterable<LogLine>;
  exec(id: string, options: ExecOptions): Promise<ExecSession>;
  /**
   * Replaces host entries (`host:ip`, the extra-hosts form) in a running container's /etc/hosts:
   * the `remove` entries (given at create or by an earlier call) go, the `add` entries are appended.
   * Docker has no API for it: the driver runs a fixed script with the image's `sh`, so an image
   * without a shell cannot follow (kind "other", with the reason); kind "conflict" when the
   * container is not running.
   */
  replaceHostEntries(id: string, entries: { remove: string[]; add: string[] }): Promise<void>;
  /** Container events only, in the order the engine reports them. */
  events(options?: EventsOptions): AsyncIterable<ContainerEvent>;
}

/**
 * How long after its output ends an exec may take to report its exit code. The output also ends when
 * the connection closes while the command keeps running (a tty command whose stdin was closed).
 */
export const EXEC_EXIT_WAIT_MS = 5000;

export function execStillRunning(execId: string): EngineError {
  return new EngineError(
    "other",
    `exec ${execId}: the output ended but the command is still running (with a tty, closing stdin does not end it; send Ctrl-D)`,
  );
}

/** Splits `KEY=value` strings as engines report environments; a bare `KEY` maps to "". */
export function envToRecord(env: readonly string[] | null | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of env ?? []) {
    const eq = entry.indexOf("=");
    if (eq < 0) out[entry] = "";
    else out[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return out;
}

export function envToList(env: Record<string, string> | undefined): string[] {
  return Object.entries(env ?? {}).map(([key, value]) => `${key}=${value}`);
}

export function portKey(port: ExposedPort): PortKey {
  return `${port.containerPort}/${port.protocol ?? "tcp"}`;
}

/** `host:5000/team/app:1` → ["host:5000/team/app", "1"]; no tag means "latest". */
export function splitImageTag(ref: string): [repository: string, tag: string] {
  const normalized = normalizeImageRef(ref);
  const colon = normalized.lastIndexOf(":");
  return [normalized.slice(0, colon), normalized.slice(colon + 1)];
}

/** Docker's rule: a reference without a tag or digest means ":latest". */
export function normalizeImageRef(ref: string): string {
  if (ref.startsWith("sha256:") || ref.includes("@")) return ref;
  const lastSlash = ref.lastIndexOf("/");
  return ref.slice(lastSlash + 1).includes(":") ? ref : `${ref}:latest`;
}

/**
 * A single-consumer queue that turns pushed items into an async iterable: engines produce output
 * (exec output, followed logs, events) whether or not anyone is reading yet, and nothing may be lost.
 * `onReturn` runs when the consumer stops early, so producers can unsubscribe. With `bound`, a
 * producer that can wait (a stream it reads from) waits on `room()` while the items not yet taken
 * weigh more than `bound.max`.
 */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private readonly waiters: Array<{
    resolve: (result: IteratorResult<T>) => void;
    reject: (error: unknown) => void;
  }> = [];
  private ended = false;
  private failure: { error: unknown } | undefined;
  private held = 0;
  private roomWaiters: Array<() => void> = [];

  constructor(
    private readonly onReturn?: () => void,
    private readonly bound?: { max: number; size(item: T): number },
  ) {}

  get closed(): boolean {
    return this.ended || this.failure !== undefined;
  }

  push(item: T): void {
    if (this.closed) return;
    const waiter = this.waiters.shift();
    if (waiter) waiter.resolve({ value: item, done: false });
    else {
      this.items.push(item);
      if (this.bound) this.held += this.bound.size(item);
    }
  }

  /** Resolves once the items not yet taken weigh at most `bound.max` (or the queue closed). */
  room(): Promise<void> {
    if (!this.bound || this.held <= this.bound.max || this.closed) return Promise.resolve();
    return new Promise((resolve) => this.roomWaiters.push(resolve));
  }

  private take(): T {
    const item = this.items.shift()!;
    if (this.bound) {
      this.held -= this.bound.size(item);
      if (this.held <= this.bound.max) this.wakeProducers();
    }
    return item;
  }

  private wakeProducers(): void {
    for (const wake of this.roomWaiters.splice(0)) wake();
  }

  end(): void {
    if (this.closed) return;
    this.ended = true;
    for (const waiter of this.waiters.splice(0)) waiter.resolve({ value: undefined, done: true });
    this.wakeProducers();
  }

  fail(error: unknown): void {
    if (this.closed) return;
    this.failure = { error };
    for (const waiter of this.waiters.splice(0)) waiter.reject(error);
    this.wakeProducers();
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.items.length > 0) return Promise.resolve({ value: this.take(), done: false });
        if (this.failure) {
          const { error } = this.failure;
          // Report a failure once; afterwards the iterator is simply finished.
          this.failure = undefined;
          this.ended = true;
          return Promise.reject(error);
        }
        if (this.ended) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
      },
      return: () => {
        const wasOpen = !this.closed;
        this.ended = true;
        this.items.length = 0;
        this.held = 0;
        this.wakeProducers();
        if (wasOpen) this.onReturn?.();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
