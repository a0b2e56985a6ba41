// The programs of the fake busybox image (shell.ts runs them): which names exist, and which of them
// only wait (a server until a signal, `sleep` for its time), which a process runs without the
// shell's frames (most of a simulation's main processes; issue 34); and the builtins that only print.

import type { OutputStream } from "../engine.ts";
import { interpretEscapes } from "./shell-parse.ts";

export interface ProcessIO {
  write(stream: OutputStream, text: string): void;
  /** Standard input, or undefined when none is attached (reads see end of input at once). */
  stdin: AsyncIterable<string> | undefined;
  env: Record<string, string>;
  hostname: string;
  /** On a terminal an interactive shell shows its prompt before each line it reads. */
  tty?: boolean;
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

export const basename = (path: string): string => path.slice(path.lastIndexOf("/") + 1);

/** Whether argv[0] names a program the fake image has; the engine refuses to start anything else. */
export function hasProgram(argv: readonly string[], programs: ReadonlySet<string>): boolean {
  const name = basename(argv[0] ?? "");
  return BUILTIN_PROGRAMS.has(name) || programs.has(name);
}

/** How long `sleep <args>` sleeps (ms; Infinity for inf), or undefined when an argument is invalid. */
export function sleepMs(args: readonly string[]): number | undefined {
  let totalMs = 0;
  for (const arg of args) {
    const match = /^(\d+(?:\.\d*)?|\.\d+|inf|infinity)([smhd]?)$/.exec(arg);
    if (!match) return undefined;
    const unit = { "": 1, s: 1, m: 60, h: 3600, d: 86400 }[match[2] as "" | "s" | "m" | "h" | "d"];
    totalMs += match[1]!.startsWith("inf") ? Number.POSITIVE_INFINITY : Number(match[1]) * unit * 1000;
  }
  return totalMs;
}

/**
 * How long a program that only waits runs (ms, Infinity until a signal ends it), or undefined for
 * any other: a server (until a signal), `sleep` with valid arguments (exit 0 when the time is up).
 */
export function waitOnly(argv: readonly string[], isServer: boolean): number | undefined {
  if (isServer) return Number.POSITIVE_INFINITY;
  if (basename(argv[0] ?? "") !== "sleep" || argv.length < 2) return undefined;
  return sleepMs(argv.slice(1));
}

/** Builtins that only print (shell.ts runs them). */
export function echo(args: string[], io: ProcessIO): number {
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

export function printf(args: string[], io: ProcessIO): number {
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

export function seq(args: string[], io: ProcessIO): number {
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
