// Typed configuration. This is the only module that reads process.env: everything
// else receives a Config object from the composition root (src/main.ts).
import path from "node:path";

export type LogLevel = "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";

export interface Config {
  listen: { host: string; port: number };
  dataDir: string;
  databaseUrl: string;
  publicUrl: string;
  admin: { username?: string; password?: string; apiKey?: string };
  logLevel: LogLevel;
  /** How long a worker's claim on an action lasts without a heartbeat. */
  actionLeaseMs: number;
  /** Default timeout of one action step, unless the action kind says otherwise. */
  actionStepTimeoutMs: number;
  /** How often idle workers look for claimable actions (they are also woken in-process). */
  actionPollMs: number;
  /** An action interrupted this many times (crashes) is failed instead of resumed again. */
  actionMaxAttempts: number;
}

export class ConfigError extends Error {}

const LOG_LEVELS: LogLevel[] = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

function parseListen(value: string): { host: string; port: number } {
  const match = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(value);
  const port = match ? Number(match[2]) : Number.NaN;
  if (!match || !(port >= 0 && port <= 65535)) {
    throw new ConfigError(`BERTH_LISTEN must be <host>:<port> (for example 127.0.0.1:8000), got "${value}"`);
  }
  return { host: match[1]!.replace(/^\[|\]$/g, ""), port };
}

function parsePositiveInt(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined || value === "") return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0)
    throw new ConfigError(`${name} must be a positive integer, got "${value}"`);
  return n;
}

/** Reads configuration from an environment map; throws ConfigError with one clear line. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const listen = parseListen(env.BERTH_LISTEN ?? "127.0.0.1:8000");
  const dataDir = path.resolve(env.BERTH_DATA_DIR ?? "./data");
  const databaseUrl = env.BERTH_DATABASE_URL ?? `sqlite:${path.join(dataDir, "berth.sqlite")}`;
  if (!/^(sqlite:|postgres:\/\/|postgresql:\/\/)/.test(databaseUrl)) {
    throw new ConfigError(
      `BERTH_DATABASE_URL must start with sqlite: or postgres://, got "${databaseUrl.replace(/\/\/[^@]*@/, "//***@")}"`,
    );
  }
  const host = listen.host.includes(":") ? `[${listen.host}]` : listen.host;
  const publicUrl = (
    env.BERTH_PUBLIC_URL ?? `http://${host === "0.0.0.0" ? "127.0.0.1" : host}:${listen.port}`
  ).replace(/\/+$/, "");
  try {
    const u = new URL(publicUrl);
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error("scheme");
  } catch {
    throw new ConfigError(`BERTH_PUBLIC_URL must be an http(s) URL, got "${publicUrl}"`);
  }
  const logLevel = (env.BERTH_LOG_LEVEL ?? "info") as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`BERTH_LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}, got "${logLevel}"`);
  }
  const admin = {
    username: env.BERTH_ADMIN_USERNAME || undefined,
    password: env.BERTH_ADMIN_PASSWORD || undefined,
    apiKey: env.BERTH_ADMIN_API_KEY || undefined,
  };
  const given = [admin.username, admin.password, admin.apiKey].filter(Boolean).length;
  if (given !== 0 && given !== 3) {
    throw new ConfigError(
      "BERTH_ADMIN_USERNAME, BERTH_ADMIN_PASSWORD and BERTH_ADMIN_API_KEY must be set together or not at all",
    );
  }
  if (admin.apiKey && admin.apiKey.length < 16) {
    throw new ConfigError("BERTH_ADMIN_API_KEY must be at least 16 characters");
  }
  return {
    listen,
    dataDir,
    databaseUrl,
    publicUrl,
    admin,
    logLevel,
    actionLeaseMs: parsePositiveInt("BERTH_ACTION_LEASE_MS", env.BERTH_ACTION_LEASE_MS, 5000),
    actionStepTimeoutMs: parsePositiveInt(
      "BERTH_ACTION_STEP_TIMEOUT_MS",
      env.BERTH_ACTION_STEP_TIMEOUT_MS,
      300_000,
    ),
    actionPollMs: parsePositiveInt("BERTH_ACTION_POLL_MS", env.BERTH_ACTION_POLL_MS, 1000),
    actionMaxAttempts: parsePositiveInt("BERTH_ACTION_MAX_ATTEMPTS", env.BERTH_ACTION_MAX_ATTEMPTS, 5),
  };
}
