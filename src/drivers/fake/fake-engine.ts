// An in-memory Engine with Docker's observable behaviour: images present or pullable, container state
// transitions and exit codes, restart policies with Docker's back-off, name conflicts, published ports
// and private addresses, logs, exec and events. It backs simulated nodes and fast tests, so wherever it
// differs from Docker it says so with an error rather than quietly succeeding. Test hooks (print,
// exitProcess, oom, setReachable) act like things happening on the node, not like API calls.
//
// FakeEngine holds the containers and answers the Engine calls; it delegates to its images
// (fake-images.ts), network (fake-network.ts), events (fake-events.ts), main processes
// (fake-processes.ts) and exec (fake-exec.ts); the records are in fake-model.ts.

import type { Readable } from "node:stream";
import {
  AsyncQueue,
  type ContainerEvent,
  type ContainerSpec,
  type ContainerSummary,
  type ContainerView,
  type Engine,
  EngineError,
  type EngineInfo,
  type EventsOptions,
  type ExecOptions,
  type ExecSession,
  type KillContainerOptions,
  type ListContainersOptions,
  type LogLine,
  type LogsOptions,
  type OutputStream,
  type PullImageOptions,
  type PushImageOptions,
  type RemoveContainerOptions,
  type StopContainerOptions,
  type StopOutcome,
} from "../engine.ts";
import { FakeEvents } from "./fake-events.ts";
import { startExec } from "./fake-exec.ts";
import { FakeFiles } from "./fake-files.ts";
import { FakeImageStore } from "./fake-images.ts";
import {
  containerEnv,
  copySpec,
  dockerStyleId,
  FAKE_BUSYBOX,
  type FakeContainer,
  type FakeEngineOptions,
  type FakeImage,
  joined,
  NAME_PATTERN,
  newFakeContainer,
  randomHex,
  sharedHosts,
  summaryOf,
  viewOf,
} from "./fake-model.ts";
import { FakeNetwork, rewriteHostEntries } from "./fake-network.ts";
import { FakeProcesses } from "./fake-processes.ts";
import { normalizeSignal, SIGNAL_NUMBERS } from "./signals.ts";
import { FakeStats, type FakeUsage } from "./stats.ts";

export class FakeEngine implements Engine {
  private reachable = true;
  protected readonly images = new FakeImageStore();
  protected readonly containers = new Map<string, FakeContainer>();
  // Containers' files, for volume backups (tests write them with `files.write`).
  readonly files = new FakeFiles((id) => this.reach() ?? this.get(id));
  readonly readArchive = this.files.readArchive;
  readonly writeArchive = this.files.writeArchive;
  readonly pauseContainer = this.files.pause;
  readonly unpauseContainer = this.files.unpause;
  protected readonly eventLog: FakeEvents;
  protected readonly network: FakeNetwork;
  protected readonly processes: FakeProcesses;
  private readonly info_: EngineInfo;
  protected readonly now: () => number;
  private readonly maxLogLines: number;
  protected readonly stats = new FakeStats(
    () => this.info_,
    () => this.now(),
  );
  /** Resource counters (fake/stats.ts); `setUsage` sets what the container's processes use from now on. */
  containerStats = async (id: string) => this.stats.read(this.find(id), () => this.reach());
  setUsage = (id: string, usage: Partial<FakeUsage>) => this.stats.setUsage(this.get(id), usage);

  constructor(options: FakeEngineOptions = {}) {
    const id = options.id ?? dockerStyleId();
    this.now = options.now ?? Date.now;
    this.eventLog = new FakeEvents(this.now, (container) => this.changed(container));
    this.maxLogLines = options.maxLogLines ?? 10_000;
    this.info_ = {
      id,
      name: options.name ?? `fake-${id.slice(0, 4).toLowerCase()}`,
      cpus: options.cpus ?? 2,
      memoryMb: options.memoryMb ?? 4096,
      diskGb: options.diskGb ?? 50,
      engineVersion: options.engineVersion ?? "20.10.24-fake",
      apiVersion: options.apiVersion ?? "1.41",
      storageDriver: "overlay2",
      execDriver: "native",
      operatingSystem: options.operatingSystem ?? "Berth fake engine",
    };
    this.network = new FakeNetwork(options.subnet ?? "172.17.0.0/16", options.portRange ?? [32768, 60999]);
    this.processes = new FakeProcesses({
      network: this.network,
      events: this.eventLog,
      now: this.now,
      maxLogLines: this.maxLogLines,
      recorded: (containerId) => this.containers.has(containerId),
      logged: (container, line) => this.changed(container, line),
      healthChanged: (container) => this.changed(container),
    });
    for (const image of options.images ?? [FAKE_BUSYBOX]) this.addImage(image);
    for (const image of options.registry ?? []) this.images.offer(image);
  }

