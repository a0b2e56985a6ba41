// Health checks of a service's containers (issue 29): what a definition says (`health_check`),
// what an engine is asked to run, and what a container's health reads as. Pure rules, shared by
// the service rules, the stack-file dialect, the container spec and the views.
//
// Checks run where the container runs, as the engine's own health check (Docker's HEALTHCHECK),
// never from the control plane: a command check is the engine's CMD-SHELL as it is; an HTTP or TCP
// check becomes a small POSIX sh script run by the engine inside the container, so `127.0.0.1` is
// the container's own loopback (its network namespace). The script uses the first tool the image
// has: curl, then nc (busybox's, which every busybox image has, sending a bare HTTP/1.0 request),
// then wget, then bash's /dev/tcp. Why not a helper binary Berth would copy into each container:
// it would need a build per architecture, a copy into every container (refused by read-only root
// filesystems) and a path that may collide with the image's; the image's own tools need nothing.
// An image with none of them (distroless) says so in its health log: use a command check there.
import type { FieldProblem } from "./errors.ts";

/** A container's health as its engine last reported it; null (the wire's "none"): no check. */
export type ContainerHealth = "starting" | "healthy" | "unhealthy";
export const CONTAINER_HEALTH: readonly ContainerHealth[] = ["starting", "healthy", "unhealthy"];
/** The wire's values of a container's `health`. */
export type HealthView = ContainerHealth | "none";

/** `none` turns off a check the image declares (HEALTHCHECK NONE). */
export type HealthCheckType = "command" | "http" | "tcp" | "none";
export const HEALTH_CHECK_TYPES: readonly HealthCheckType[] = ["command", "http", "tcp", "none"];

/** A service's health check as stored; times in seconds (fractions allowed). */
export interface HealthCheck {
  type: HealthCheckType;
  /** command: a shell command run with the image's sh; exit 0 means healthy. */
  command: string | null;
  /** http and tcp: the port inside the container. */
  port: number | null;
  /** http: the path asked with GET. */
  path: string | null;
  /** http: the status that means healthy. */
  status: number | null;
  /** Seconds between checks. */
  interval: number;
  /** Seconds one check may take before it counts as failed. */
  timeout: number;
  /** Consecutive failures that make the container unhealthy. */
  retries: number;
  /** Seconds after a start during which failures do not count (a success counts at once). */
  start_period: number;
}

export const HEALTH_DEFAULTS = {
  interval: 5,
  timeout: 3,
  retries: 3,
  start_period: 0,
  path: "/",
  status: 200,
};

/** A check as a body sends it (REST `health_check`); the schema has checked its types. */
export interface HealthCheckInput {
  type?: string;
  command?: string | null;
  port?: number | null;
  path?: string | null;
  status?: number | null;
  interval?: number | null;
  timeout?: number | null;
  retries?: number | null;
  start_period?: number | null;
}

/**
 * The stored check of a body's `health_check`: null (or absent) means none of the service's own
 * (the image's HEALTHCHECK applies, if it has one). Problems are named relative to `field`.
 */
