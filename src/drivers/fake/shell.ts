// A tiny stand-in for the programs of a busybox image, so fake containers behave like real ones for
// the commands tests and simulations use: `echo`, `printf`, `sleep`, `seq`, `cat`, `env`, `exit`, and
// `sh -c` scripts made of simple commands joined by `;`, `&&`, `||` and `&`, with `trap` and `wait`,
// and integer arithmetic `$((…))` (+ - * / % and parentheses over numbers and variables).
// Signals follow Linux rules for PID 1: a signal without a handler is ignored, except SIGKILL.
// Anything else (pipes, loops, `$(…)`, files) is refused with a message on stderr and exit status 2,
// so a test never silently passes on behaviour the fake does not have. Scripts are parsed by
// shell-parse.ts; this module runs them.
import {
  BUILTIN_PROGRAMS,
  basename,
  echo,
  type ProcessIO,
  printf,
  seq,
  sleepMs,
  waitOnly,
} from "./programs.ts";
import {
  type AndOr,
  evaluateArithmetic,
  parseScript,
  type SimpleCommand,
  Unsupported,
  type Word,
} from "./shell-parse.ts";
import { normalizeSignal, SIGNAL_NUMBERS } from "./signals.ts";

export { BUILTIN_PROGRAMS, hasProgram, type ProcessIO } from "./programs.ts";

export interface ProcessOptions {
  /** PID 1 of a container ignores signals it has no handler for. */
  pid1: boolean;
  /** Extra programs of the image (servers): they run until stopped and exit 0 on SIGTERM or SIGINT. */
  programs: ReadonlySet<string>;
}

class Killed {
  constructor(readonly status: number) {}
}

class ExitRequest {
  constructor(readonly status: number) {}
}

/** One running program: a PID 1 or an exec'd command. `exited` resolves with its exit status. */
export class FakeProcess {
  readonly exited: Promise<number>;
  private killedStatus: number | undefined;
  // Made at their first use: a process that only waits (most of a simulation's) holds none (issue 34).
  private killWaiters: Set<(killed: Killed) => void> | undefined;
  private interruptWaiters: Set<() => void> | undefined;
  private timers: Set<NodeJS.Timeout> | undefined;
  private children: Set<FakeProcess> | undefined;
  private traps: Map<string, string> | undefined;
  private pendingSignals: string[] | undefined;
  private jobs: Array<Promise<number>> | undefined;
  /** A process that only waits (a server, `sleep`; see waitOnly) ends with this: killed, or its time up. */
  private settle: ((status: number) => void) | undefined;
  private waitTimer: NodeJS.Timeout | undefined;
  private lastStatus = 0;
  /** What a server program does with a polite signal: exit 0. */
  private isServer = false;

  constructor(
    private readonly argv: readonly string[],
    private readonly io: ProcessIO,
    private readonly options: ProcessOptions,
    /** Runs instead of argv: a background job of a shell is a child process running part of its script. */
    body?: (process: FakeProcess) => Promise<number>,
  ) {
    // A server's signal handlers count from the moment it starts, before its first instruction runs here.
    const name = basename(argv[0] ?? "");
    this.isServer =
      !body &&
      ((options.programs.has(name) && !BUILTIN_PROGRAMS.has(name)) ||
        (name === "httpd" && argv.includes("-f")));
    const waitMs = body ? undefined : waitOnly(argv, this.isServer);
    this.exited = new Promise<number>((resolve) => {
      // Started on the next tick so the caller can finish its bookkeeping (state, events) first.
      setImmediate(() => {
        if (waitMs !== undefined) {
          // What running it would do, without the shell's frames: wait for the time or a kill.
          if (this.killedStatus !== undefined) return resolve(this.killedStatus);
          this.settle = resolve;
          if (Number.isFinite(waitMs))
            this.waitTimer = setTimeout(() => {
              this.cleanup();
              resolve(0);
            }, waitMs);
          return;
        }
        const run = async () => {
          if (this.killedStatus !== undefined) throw new Killed(this.killedStatus);
          return body ? body(this) : this.runArgv(argv, io);
        };
        run().then(
          (status) => resolve(this.killedStatus ?? status),
          (error: unknown) => {
            if (error instanceof Killed) resolve(error.status);
            else if (error instanceof ExitRequest) resolve(error.status);
            else {
              io.write("stderr", `${basename(argv[0] ?? "")}: ${(error as Error).message}\n`);
              resolve(1);
            }
          },
        );
      });
    });
    // Whatever it started in the background dies with it (for PID 1, the kernel ends the whole namespace).
    if (waitMs === undefined)
      void this.exited.then(() => {
        for (const child of this.children ?? []) child.kill(137);
        this.cleanup();
      });
  }