  /** A container changed: an event, or a line of its log (drivers/fake/synced.ts writes it down). */
  protected changed(_container: FakeContainer, _line?: LogLine): void {}

  // ---- test hooks: things happening on the node ----------------------------------------------------

  /** The engine's host changed: an engine upgrade, more memory or CPUs (what `info` reports). */
  changeHost(facts: Partial<Pick<EngineInfo, "engineVersion" | "memoryMb" | "cpus" | "diskGb">>): void {
    Object.assign(this.info_, facts);
  }

  /** An unreachable engine refuses every call, and open streams break, as when its host goes away. */
  setReachable(reachable: boolean): void {
    this.reachable = reachable;
    if (reachable) return;
    const error = this.unreachableError();
    this.eventLog.fail(error);
    for (const container of this.containers.values()) {
      for (const follower of container.followers) follower.fail(error);
      container.followers.clear();
    }
  }

  /** Makes an image present, as if built or loaded on the node. Returns its id. */
  addImage(image: FakeImage): string {
    return this.images.add(image);
  }

  /** The container's main process prints, as a program would (text may hold several lines). */
  print(id: string, stream: OutputStream, text: string): void {
    const container = this.running(id);
    this.processes.output(container, stream, text);
  }

  /** The container's main process exits by itself with this code; the restart policy applies. */
  exitProcess(id: string, exitCode: number): void {
    this.running(id).process?.kill(exitCode);
  }

  /** The kernel kills the container for using too much memory. */
  oom(id: string): void {
    const container = this.running(id);
    container.oomKilled = true;
    this.eventLog.emit(container, "oom");
    container.process?.kill(137);
  }

  /** A `docker save` archive of an image, for loading into another engine. */
  saveImage(ref: string): Readable {
    return this.images.save(ref);
  }

  /** Stops every process and timer, for the end of a test or a simulation. Containers stay recorded. */
  close(): void {
    for (const container of this.containers.values()) {
      if (container.restartTimer) clearTimeout(container.restartTimer);
      container.restartTimer = undefined;
      container.manuallyStopped = true;
      container.process?.kill(137);
      container.health?.stop();
      for (const exec of container.execs) exec.kill(137);
      for (const follower of container.followers) follower.end();
    }
    this.eventLog.end();
  }

  // ---- engine ---------------------------------------------------------------------------------------

  private unreachableError(): EngineError {
    return new EngineError("unreachable", `engine ${this.info_.name} is unreachable: connect ECONNREFUSED`);
  }

  private reach(): void {
    if (!this.reachable) throw this.unreachableError();
  }

  async ping(): Promise<void> {
    this.reach();
  }

  async info(): Promise<EngineInfo> {
    this.reach();
    return { ...this.info_ };
  }

  // ---- images (fake-images.ts) --------------------------------------------------------------------

  async imageId(ref: string): Promise<string | undefined> {
    this.reach();
    return this.images.resolveImage(ref);
  }

  async hasImage(ref: string): Promise<boolean> {
    return (await this.imageId(ref)) !== undefined;
  }

  async pullImage(ref: string, options: PullImageOptions = {}): Promise<void> {
    this.reach();
    return this.images.pull(ref, options);
  }

  async tagImage(source: string, target: string): Promise<void> {
    this.reach();
    this.images.tag(source, target);
  }

  /** Puts the image into this engine's registry, under the same credentials as what it replaces. */
  async pushImage(ref: string, options: PushImageOptions = {}): Promise<void> {
    this.reach();
    return this.images.push(ref, options);
  }

  async loadImage(tar: Readable): Promise<string[]> {
    this.reach();
    return this.images.load(tar);
  }

  // ---- containers -----------------------------------------------------------------------------------

