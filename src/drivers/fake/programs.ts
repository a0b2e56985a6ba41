// The programs of the fake busybox image (shell.ts runs them): which names exist, and which of them
// only wait (a server until a signal, `sleep` for its time), which a process runs without the
// shell's frames (most of a simulation's main processes; issue 34).

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