  get command(): readonly string[] {
    return this.argv;
  }

  /** Delivers a signal like the kernel would to this process. */
  signal(signal: string): void {
    const name = normalizeSignal(signal);
    if (!name || this.killedStatus !== undefined) return;
    const number = SIGNAL_NUMBERS[name]!;
    if (name === "SIGKILL") {
      this.kill(128 + number);
    } else if (this.traps?.has(name)) {
      this.pendingSignals ??= [];
      this.pendingSignals.push(name);
      for (const wake of this.interruptWaiters ?? []) wake();
    } else if (this.isServer && (name === "SIGTERM" || name === "SIGINT" || name === "SIGQUIT")) {
      this.kill(0);
    } else if (!this.options.pid1) {
      this.kill(128 + number);
    }
    // PID 1 without a handler: the kernel does not deliver the signal at all.
  }

  /** Ends the process and everything it started (the container's processes die with PID 1). */
  kill(status = 137): void {
    if (this.killedStatus !== undefined) return;
    this.killedStatus = status;
    for (const child of this.children ?? []) child.kill(status);
    const killed = new Killed(status);
    for (const waiter of this.killWaiters ?? []) waiter(killed);
    const settle = this.settle;
    this.cleanup();
    settle?.(status);
  }

  private cleanup(): void {
    for (const timer of this.timers ?? []) clearTimeout(timer);
    this.timers = undefined;
    clearTimeout(this.waitTimer);
    this.waitTimer = undefined;
    this.killWaiters = undefined;
    this.interruptWaiters = undefined;
    this.settle = undefined;
  }

  /** Runs `then` after `ms` unless the process ends first. */
  private timer(ms: number, then: () => void): void {
    const timer = setTimeout(() => {
      this.timers?.delete(timer);
      then();
    }, ms);
    this.timers ??= new Set();
    this.timers.add(timer);
  }

  /** Waits for `promise`, unless killed (throws) or, when interruptible, a handled signal arrives. */
  private block<T>(promise: Promise<T>, interruptible: boolean): Promise<T | "interrupted"> {
    if (this.killedStatus !== undefined) return Promise.reject(new Killed(this.killedStatus));
    if (interruptible && this.pendingSignals?.length) return Promise.resolve("interrupted");
    return new Promise<T | "interrupted">((resolve, reject) => {
      const onKill = (killed: Killed) => finish(() => reject(killed));
      const onInterrupt = () => finish(() => resolve("interrupted"));
      const finish = (action: () => void) => {
        this.killWaiters?.delete(onKill);
        this.interruptWaiters?.delete(onInterrupt);
        action();
      };
      this.killWaiters ??= new Set();
      this.killWaiters.add(onKill);
      if (interruptible) {
        this.interruptWaiters ??= new Set();
        this.interruptWaiters.add(onInterrupt);
      }
      promise.then(
        (value) => finish(() => resolve(value)),
        (error: unknown) => finish(() => reject(error)),
      );
    });
  }