export function normalizeHealthCheck(
  input: HealthCheckInput | null | undefined,
  field: string,
  problems: FieldProblem[],
): HealthCheck | null {
  if (input === null || input === undefined) return null;
  const add = (f: string, problem: string) => problems.push({ field: `${field}.${f}`, problem });
  const type = (input.type ?? (input.command ? "command" : undefined)) as HealthCheckType | undefined;
  if (type === undefined || !HEALTH_CHECK_TYPES.includes(type)) {
    add("type", "must be one of command, http, tcp, none");
    return null;
  }
  const check: HealthCheck = {
    type,
    command: null,
    port: null,
    path: null,
    status: null,
    interval: input.interval ?? HEALTH_DEFAULTS.interval,
    timeout: input.timeout ?? HEALTH_DEFAULTS.timeout,
    retries: input.retries ?? HEALTH_DEFAULTS.retries,
    start_period: input.start_period ?? HEALTH_DEFAULTS.start_period,
  };
  if (type === "command") {
    if (!input.command || input.command.trim() === "") add("command", "is required for a command check");
    else check.command = input.command;
  } else if (input.command) add("command", `is only used by a command check (this one is ${type})`);
  if (type === "http" || type === "tcp") {
    if (!input.port) add("port", `is required for an ${type} check: the port inside the container`);
    else check.port = input.port;
  } else if (input.port) add("port", `is only used by http and tcp checks (this one is ${type})`);
  if (type === "http") {
    const path = input.path || HEALTH_DEFAULTS.path;
    if (!path.startsWith("/") || /[\s'"\\]/.test(path))
      add("path", "must be a path starting with / without spaces, quotes or backslashes");
    else check.path = path;
    check.status = input.status ?? HEALTH_DEFAULTS.status;
  } else {
    if (input.path) add("path", `is only used by an http check (this one is ${type})`);
    if (input.status) add("status", `is only used by an http check (this one is ${type})`);
  }
  if (type === "none") return { ...check, interval: 0, timeout: 0, retries: 0, start_period: 0 };
  return check;
}

// ---------------------------------------------------------------------------------------------
// Stack files: compose's `healthcheck:` shape

const DURATION_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A compose duration (`30s`, `1m30s`, `500ms`) or a number of seconds → seconds; a string on a problem. */
export function durationToSeconds(value: unknown): number | string {
  if (typeof value === "number") return value;
  if (typeof value !== "string") return 'must be a duration such as "10s" or "500ms", or a number of seconds';
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text);
  if (!/^(\d+(\.\d+)?(us|ms|s|m|h))+$/.test(text))
    return 'must be a duration such as "10s", "1m30s" or "500ms", or a number of seconds';
  let ms = 0;
  for (const [, amount, , unit] of text.matchAll(/(\d+(\.\d+)?)(us|ms|s|m|h)/g))
    ms += Number(amount) * DURATION_MS[unit!]!;
  return Math.round(ms) / 1000;
}

/** Seconds as a compose duration (`0.5` → `500ms`, `90` → `90s`). */
function durationText(seconds: number): string {
  return Number.isInteger(seconds) ? `${seconds}s` : `${Math.round(seconds * 1000)}ms`;
}

/**
 * Compose's `healthcheck:` (test as `CMD-SHELL`/`CMD` list or a string, `disable`, durations as
 * text) → the REST `health_check` body. Berth's http and tcp checks are written
 * `http: {port, path, status}` and `tcp: {port}` in the same mapping. Problems name `field`'s keys.
 */
export function healthCheckFromStackFile(
  value: unknown,
  field: string,
  problems: FieldProblem[],
): HealthCheckInput | null {
  const add = (f: string, problem: string) => problems.push({ field: `${field}${f}`, problem });
  if (value === null) return null;
  if (typeof value !== "object" || Array.isArray(value)) {
    add("", "must be a mapping such as {test: [CMD-SHELL, …], interval: 10s}");
    return null;
  }
  const raw = value as Record<string, unknown>;
  const out: HealthCheckInput = {};
  const before = problems.length;
  for (const [key, v] of Object.entries(raw)) {
    switch (key) {
      case "test": {
        const words = typeof v === "string" ? ["CMD-SHELL", v] : v;
        if (!Array.isArray(words) || words.length === 0 || !words.every((w) => typeof w === "string")) {
          add(".test", "must be a command: a string, or a list starting with CMD-SHELL, CMD or NONE");
          break;
        }
        const [kind, ...rest] = words as string[];
        if (kind === "NONE") out.type = "none";
        else if (kind === "CMD-SHELL" && rest.length === 1)
          Object.assign(out, { type: "command", command: rest[0] });
        else if (kind === "CMD" && rest.length > 0)
          Object.assign(out, { type: "command", command: rest.map(shellQuote).join(" ") });
        else add(".test", "must start with CMD-SHELL (then one command), CMD (then its words) or NONE");
        break;
      }
      case "disable":
        if (v === true) out.type = "none";
        else if (v !== false) add(".disable", "must be true or false");
        break;
      case "http":
      case "tcp": {
        if (typeof v !== "object" || v === null || Array.isArray(v)) {
          add(`.${key}`, key === "http" ? "must be {port, path, status}" : "must be {port}");
          break;
        }
        const o = v as Record<string, unknown>;
        out.type = key;
        const port = Number(o.port);
        if (!Number.isInteger(port) || port < 1 || port > 65535)
          add(`.${key}.port`, "must be a port number between 1 and 65535");
        else out.port = port;
        if (key === "http") {
          if (o.path !== undefined) out.path = String(o.path);
          if (o.status !== undefined) {
            const status = Number(o.status);
            if (!Number.isInteger(status) || status < 100 || status > 599)
              add(".http.status", "must be an HTTP status between 100 and 599");
            else out.status = status;
          }
        }
        break;
      }
      case "interval":
      case "timeout":
      case "start_period": {
        const seconds = durationToSeconds(v);
        if (typeof seconds === "string") add(`.${key}`, seconds);
        else out[key] = seconds;
        break;
      }
      case "retries": {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1) add(".retries", "must be a whole number of at least 1");
        else out.retries = n;
        break;
      }
      default:
        add(
          `.${key}`,
          "is not a key of healthcheck: use test, interval, timeout, retries, start_period, disable, http or tcp",
        );
    }
  }
  if (out.type === undefined) {
    if (problems.length === before) add("", "names no check: give test, http or tcp (or disable: true)");
    return null;
  }
  return out;
}

