// How a service's containers are stopped (issue 27): the signal that asks their command to stop
// (`stop_signal`, Docker's StopSignal) and how long a stop or redeploy waits for it before the
// engine kills the command (`stop_grace_period`, in seconds: the stop call's `t`). Pure rules,
// shared by the service rules, the stack-file dialect and the runtime.

import { SERVICE_LIMITS } from "../contract/limits.ts";

/** Bounds of stop_grace_period, in seconds: an hour is longer than any graceful shutdown. */
export const STOP_GRACE_PERIOD_MAX_S = SERVICE_LIMITS.stopGracePeriodMaxS;

/** Linux's signals by number (from 1), as Docker names them (`SIGRTMIN+n` aside). */
export const SIGNALS: readonly string[] = [
  "SIGHUP",
  "SIGINT",
  "SIGQUIT",
  "SIGILL",
  "SIGTRAP",
  "SIGABRT",
  "SIGBUS",
  "SIGFPE",
  "SIGKILL",
  "SIGUSR1",
  "SIGSEGV",
  "SIGUSR2",
  "SIGPIPE",
  "SIGALRM",
  "SIGTERM",
  "SIGSTKFLT",
  "SIGCHLD",
  "SIGCONT",
  "SIGSTOP",
  "SIGTSTP",
  "SIGTTIN",
  "SIGTTOU",
  "SIGURG",
  "SIGXCPU",
  "SIGXFSZ",
  "SIGVTALRM",
  "SIGPROF",
  "SIGWINCH",
  "SIGIO",
  "SIGPWR",
  "SIGSYS",
];

/** The signal every engine sends when a container names none (nor its image). */
export const DEFAULT_STOP_SIGNAL = "SIGTERM";

export const STOP_SIGNAL_PROBLEM =
  "must be a signal name such as SIGTERM, SIGINT, SIGQUIT or SIGUSR1 (or its number, 1 to 31); SIGSTOP would never stop the command";

/**
 * `SIGTERM`, `TERM`, `term` or `15` → `SIGTERM`; undefined for anything else, and for SIGSTOP,
 * which suspends the command instead of asking it to stop (the stop would always end in a kill).
 */
export function stopSignalName(value: string): string | undefined {
  const text = value.trim().toUpperCase();
  const name = /^\d+$/.test(text)
    ? SIGNALS[Number(text) - 1]
    : SIGNALS.find((s) => s === text || s === `SIG${text}`);
  return name === "SIGSTOP" ? undefined : name;
}

/** The number of a signal name stopSignalName gave. */
export function signalNumber(name: string): number | undefined {
  const i = SIGNALS.indexOf(name);
  return i < 0 ? undefined : i + 1;
}

const DURATION_UNITS_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * A compose duration (`30s`, `1m30s`, `1h`, `1500ms`) → whole seconds, or a sentence naming the
 * problem. Its bounds are the schema's, as for a number of seconds.
 */
export function durationSeconds(text: string): number | string {
  const trimmed = text.trim();
  if (!/^(\d+(\.\d+)?(us|ms|s|m|h))+$/.test(trimmed))
    return 'must be a duration such as "10s", "1m30s" or "1h", or a number of seconds';
  let ms = 0;
  for (const [, amount, , unit] of trimmed.matchAll(/(\d+(\.\d+)?)(us|ms|s|m|h)/g))
    ms += Number(amount) * DURATION_UNITS_MS[unit!]!;
  const seconds = Math.round(ms) / 1000;
  if (!Number.isInteger(seconds))
    return "must be a whole number of seconds (the engine counts the grace period in seconds)";
  return seconds;
}

/** Seconds as a compose duration, the way export writes them (`90` → `1m30s`). */
export function durationText(seconds: number): string {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  const text = `${h ? `${h}h` : ""}${m ? `${m}m` : ""}${s ? `${s}s` : ""}`;
  return text || "0s";
}
