// The main processes of the fake engine's containers (fake-engine.ts): started like runc (or failing
// like it), their output kept as log lines and handed to followers, and restarted by the restart
// policy with Docker's back-off when they exit.
import { AsyncQueue, EngineError, type LogLine, type OutputStream } from "../engine.ts";
import type { FakeEvents } from "./fake-events.ts";
import { DEFAULT_PATH, type FakeContainer, NO_PARTIAL, sharedHosts } from "./fake-model.ts";
import type { FakeNetwork } from "./fake-network.ts";
import { FakeHealthMonitor, runFakeCheck } from "./health.ts";
import { FakeProcess, hasProgram, type ProcessIO } from "./shell.ts";

/** What the processes need of their engine. */
export interface ProcessHost {
  network: FakeNetwork;
  events: FakeEvents;
  now(): number;
  maxLogLines: number;
  /** Whether the container is still recorded (not removed). */
  recorded(containerId: string): boolean;
  /** Told of every log line, after its followers. */
  logged?(container: FakeContainer, line: LogLine): void;
  /** Told of every change of a container's health status, after its event. */
  healthChanged?(container: FakeContainer): void;
}

export class FakeProcesses {
  constructor(private readonly d: ProcessHost) {}

  private argv(container: FakeContainer): readonly string[] {
    const { spec, image } = container;
    const entrypoint = spec.entrypoint ?? image.config.Entrypoint ?? [];
    const cmd = spec.cmd ?? (spec.entrypoint ? [] : (image.config.Cmd ?? []));
    // The spec's and the image's lists are never changed: one of them alone is used as it is.
    if (entrypoint.length === 0) return cmd;
    if (cmd.length === 0) return entrypoint;
    return [...entrypoint, ...cmd];
  }

  /** Starts the main process; used by start and by the restart policy. Throws like Docker on failure. */
  launch(container: FakeContainer): void {
    const argv = this.argv(container);
    if (argv.length === 0) {
      container.error = "No command specified";
      throw new EngineError("other", "No command specified", 400);
    }
    if (!hasProgram(argv, container.image.programs)) {
      const message = `failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "${argv[0]}": executable file not found in $PATH: unknown`;
      container.error = message;
      container.exitCode = 127;
      throw new EngineError("other", message, 400);
    }
    const networkMode = container.spec.networkMode ?? "bridge";
    if (networkMode === "bridge" || networkMode === "default") {
      const ports = this.d.network.allocatePorts(container);
      container.ipAddress = this.d.network.allocateAddress();
      // Docker builds /etc/hosts afresh at every start, from the extra hosts given at create.
      container.hosts = sharedHosts(container.spec.extraHosts);
      container.ports = ports;
    }
    container.error = "";
    // Docker clears the exit code when a container (re)starts; it is known again at the next exit.
    container.exitCode = undefined;
    container.oomKilled = false;
    container.manuallyStopped = false;
    container.state = "running";
    container.startedAt = this.d.now();
    container.partial = NO_PARTIAL as FakeContainer["partial"];
    container.stdin = container.spec.openStdin ? new AsyncQueue<string>() : undefined;
    const io = processIO(container, (stream, text) => this.output(container, stream, text), container.stdin);
    const process = new FakeProcess(argv, io, { pid1: true, programs: container.image.programs });
    container.process = process;
    this.d.events.emit(container, "start");
    this.startHealth(container);
    void process.exited.then((exitCode) => this.processExited(container, process, exitCode));
  }

  /** A run's health checks: the container's own, else its image's HEALTHCHECK; none with NONE. */
  private startHealth(container: FakeContainer): void {
    container.health?.stop();
    const check = container.spec.healthcheck ?? container.image.config.Healthcheck ?? undefined;
    container.health = undefined;
    if (!check || check.test[0] === "NONE") return;
    const target = () => ({
      running: container.state === "running",
      argv: this.argv(container),
      serves: container.image.config.Serves ?? undefined,
      programs: container.image.programs,
      env: { PATH: DEFAULT_PATH, HOSTNAME: container.hostname, ...container.env },
      hostname: container.hostname,
    });
    container.health = new FakeHealthMonitor(
      check,
      (c, signal) => runFakeCheck(target(), c, signal),
      () => {
        this.d.events.emit(container, "health_status");
        this.d.healthChanged?.(container);
      },
      () => this.d.now(),
    );
  }

