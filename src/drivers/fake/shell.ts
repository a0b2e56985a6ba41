// A tiny stand-in for the programs of a busybox image, so fake containers behave like real ones for
// the commands tests and simulations use: `echo`, `printf`, `sleep`, `seq`, `cat`, `env`, `exit`, and
// `sh -c` scripts made of simple commands joined by `;`, `&&`, `||` and `&`, with `trap` and `wait`,
// and integer arithmetic `$((…))` (+ - * / % and parentheses over numbers and variables).
// Signals follow Linux rules for PID 1: a signal without a handler is ignored, except SIGKILL.
// Anything else (pipes, loops, `$(…)`, files) is refused with a message on stderr and exit status 2,
// so a test never silently passes on behaviour the fake does not have.
import { SIGNALS } from "../../domain/stop.ts";
import type { OutputStream } from "../engine.ts";

/** Linux's signal numbers (a container's stop signal may be any of them). */
export const SIGNAL_NUMBERS: Record<string, number> = Object.fromEntries(
  SIGNALS.map((name, i) => [name, i + 1]),
);

/** Accepts "SIGTERM", "TERM", "term" or "15"; undefined for an unknown signal. */
export function normalizeSignal(signal: string): string | undefined {
  const upper = signal.trim().toUpperCase();
  if (/^\d+$/.test(upper)) {
    return Object.entries(SIGNAL_NUMBERS).find(([, number]) => String(number) === upper)?.[0];
  }
  const name = upper.startsWith("SIG") ? upper : `SIG${upper}`;
  return name in SIGNAL_NUMBERS ? name : undefined;
}

/** Programs of the fake busybox image; a name outside this set (and the image's own) is "not found". */
export const BUILTIN_PROGRAMS = new Set([
  "sh",
  "ash",
  "echo",
  "printf",
  "sleep",
  "seq",
  "cat",
  "env",
  "true",
  "false",
  "hostname",
  "id",
  "date",
  "httpd",
]);

export interface ProcessIO {
  write(stream: OutputStream, text: string): void;
  /** Standard input, or undefined when none is attached (reads see end of input at once). */
  stdin: AsyncIterable<string> | undefined;
  env: Record<string, string>;
  hostname: string;
}

export interface ProcessOptions {
  /** PID 1 of a container ignores signals it has no handler for. */
  pid1: boolean;
  /** Extra programs of the image (servers): they run until stopped and exit 0 on SIGTERM or SIGINT. */
  programs: ReadonlySet<string>;
}

const basename = (path: string): string => path.slice(path.lastIndexOf("/") + 1);

/** Whether argv[0] names a program the fake image has; the engine refuses to start anything else. */
export function hasProgram(argv: readonly string[], programs: ReadonlySet<string>): boolean {
  const name = basename(argv[0] ?? "");
  return BUILTIN_PROGRAMS.has(name) || programs.has(name);
}

class Killed {
  constructor(readonly status: number) {}
}

class ExitRequest {
  constructor(readonly status: number) {}
}

class Unsupported extends Error {}

// ---- parsing ---------------------------------------------------------------------------------------

type Segment =
  | { kind: "text"; value: string }
  | { kind: "var"; name: string }
  | { kind: "arith"; expression: string };
type Word = Segment[];
type Redirect = { fd: 1 | 2; to: "stdout" | "stderr" | "null" };

interface SimpleCommand {
  words: Word[];
  redirects: Redirect[];
}

interface AndOr {
  /** Each command runs when the previous status fits its connector. */
  steps: Array<{ connector: "&&" | "||" | undefined; command: SimpleCommand }>;
  background: boolean;
}

const RESERVED = new Set([
  "if",
  "then",
  "else",
  "elif",
  "fi",
  "for",
  "while",
  "until",
  "do",
  "done",
  "case",
  "esac",
]);