  private find(idOrName: string): FakeContainer | undefined {
    const exact = this.containers.get(idOrName);
    if (exact) return exact;
    const name = idOrName.replace(/^\//, "");
    for (const container of this.containers.values()) if (container.name === name) return container;
    const matches = [...this.containers.values()].filter((container) => container.id.startsWith(idOrName));
    return idOrName.length > 0 && matches.length === 1 ? matches[0] : undefined;
  }

  protected get(id: string): FakeContainer {
    const container = this.find(id);
    if (!container) throw new EngineError("not_found", `No such container: ${id}`, 404);
    return container;
  }

  private running(id: string): FakeContainer {
    const container = this.get(id);
    if (container.state !== "running")
      throw new Error(`fake container ${id} is ${container.state}, not running`);
    return container;
  }

  async createContainer(spec: ContainerSpec): Promise<string> {
    this.reach();
    if (spec.name !== undefined && !NAME_PATTERN.test(spec.name)) {
      throw new EngineError(
        "other",
        `Invalid container name (${spec.name}), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed`,
        400,
      );
    }
    const imageId = this.images.resolveImage(spec.image);
    const image = imageId ? this.images.get(imageId) : undefined;
    if (!image) throw new EngineError("image_not_found", `No such image: ${spec.image}`, 404);
    const id = randomHex(32);
    const name = (spec.name ?? `fake_${randomHex(4)}`).replace(/^\//, "");
    const holder = [...this.containers.values()].find((container) => container.name === name);
    if (holder) {
      throw new EngineError(
        "conflict",
        `Conflict. The container name "/${name}" is already in use by container "${holder.id}". You have to remove (or rename) that container to be able to reuse that name.`,
        409,
      );
    }
    const hostname = spec.hostname ?? id.slice(0, 12);
    const own = copySpec(spec);
    const container = newFakeContainer({
      id,
      name,
      spec: own,
      image,
      env: containerEnv(image.config.Env, own.env),
      hostname,
      hosts: sharedHosts(spec.extraHosts),
      createdAt: this.now(),
      state: "created",
    });
    this.containers.set(id, container);
    this.eventLog.emit(container, "create");
    return id;
  }

  /** Docker's rule: an entrypoint given without a command drops the image's command. */
  async startContainer(id: string): Promise<void> {
    this.reach();
    const container = this.get(id);
    if (container.state === "running" || container.state === "paused" || container.state === "restarting")
      return;
    container.restartCount = 0;
    container.restartDelayMs = 0;
    this.processes.launch(container);
  }

  async stopContainer(id: string, options: StopContainerOptions = {}): Promise<StopOutcome> {
    this.reach();
    const container = this.get(id);
    if (container.state === "restarting") {
      container.manuallyStopped = true;
      this.processes.cancelRestart(container);
      this.eventLog.emit(container, "stop");
      return { killed: false };
    }
    const process = container.process;
    if (container.state !== "running" || !process) return { killed: false };
    container.manuallyStopped = true;
    const timeoutS = options.timeoutS ?? 10;
    // The container's stop signal (Docker's StopSignal at create), SIGTERM when it names none.
    const signal = normalizeSignal(container.spec.stopSignal ?? "SIGTERM") ?? "SIGTERM";
    this.eventLog.emit(container, "kill", { signal: String(SIGNAL_NUMBERS[signal]) });
    process.signal(signal);
    let timer: NodeJS.Timeout | undefined;
    const exitedInTime = await Promise.race([
      process.exited.then(() => true),
      // A negative timeout waits for as long as the process takes, like Docker's -1.
      new Promise<boolean>((resolve) => {
        if (timeoutS >= 0) timer = setTimeout(() => resolve(false), timeoutS * 1000);
      }),
    ]);
    clearTimeout(timer);
    if (!exitedInTime) {
      this.eventLog.emit(container, "kill", { signal: "9" });
      process.signal("SIGKILL");
    }
    await process.exited;
    // processExited ran in a then() registered earlier, so the state is already "exited" here.
    this.eventLog.emit(container, "stop");
    return { killed: !exitedInTime };
  }

  async killContainer(id: string, options: KillContainerOptions = {}): Promise<void> {
    this.reach();
    const container = this.get(id);
    const signal = normalizeSignal(options.signal ?? "SIGKILL");
    if (!signal) throw new EngineError("other", `Invalid signal: ${options.signal}`, 400);
    if (container.state === "restarting") {
      throw new EngineError(
        "conflict",
        `Cannot kill container: ${id}: Container ${container.id} is restarting, wait until the container is running`,
        409,
      );
    }
    const process = container.process;
    if (container.state !== "running" || !process) {
      throw new EngineError(
        "conflict",
        `Cannot kill container: ${id}: Container ${container.id} is not running`,
        409,
      );
    }
    // Docker: SIGKILL, or the container's stop signal, means the user wants it down for good.
    if (signal === "SIGKILL" || signal === "SIGTERM") container.manuallyStopped = true;
    this.eventLog.emit(container, "kill", { signal: String(SIGNAL_NUMBERS[signal]) });
    process.signal(signal);
    if (signal === "SIGKILL") await process.exited;
  }

  async removeContainer(id: string, options: RemoveContainerOptions = {}): Promise<void> {
    this.reach();
    const container = this.get(id);
    if ((container.state === "running" || container.state === "restarting") && !options.force) {
      const state = container.state === "running" ? "running" : "restarting";
      throw new EngineError(
        "conflict",
        `You cannot remove a ${state} container ${container.id}. Stop the container before attempting removal or force remove`,
        409,
      );
    }
    container.manuallyStopped = true;
    this.processes.cancelRestart(container);
    const process = container.process;
    if (process) {
      this.eventLog.emit(container, "kill", { signal: "9" });
      process.signal("SIGKILL");
      await process.exited;
    }
    for (const follower of container.followers) follower.end();
    container.health?.stop();
    this.containers.delete(container.id);
    // Its counters go with it (they were kept for every container ever sampled: issue 34).
    this.stats.forget(container.id);
    this.eventLog.emit(container, "destroy");
  }

  async inspectContainer(id: string): Promise<ContainerView | undefined> {
    this.reach();
    const container = this.find(id);
    return container ? viewOf(container) : undefined;
  }

  async listContainers(options: ListContainersOptions = {}): Promise<ContainerSummary[]> {
    this.reach();
    const wanted = Object.entries(options.labels ?? {});
    return [...this.containers.values()]
      .filter((container) => options.all || ["running", "paused", "restarting"].includes(container.state))
      .filter((container) => wanted.every(([key, value]) => container.spec.labels?.[key] === value))
      .sort((a, b) => b.createdAt - a.createdAt)
      .map(summaryOf);
  }

  // ---- streams --------------------------------------------------------------------------------------

  async *logs(id: string, options: LogsOptions = {}): AsyncGenerator<LogLine> {
    this.reach();
    const container = this.get(id);
    if (options.signal?.aborted) return;
    const tail = options.tail;
    const past = tail === undefined ? [...container.logs] : tail <= 0 ? [] : container.logs.slice(-tail);
    // Subscribing in the same tick as the snapshot means no line falls between the two.
    const live =
      options.follow && container.state === "running"
        ? new AsyncQueue<LogLine>(() => container.followers.delete(live!))
        : undefined;
    if (live) joined(container, "followers", live);
    const onAbort = () => {
      live?.end();
      if (live) container.followers.delete(live);
    };
    options.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      for (const line of past) {
        if (options.signal?.aborted) return;
        yield line;
      }
      if (live) yield* live;
    } finally {
      options.signal?.removeEventListener("abort", onAbort);
      onAbort();
    }
  }

  /** As Docker's driver does it, through the image's shell: a running container whose image has `sh`. */
  async replaceHostEntries(id: string, entries: { remove: string[]; add: string[] }): Promise<void> {
    this.reach();
    rewriteHostEntries(this.get(id), entries);
  }

  /** The `host:ip` entries of a container's /etc/hosts beyond the defaults (tests read them). */
  hostEntries(id: string): string[] {
    return [...this.get(id).hosts];
  }

  async exec(id: string, options: ExecOptions): Promise<ExecSession> {
    this.reach();
    const container = this.get(id);
    if (container.state === "restarting") {
      throw new EngineError(
        "conflict",
        `Container ${container.id} is restarting, wait until the container is running`,
        409,
      );
    }
    if (container.state !== "running") {
      throw new EngineError("conflict", `Container ${container.id} is not running`, 409);
    }
    return startExec(container, options, {
      emit: (c, action, extra) => this.eventLog.emit(c, action, extra),
      recorded: (containerId) => this.containers.has(containerId),
    });
  }

  async *events(options: EventsOptions = {}): AsyncGenerator<ContainerEvent> {
    this.reach();
    yield* this.eventLog.follow(options);
  }
}