/** The stack-file form of a stored check (export). */
export function healthCheckToStackFile(check: HealthCheck): Record<string, unknown> {
  if (check.type === "none") return { disable: true };
  const out: Record<string, unknown> = {};
  if (check.type === "command") out.test = ["CMD-SHELL", check.command ?? ""];
  if (check.type === "http") out.http = { port: check.port, path: check.path, status: check.status };
  if (check.type === "tcp") out.tcp = { port: check.port };
  out.interval = durationText(check.interval);
  out.timeout = durationText(check.timeout);
  out.retries = check.retries;
  if (check.start_period) out.start_period = durationText(check.start_period);
  return out;
}

/** A word quoted for sh when it needs it. */
function shellQuote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

// ---------------------------------------------------------------------------------------------
// What the engine runs

/** A container's health check as its engine reports it (Docker's State.Health). */
export interface HealthReport {
  status: ContainerHealth;
  /** Failed checks in a row. */
  failingStreak: number;
  /** The output of the last check, trimmed; empty when none ran yet. */
  lastOutput: string;
  /** The exit code of the last check; undefined when none ran yet. */
  lastExitCode: number | undefined;
}

/** The engine's health check (Docker's HealthConfig); drivers/engine.ts ContainerSpec.healthcheck. */
export interface EngineHealthcheck {
  /** ["CMD-SHELL", script], ["CMD", …] or ["NONE"]. */
  test: string[];
  intervalMs?: number;
  timeoutMs?: number;
  retries?: number;
  startPeriodMs?: number;
  /**
   * What an http or tcp script checks, for engines that cannot run it (the fake engine simulates
   * the container's servers, not a shell with pipes); a real engine runs `test`.
   */
  probe?: { type: "http" | "tcp"; port: number; path?: string; status?: number };
}