function parseScript(script: string): AndOr[] {
  const lists: AndOr[] = [];
  let steps: AndOr["steps"] = [];
  let command: SimpleCommand = { words: [], redirects: [] };
  let connector: "&&" | "||" | undefined;
  let i = 0;

  const finishCommand = (): boolean => {
    if (command.words.length === 0) {
      if (command.redirects.length > 0) throw new Unsupported("a redirection without a command");
      return false;
    }
    const first = command.words[0]!;
    const literal = first.length === 1 && first[0]!.kind === "text" ? first[0]!.value : undefined;
    if (literal !== undefined && RESERVED.has(literal)) throw new Unsupported(`"${literal}"`);
    if (literal?.endsWith("()")) throw new Unsupported("functions");
    steps.push({ connector, command });
    command = { words: [], redirects: [] };
    return true;
  };
  const finishList = (background: boolean) => {
    const had = finishCommand();
    if (!had && connector) throw new Unsupported(`a command after "${connector}"`);
    if (steps.length > 0) lists.push({ steps, background });
    steps = [];
    connector = undefined;
  };

  while (i < script.length) {
    const ch = script[i]!;
    if (ch === " " || ch === "\t") {
      i += 1;
    } else if (ch === "#") {
      while (i < script.length && script[i] !== "\n") i += 1;
    } else if (ch === ";" || ch === "\n") {
      finishList(false);
      i += 1;
    } else if (script.startsWith("&&", i) || script.startsWith("||", i)) {
      if (!finishCommand()) throw new Unsupported(`"${script.slice(i, i + 2)}" without a command before it`);
      connector = script.slice(i, i + 2) as "&&" | "||";
      i += 2;
    } else if (ch === "&") {
      finishList(true);
      i += 1;
    } else if (ch === "|") {
      throw new Unsupported("pipes");
    } else if (ch === "(" || ch === ")" || ch === "{" || ch === "}" || ch === "`" || ch === "<") {
      throw new Unsupported(`"${ch}"`);
    } else if (/^(?:[12])?>/.test(script.slice(i, i + 2))) {
      const match = /^([12])?>(&[12]|\s*\/dev\/null)/.exec(script.slice(i));
      if (!match) throw new Unsupported("redirection to files");
      const fd = match[1] === "2" ? 2 : 1;
      const target = match[2]!.trim();
      command.redirects.push({ fd, to: target === "&1" ? "stdout" : target === "&2" ? "stderr" : "null" });
      i += match[0].length;
    } else {
      const [word, next] = readWord(script, i);
      command.words.push(word);
      i = next;
    }
  }
  finishList(false);
  return lists;
}