  private sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      if (!Number.isFinite(ms)) return; // sleep infinity: only a signal ends it
      this.timer(ms, resolve);
    });
  }

  private async runArgv(argv: readonly string[], io: ProcessIO): Promise<number> {
    const name = basename(argv[0] ?? "");
    if (name === "sh" || name === "ash") {
      if (argv[1] === "-c") {
        if (argv[2] === undefined) {
          io.write("stderr", "sh: -c requires an argument\n");
          return 2;
        }
        return this.runScript(argv[2], io);
      }
      // An interactive shell reads commands from stdin, one line at a time, until it ends.
      if (!io.stdin) return 0;
      let buffered = "";
      const iterator = io.stdin[Symbol.asyncIterator]();
      const prompt = () => io.tty && io.write("stdout", "/ # ");
      prompt();
      for (;;) {
        const next = await this.block(iterator.next(), false);
        if (next === "interrupted" || next.done) break;
        buffered += next.value;
        let nl = buffered.indexOf("\n");
        while (nl >= 0) {
          await this.runScript(buffered.slice(0, nl), io);
          buffered = buffered.slice(nl + 1);
          nl = buffered.indexOf("\n");
          if (nl < 0) prompt();
        }
      }
      return buffered.trim() ? this.runScript(buffered, io) : this.lastStatus;
    }
    if (this.options.programs.has(name) && !BUILTIN_PROGRAMS.has(name)) return this.runServer();
    return this.runCommand(argv, io);
  }

  private async runServer(): Promise<number> {
    await this.block(new Promise<never>(() => {}), false);
    return 0;
  }

  private async runScript(script: string, io: ProcessIO): Promise<number> {
    let lists: AndOr[];
    try {
      lists = parseScript(script);
    } catch (error) {
      if (!(error instanceof Unsupported)) throw error;
      io.write("stderr", `sh: the fake engine does not support ${error.message}: ${script}\n`);
      return 2;
    }
    for (const list of lists) {
      if (list.background) {
        const status = this.lastStatus;
        const job = new FakeProcess(["sh"], io, { pid1: false, programs: this.options.programs }, (child) => {
          child.lastStatus = status;
          return child.runList(list, io);
        });
        this.children ??= new Set();
        this.children.add(job);
        this.jobs ??= [];
        this.jobs.push(job.exited);
        void job.exited.then(() => this.children?.delete(job));
        this.lastStatus = 0;
      } else {
        this.lastStatus = await this.runList(list, io);
      }
      await this.runTraps(io);
    }
    return this.lastStatus;
  }

  private async runList(list: AndOr, io: ProcessIO): Promise<number> {
    let status = this.lastStatus;
    for (const step of list.steps) {
      if (step.connector === "&&" && status !== 0) continue;
      if (step.connector === "||" && status === 0) continue;
      status = await this.runSimple(step.command, io);
      this.lastStatus = status;
    }
    return status;
  }

  private async runTraps(io: ProcessIO): Promise<void> {
    while (this.pendingSignals?.length) {
      const signal = this.pendingSignals.shift()!;
      const action = this.traps?.get(signal);
      if (action) await this.runScript(action, io);
    }
  }

  private expand(word: Word): string {
    return word
      .map((segment) => {
        if (segment.kind === "text") return segment.value;
        if (segment.kind === "arith")
          return String(evaluateArithmetic(segment.expression, (name) => this.variable(name)));
        return this.variable(segment.name);
      })
      .join("");
  }

  private variable(name: string): string {
    if (name === "?") return String(this.lastStatus);
    if (name === "$") return "1";
    if (name === "#") return "0";
    if (name === "0") return "sh";
    return this.io.env[name] ?? "";
  }

  private runSimple(command: SimpleCommand, io: ProcessIO): Promise<number> {
    let argv: string[];
    try {
      argv = command.words.map((word) => this.expand(word));
    } catch (error) {
      // sh reports a bad arithmetic expression on stderr and fails the command with status 2.
      if (!(error instanceof Unsupported)) throw error;
      io.write("stderr", `sh: the fake engine does not support ${error.message}\n`);
      return Promise.resolve(2);
    }
    if (command.redirects.length === 0) return this.runCommand(argv, io);
    const targets: Record<1 | 2, "stdout" | "stderr" | "null"> = { 1: "stdout", 2: "stderr" };
    for (const redirect of command.redirects)
      targets[redirect.fd] = redirect.to === "stdout" ? targets[1] : redirect.to;
    const redirected: ProcessIO = {
      ...io,
      write: (stream, text) => {
        const target = targets[stream === "stdout" ? 1 : 2];
        if (target !== "null") io.write(target, text);
      },
    };
    return this.runCommand(argv, redirected);
  }

  private async runCommand(argv: readonly string[], io: ProcessIO): Promise<number> {
    if (this.killedStatus !== undefined) throw new Killed(this.killedStatus);
    const [program = "", ...args] = argv;
    const name = basename(program);
    switch (name) {
      case "":
        return 0;
      case "echo":
        return echo(args, io);
      case "printf":
        return printf(args, io);
      case "sleep":
        return this.sleepCommand(args, io);
      case "seq":
        return seq(args, io);
      case "cat":
        return this.cat(args, io);
      case "env":
        for (const [key, value] of Object.entries(io.env)) io.write("stdout", `${key}=${value}\n`);
        return 0;
      case "hostname":
        io.write("stdout", `${io.hostname}\n`);
        return 0;
      case "id":
        io.write("stdout", "uid=0(root) gid=0(root) groups=0(root)\n");
        return 0;
      case "date":
        io.write("stdout", `${new Date().toUTCString()}\n`);
        return 0;
      case "true":
      case ":":
        return 0;
      case "false":
        return 1;
      case "exit": {
        const status = args[0] === undefined ? this.lastStatus : Number(args[0]);
        throw new ExitRequest(Number.isInteger(status) ? status & 255 : 2);
      }
      case "trap":
        return this.trap(args, io);
      case "wait":
        return this.wait();
      case "sh":
      case "ash": {
        // A child shell: its own traps and status, but it dies with its parent.
        const child = new FakeProcess(argv, io, { pid1: false, programs: this.options.programs });
        this.children ??= new Set();
        this.children.add(child);
        try {
          const status = await this.block(child.exited, false);
          return status === "interrupted" ? 130 : status;
        } finally {
          this.children.delete(child);
        }
      }
      case "httpd":
        if (!args.includes("-f")) return 0; // without -f busybox httpd daemonizes and the shell goes on
        return this.runServer();
      default:
        if (this.options.programs.has(name)) return this.runServer();
        io.write("stderr", `sh: ${program}: not found\n`);
        return 127;
    }
  }

  private async sleepCommand(args: string[], io: ProcessIO): Promise<number> {
    const bad = args.find((arg) => sleepMs([arg]) === undefined);
    if (bad !== undefined) {
      io.write("stderr", `sleep: invalid number '${bad}'\n`);
      return 1;
    }
    const totalMs = sleepMs(args) ?? 0;
    if (args.length === 0) {
      io.write("stderr", "sleep: missing operand\n");
      return 1;
    }
    // A foreground child keeps running while the shell holds a signal for later, as in a real shell.
    await this.block(this.sleep(totalMs), false);
    return 0;
  }

  private async cat(args: string[], io: ProcessIO): Promise<number> {
    const files = args.filter((arg) => arg !== "-");
    if (files.length > 0) {
      for (const file of files) io.write("stderr", `cat: can't open '${file}': No such file or directory\n`);
      return 1;
    }
    if (!io.stdin) return 0;
    const iterator = io.stdin[Symbol.asyncIterator]();
    for (;;) {
      const next = await this.block(iterator.next(), false);
      if (next === "interrupted" || next.done) return 0;
      io.write("stdout", next.value);
    }
  }

  private trap(args: string[], io: ProcessIO): number {
    const [action, ...signals] = args;
    if (action === undefined) return 0;
    for (const signal of signals) {
      const name = normalizeSignal(signal);
      if (signal.toUpperCase() === "EXIT" || signal === "0") {
        io.write("stderr", "sh: the fake engine does not support trap on EXIT\n");
        return 2;
      }
      if (!name || name === "SIGKILL") {
        io.write("stderr", `trap: invalid signal specification: ${signal}\n`);
        return 1;
      }
      if (action === "-") this.traps?.delete(name);
      else {
        this.traps ??= new Map();
        this.traps.set(name, action);
      }
    }
    return 0;
  }

  private async wait(): Promise<number> {
    const jobs = this.jobs?.splice(0) ?? [];
    if (jobs.length === 0) return 0;
    const result = await this.block(Promise.all(jobs), true);
    if (result === "interrupted") {
      // A trapped signal interrupts `wait` with 128 + its number; the jobs keep running.
      this.jobs ??= [];
      this.jobs.push(...jobs);
      return 128 + (SIGNAL_NUMBERS[this.pendingSignals?.[0] ?? "SIGTERM"] ?? 15);
    }
    return result.at(-1) ?? 0;
  }
}