/** The engine check of a stored one; undefined: none of the service's (the image's applies). */
export function engineHealthcheck(check: HealthCheck | null | undefined): EngineHealthcheck | undefined {
  if (!check) return undefined;
  if (check.type === "none") return { test: ["NONE"] };
  const times = {
    intervalMs: Math.round(check.interval * 1000),
    timeoutMs: Math.round(check.timeout * 1000),
    retries: check.retries,
    startPeriodMs: Math.round(check.start_period * 1000),
  };
  if (check.type === "command") return { test: ["CMD-SHELL", check.command ?? "false"], ...times };
  const port = check.port ?? 0;
  const timeoutS = Math.max(1, Math.ceil(check.timeout));
  if (check.type === "tcp") {
    return { test: ["CMD-SHELL", tcpScript(port, timeoutS)], ...times, probe: { type: "tcp", port } };
  }
  const path = check.path ?? "/";
  const status = check.status ?? 200;
  return {
    test: ["CMD-SHELL", httpScript(port, path, status, timeoutS)],
    ...times,
    probe: { type: "http", port, path, status },
  };
}

/**
 * GET http://127.0.0.1:<port><path> inside the container; healthy when it answers `status`. The
 * status line is read by the shell itself (`read`), so nothing but the client tool is needed.
 */
export function httpScript(port: number, path: string, status: number, timeoutS: number): string {
  const url = `http://127.0.0.1:${port}${path}`;
  return [
    `u='${url}'; want=${status}; code=`,
    `if command -v curl >/dev/null 2>&1; then code=$(curl -s -o /dev/null -m ${timeoutS} -w '%{http_code}' "$u")`,
    `elif command -v nc >/dev/null 2>&1; then code=$(printf 'GET %s HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n' '${path}' | nc -w ${timeoutS} 127.0.0.1 ${port} | { read -r v c r; echo "$c"; })`,
    `elif command -v wget >/dev/null 2>&1; then code=$(wget -S -q -O /dev/null -T ${timeoutS} "$u" 2>&1 | sed -n 's/.*HTTP\\/[0-9.]* \\([0-9][0-9][0-9]\\).*/\\1/p' | { read -r c; echo "$c"; })`,
    `else echo 'the image has no curl, nc or wget for an HTTP check: use a command check'; exit 1; fi`,
    `case "$code" in "$want"*) exit 0;; esac`,
    `echo "GET $u answered \${code:-nothing}, expected $want"; exit 1`,
  ].join("\n");
}

/** A TCP connection to 127.0.0.1:<port> inside the container; healthy when it is accepted. */
export function tcpScript(port: number, timeoutS: number): string {
  return [
    `if command -v nc >/dev/null 2>&1; then nc -w ${timeoutS} 127.0.0.1 ${port} -e true </dev/null && exit 0`,
    `elif command -v bash >/dev/null 2>&1; then bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port}' && exit 0`,
    `else echo 'the image has no nc or bash for a TCP check: use a command check'; exit 1; fi`,
    `echo "nothing accepts connections on port ${port}"; exit 1`,
  ].join("\n");
}

/** A service's health signal: its spec state names stay, this says whether it works. */
export type ServiceHealth = "crashing" | "unhealthy" | "starting" | "healthy" | "none";

/**
 * What a service's live containers say, worst first: `crashing` when one that should run has
 * exited with an error, or its engine has had to restart it since Berth started it (a crash loop:
 * a start or redeploy by Berth begins the count again); then the worst health
 * of a check (unhealthy, starting), healthy when every checked container is; none without checks.
 */
export function serviceHealth(
  containers: readonly {
    state: string;
    desired: string;
    observed: string;
    exit_code: number | null;
    health: string | null;
    restart_count: number;
  }[],
): ServiceHealth {
  const live = containers.filter((c) => c.state !== "Terminated");
  const crashing = live.some(
    (c) =>
      c.desired === "running" &&
      (c.observed === "restarting" ||
        c.restart_count > 0 ||
        (c.observed === "exited" && c.exit_code !== null && c.exit_code !== 0)),
  );
  if (crashing) return "crashing";
  const health = new Set(live.map((c) => c.health));
  for (const h of ["unhealthy", "starting", "healthy"] as const) if (health.has(h)) return h;
  return "none";
}

/** The wire's `health` of a container record. */
export function healthView(health: string | null | undefined): HealthView {
  return health === "starting" || health === "healthy" || health === "unhealthy" ? health : "none";
}