  /** Output of a container process: tty turns newlines into CRLF and merges stderr into stdout. */
  output(container: FakeContainer, stream: OutputStream, text: string): void {
    const tty = container.spec.tty ?? false;
    const target: OutputStream = tty ? "stdout" : stream;
    if (container.partial === NO_PARTIAL) container.partial = { stdout: "", stderr: "" };
    const data = container.partial[target] + (tty ? text.replace(/\r?\n/g, "\r\n") : text);
    let start = 0;
    for (let nl = data.indexOf("\n"); nl >= 0; nl = data.indexOf("\n", start)) {
      this.logLine(container, { stream: target, line: data.slice(start, nl + 1), timestampMs: this.d.now() });
      start = nl + 1;
    }
    // Like Docker's log copier, a line is held until its newline (or until the process ends).
    container.partial[target] = data.slice(start);
  }

  private logLine(container: FakeContainer, line: LogLine): void {
    container.logs.push(line);
    if (container.logs.length > this.d.maxLogLines)
      container.logs.splice(0, container.logs.length - this.d.maxLogLines);
    for (const follower of container.followers) follower.push(line);
    this.d.logged?.(container, line);
  }

  /**
   * A running container whose process ran in another copy of this engine (drivers/fake/synced.ts)
   * gets one here, without output (what it printed was printed there), its start time kept, so that
   * a stop or kill here ends it as Docker would.
   */
  adopt(container: FakeContainer): void {
    if (container.state !== "running" || container.process) return;
    const io = processIO(container, () => {}, undefined);
    const process = new FakeProcess(this.argv(container), io, {
      pid1: true,
      programs: container.image.programs,
    });
    container.process = process;
    void process.exited.then((exitCode) => this.processExited(container, process, exitCode));
  }

  private processExited(container: FakeContainer, process: FakeProcess, exitCode: number): void {
    if (container.process !== process) return;
    for (const stream of ["stdout", "stderr"] as const) {
      const rest = container.partial[stream];
      if (rest) this.logLine(container, { stream, line: rest, timestampMs: this.d.now() });
    }
    container.partial = NO_PARTIAL as FakeContainer["partial"];
    container.process = undefined;
    container.health?.stop();
    container.stdin?.end();
    container.stdin = undefined;
    // Exec'd processes die with the container.
    for (const exec of container.execs) exec.kill(137);
    container.execs.clear();
    this.d.network.release(container);
    const ranMs = this.d.now() - (container.startedAt ?? this.d.now());
    container.exitCode = exitCode;
    container.finishedAt = this.d.now();
    container.state = "exited";
    this.d.events.emit(container, "die", { exitCode });
    // Followers of a container's logs stop when it stops, as with Docker.
    for (const follower of container.followers) follower.end();
    container.followers.clear();
    if (this.shouldRestart(container, exitCode)) this.scheduleRestart(container, ranMs);
  }

  private shouldRestart(container: FakeContainer, exitCode: number): boolean {
    if (container.manuallyStopped) return false;
    const policy = container.spec.restartPolicy ?? { name: "no" };
    if (policy.name === "always") return true;
    if (policy.name !== "on-failure" || exitCode === 0) return false;
    const max = policy.maximumRetryCount ?? 0;
    return max === 0 || container.restartCount < max;
  }

  /** Docker's back-off: 100 ms, doubling up to a minute; back to 100 ms after a run of 10 s or more. */
  private scheduleRestart(container: FakeContainer, ranMs: number): void {
    container.restartDelayMs =
      ranMs >= 10_000 || container.restartDelayMs === 0
        ? 100
        : Math.min(container.restartDelayMs * 2, 60_000);
    container.state = "restarting";
    container.restartTimer = setTimeout(() => {
      container.restartTimer = undefined;
      if (container.state !== "restarting" || !this.d.recorded(container.id)) return;
      container.restartCount += 1;
      try {
        this.launch(container);
      } catch {
        // Docker gives up on a container that cannot start again; it stays exited with the error.
        container.state = "exited";
      }
    }, container.restartDelayMs);
  }

  cancelRestart(container: FakeContainer): void {
    if (container.restartTimer) clearTimeout(container.restartTimer);
    container.restartTimer = undefined;
    if (container.state === "restarting") container.state = "exited";
  }
}

/**
 * A main process's I/O: its output written by `write`, its stdin `stdin`; its environment
 * (the runtime adds PATH when the image has none, as runc does) made when a program first reads it,
 * so that a process that never does (most of a simulation's) holds no copy of it.
 */
function processIO(
  container: FakeContainer,
  write: ProcessIO["write"],
  stdin: ProcessIO["stdin"],
): ProcessIO {
  let env: Record<string, string> | undefined;
  return {
    write,
    stdin,
    get env() {
      env ??= { PATH: DEFAULT_PATH, HOSTNAME: container.hostname, ...container.env };
      return env;
    },
    hostname: container.hostname,
  };
}