function readWord(script: string, start: number): [Word, number] {
  const word: Word = [];
  let text = "";
  const flush = () => {
    if (text) word.push({ kind: "text", value: text });
    text = "";
  };
  const readVar = (i: number): number => {
    // i points at "$"
    const rest = script.slice(i + 1);
    if (rest.startsWith("((")) {
      const end = arithmeticEnd(script, i + 3);
      flush();
      word.push({ kind: "arith", expression: script.slice(i + 3, end) });
      return end + 2;
    }
    if (rest.startsWith("(")) throw new Unsupported("command substitution");
    const braced = /^\{([A-Za-z_][A-Za-z0-9_]*)\}/.exec(rest);
    const plain = /^([A-Za-z_][A-Za-z0-9_]*|[?$#0-9])/.exec(rest);
    const match = braced ?? plain;
    if (!match) {
      text += "$";
      return i + 1;
    }
    flush();
    word.push({ kind: "var", name: match[1]! });
    return i + 1 + match[0].length;
  };
  let i = start;
  while (i < script.length) {
    const ch = script[i]!;
    if (" \t\n;&|<>()`{}".includes(ch)) break;
    if (ch === "'") {
      const end = script.indexOf("'", i + 1);
      if (end < 0) throw new Unsupported("an unterminated quote");
      text += script.slice(i + 1, end);
      i = end + 1;
    } else if (ch === '"') {
      i += 1;
      while (i < script.length && script[i] !== '"') {
        if (script[i] === "\\" && i + 1 < script.length && '$`"\\\n'.includes(script[i + 1]!)) {
          text += script[i + 1];
          i += 2;
        } else if (script[i] === "$") {
          i = readVar(i);
        } else if (script[i] === "`") {
          throw new Unsupported("command substitution");
        } else {
          text += script[i];
          i += 1;
        }
      }
      if (i >= script.length) throw new Unsupported("an unterminated quote");
      i += 1;
    } else if (ch === "\\") {
      text += script[i + 1] ?? "";
      i += 2;
    } else if (ch === "$") {
      i = readVar(i);
    } else {
      text += ch;
      i += 1;
    }
  }
  flush();
  return [word, i];
}

/** The index of the "))" closing an arithmetic expansion whose expression starts at `start`. */
function arithmeticEnd(script: string, start: number): number {
  let depth = 0;
  for (let i = start; i < script.length; i += 1) {
    const ch = script[i];
    if (ch === "(") depth += 1;
    else if (ch === ")") {
      if (depth === 0) {
        if (script[i + 1] !== ")") throw new Unsupported("command substitution");
        return i;
      }
      depth -= 1;
    }
  }
  throw new Unsupported("an unterminated $((");
}

/**
 * Evaluates an arithmetic expansion as sh does for the operators the fake has: integers, variables
 * (unset or empty is 0), unary + and -, * / %, + -, parentheses; anything else is unsupported.
 */
export function evaluateArithmetic(expression: string, variable: (name: string) => string): number {
  const tokens =
    expression.match(/\s+|\d+|[A-Za-z_][A-Za-z0-9_]*|\$[A-Za-z_][A-Za-z0-9_]*|[-+*/%()]|./g) ?? [];
  const list = tokens.filter((t) => !/^\s+$/.test(t));
  let at = 0;
  const fail = (): never => {
    throw new Unsupported(`arithmetic "${expression}"`);
  };
  const value = (text: string): number => {
    const trimmed = text.trim();
    if (trimmed === "") return 0;
    if (!/^-?\d+$/.test(trimmed)) return fail();
    return Number(trimmed);
  };
  const primary = (): number => {
    const token = list[at++];
    if (token === undefined) return fail();
    if (token === "(") {
      const inner = sum();
      if (list[at++] !== ")") fail();
      return inner;
    }
    if (token === "-") return -primary();
    if (token === "+") return primary();
    if (/^\d+$/.test(token)) return Number(token);
    if (/^\$?[A-Za-z_]/.test(token)) return value(variable(token.replace(/^\$/, "")));
    return fail();
  };
  const product = (): number => {
    let left = primary();
    while (list[at] === "*" || list[at] === "/" || list[at] === "%") {
      const op = list[at++];
      const right = primary();
      if (op !== "*" && right === 0) throw new Unsupported("division by zero");
      left = op === "*" ? left * right : op === "/" ? Math.trunc(left / right) : left % right;
    }
    return left;
  };
  const sum = (): number => {
    let left = product();
    while (list[at] === "+" || list[at] === "-") {
      const op = list[at++];
      const right = product();
      left = op === "+" ? left + right : left - right;
    }
    return left;
  };
  const result = sum();
  if (at !== list.length) fail();
  return result;
}

// ---- running ---------------------------------------------------------------------------------------

/** One running program: a PID 1 or an exec'd command. `exited` resolves with its exit status. */
export class FakeProcess {
  readonly exited: Promise<number>;
  private killedStatus: number | undefined;
  private readonly killWaiters = new Set<(killed: Killed) => void>();
  private readonly interruptWaiters = new Set<() => void>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly children = new Set<FakeProcess>();
  private readonly traps = new Map<string, string>();
  private readonly pendingSignals: string[] = [];
  private readonly jobs: Array<Promise<number>> = [];
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
    this.exited = new Promise<number>((resolve) => {
      // Started on the next tick so the caller can finish its bookkeeping (state, events) first.
      setImmediate(() => {
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
    void this.exited.then(() => {
      for (const child of this.children) child.kill(137);
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
    } else if (this.traps.has(name)) {
      this.pendingSignals.push(name);
      for (const wake of this.interruptWaiters) wake();
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
    for (const child of this.children) child.kill(status);
    const killed = new Killed(status);
    for (const waiter of this.killWaiters) waiter(killed);
    this.cleanup();
  }

  private cleanup(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    this.killWaiters.clear();
    this.interruptWaiters.clear();
  }

  /** Waits for `promise`, unless killed (throws) or, when interruptible, a handled signal arrives. */
  private block<T>(promise: Promise<T>, interruptible: boolean): Promise<T | "interrupted"> {
    if (this.killedStatus !== undefined) return Promise.reject(new Killed(this.killedStatus));
    if (interruptible && this.pendingSignals.length > 0) return Promise.resolve("interrupted");
    return new Promise<T | "interrupted">((resolve, reject) => {
      const onKill = (killed: Killed) => finish(() => reject(killed));
      const onInterrupt = () => finish(() => resolve("interrupted"));
      const finish = (action: () => void) => {
        this.killWaiters.delete(onKill);
        this.interruptWaiters.delete(onInterrupt);
        action();
      };
      this.killWaiters.add(onKill);
      if (interruptible) this.interruptWaiters.add(onInterrupt);
      promise.then(
        (value) => finish(() => resolve(value)),
        (error: unknown) => finish(() => reject(error)),
      );
    });
  }

  private sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      if (!Number.isFinite(ms)) return; // sleep infinity: only a signal ends it
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        resolve();
      }, ms);
      this.timers.add(timer);
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
      for (;;) {
        const next = await this.block(iterator.next(), false);
        if (next === "interrupted" || next.done) break;
        buffered += next.value;
        let nl = buffered.indexOf("\n");
        while (nl >= 0) {
          await this.runScript(buffered.slice(0, nl), io);
          buffered = buffered.slice(nl + 1);
          nl = buffered.indexOf("\n");
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
        this.children.add(job);
        this.jobs.push(job.exited);
        void job.exited.then(() => this.children.delete(job));
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
    while (this.pendingSignals.length > 0) {
      const signal = this.pendingSignals.shift()!;
      const action = this.traps.get(signal);
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
        return this.echo(args, io);
      case "printf":
        return this.printf(args, io);
      case "sleep":
        return this.sleepCommand(args, io);
      case "seq":
        return this.seq(args, io);
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

  private echo(args: string[], io: ProcessIO): number {
    let newline = true;
    let escapes = false;
    while (args[0] === "-n" || args[0] === "-e" || args[0] === "-ne" || args[0] === "-en") {
      const flag = args.shift()!;
      if (flag.includes("n")) newline = false;
      if (flag.includes("e")) escapes = true;
    }
    const text = args.join(" ");
    io.write("stdout", (escapes ? interpretEscapes(text) : text) + (newline ? "\n" : ""));
    return 0;
  }

  private printf(args: string[], io: ProcessIO): number {
    const [format = "", ...values] = args;
    let index = 0;
    const text = interpretEscapes(format).replace(/%([sd%])/g, (_, kind: string) => {
      if (kind === "%") return "%";
      const value = values[index++] ?? "";
      return kind === "d" ? String(Number.parseInt(value, 10) || 0) : value;
    });
    io.write("stdout", text);
    return 0;
  }

  private async sleepCommand(args: string[], io: ProcessIO): Promise<number> {
    let totalMs = 0;
    for (const arg of args) {
      const match = /^(\d+(?:\.\d*)?|\.\d+|inf|infinity)([smhd]?)$/.exec(arg);
      if (!match) {
        io.write("stderr", `sleep: invalid number '${arg}'\n`);
        return 1;
      }
      const unit = { "": 1, s: 1, m: 60, h: 3600, d: 86400 }[match[2] as "" | "s" | "m" | "h" | "d"];
      totalMs += match[1]!.startsWith("inf") ? Number.POSITIVE_INFINITY : Number(match[1]) * unit * 1000;
    }
    if (args.length === 0) {
      io.write("stderr", "sleep: missing operand\n");
      return 1;
    }
    // A foreground child keeps running while the shell holds a signal for later, as in a real shell.
    await this.block(this.sleep(totalMs), false);
    return 0;
  }

  private seq(args: string[], io: ProcessIO): number {
    const numbers = args.map(Number);
    if (numbers.length === 0 || numbers.length > 3 || numbers.some((n) => !Number.isFinite(n))) {
      io.write("stderr", "seq: invalid arguments\n");
      return 1;
    }
    const [first, increment, last] =
      numbers.length === 1
        ? [1, 1, numbers[0]!]
        : numbers.length === 2
          ? [numbers[0]!, 1, numbers[1]!]
          : numbers;
    if (increment === 0) return 1;
    let out = "";
    for (let n = first!; increment! > 0 ? n <= last! : n >= last!; n += increment!) out += `${n}\n`;
    io.write("stdout", out);
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
      if (action === "-") this.traps.delete(name);
      else this.traps.set(name, action);
    }
    return 0;
  }

  private async wait(): Promise<number> {
    const jobs = this.jobs.splice(0);
    if (jobs.length === 0) return 0;
    const result = await this.block(Promise.all(jobs), true);
    if (result === "interrupted") {
      // A trapped signal interrupts `wait` with 128 + its number; the jobs keep running.
      this.jobs.push(...jobs);
      return 128 + (SIGNAL_NUMBERS[this.pendingSignals[0] ?? "SIGTERM"] ?? 15);
    }
    return result.at(-1) ?? 0;
  }
}

function interpretEscapes(text: string): string {
  return text.replace(/\\([ntr\\]|0[0-7]{0,3})/g, (_, code: string) => {
    if (code === "n") return "\n";
    if (code === "t") return "\t";
    if (code === "r") return "\r";
    if (code === "\\") return "\\";
    return String.fromCharCode(Number.parseInt(code, 8));
  });
}
