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
  /** Key material for secrets encrypted at rest; a key file in the data directory when unset. */
  secretKey?: string;
  /** How long a worker's claim on an action lasts without a heartbeat. */
  actionLeaseMs: number;
  /** Default timeout of one action step, unless the action kind says otherwise. */
  actionStepTimeoutMs: number;
  /** How often idle workers look for claimable actions (they are also woken in-process). */
  actionPollMs: number;
  /** An action interrupted this many times (crashes) is failed instead of resumed again. */
  actionMaxAttempts: number;
  /** How often the reconciler compares every container with its engine (events trigger it too). */
  reconcileIntervalMs: number;
  /** Seconds an engine waits between SIGTERM and SIGKILL when Berth stops a container. */
  containerStopTimeoutS: number;
  nodes: {
    /** How often the health watcher pings every node's engine. */
    healthIntervalMs: number;
    /** How long a node may stay silent before it is Unreachable. */
    unreachableGraceMs: number;
    /** Scales the simulated providers' delays (1 = realistic). */
    simDelayFactor: number;
    /** Whether non-admin users may attach engines by address. */
    allowUserEngines: boolean;
    /** Engine attached to the admin's namespace at start-up when it has no node (DOCKER_HOST or the default socket). */
    dockerHost: string;
    /** Whether to attach that engine automatically. */
    autoAttach: boolean;
    /** The /16 reserved for local nodes. */
    localLabRange: string;
    /** The host bridge local nodes are attached to (an interface name, default berth0). */
    localBridge: string;
    /** Image archives or images of the host's engine loaded into every new local node (CONTRACT §13). */
    localNodeImages: string[];
  };
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

function parseBool(name: string, value: string | undefined, fallback: boolean): boolean {
  if (value === undefined || value === "") return fallback;
  if (/^(1|true|yes|on)$/i.test(value)) return true;
  if (/^(0|false|no|off)$/i.test(value)) return false;
  throw new ConfigError(`${name} must be true or false, got "${value}"`);
}

function parseFactor(value: string | undefined): number {
  if (value === undefined || value === "") return 1;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0 || n > 100) {
    throw new ConfigError(`BERTH_SIM_DELAY_FACTOR must be a number between 0 and 100, got "${value}"`);
  }
  return n;
}

function parseBridgeName(value: string): string {
  if (!/^[\w-]{1,15}$/.test(value)) {
    throw new ConfigError(
      `BERTH_LOCAL_BRIDGE must be an interface name (1 to 15 letters, digits, _ or -), got "${value}"`,
    );
  }
  return value;
}

function parseLabRange(value: string): string {
  const m = /^10\.(\d{1,3})\.0\.0\/16$/.exec(value);
  if (!m || Number(m[1]) > 255) {
    throw new ConfigError(
      `BERTH_LOCAL_LAB_RANGE must be a private /16 of the form 10.N.0.0/16, got "${value}"`,
    );
  }
  return value;
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
    secretKey: env.BERTH_SECRET_KEY || undefined,
    actionLeaseMs: parsePositiveInt("BERTH_ACTION_LEASE_MS", env.BERTH_ACTION_LEASE_MS, 5000),
    actionStepTimeoutMs: parsePositiveInt(
      "BERTH_ACTION_STEP_TIMEOUT_MS",
      env.BERTH_ACTION_STEP_TIMEOUT_MS,
      300_000,
    ),
    actionPollMs: parsePositiveInt("BERTH_ACTION_POLL_MS", env.BERTH_ACTION_POLL_MS, 1000),
    actionMaxAttempts: parsePositiveInt("BERTH_ACTION_MAX_ATTEMPTS", env.BERTH_ACTION_MAX_ATTEMPTS, 5),
    reconcileIntervalMs: parsePositiveInt(
      "BERTH_RECONCILE_INTERVAL_MS",
      env.BERTH_RECONCILE_INTERVAL_MS,
      15_000,
    ),
    containerStopTimeoutS: parsePositiveInt(
      "BERTH_CONTAINER_STOP_TIMEOUT_S",
      env.BERTH_CONTAINER_STOP_TIMEOUT_S,
      10,
    ),
    nodes: {
      healthIntervalMs: parsePositiveInt(
        "BERTH_NODE_HEALTH_INTERVAL_MS",
        env.BERTH_NODE_HEALTH_INTERVAL_MS,
        5000,
      ),
      unreachableGraceMs: parsePositiveInt(
        "BERTH_NODE_UNREACHABLE_GRACE_MS",
        env.BERTH_NODE_UNREACHABLE_GRACE_MS,
        15_000,
      ),
      simDelayFactor: parseFactor(env.BERTH_SIM_DELAY_FACTOR),
      allowUserEngines: parseBool("BERTH_ALLOW_USER_ENGINES", env.BERTH_ALLOW_USER_ENGINES, false),
      dockerHost: env.DOCKER_HOST || "unix:///var/run/docker.sock",
      autoAttach: parseBool("BERTH_AUTO_ATTACH_ENGINE", env.BERTH_AUTO_ATTACH_ENGINE, true),
      localLabRange: parseLabRange(env.BERTH_LOCAL_LAB_RANGE ?? "10.231.0.0/16"),
      localBridge: parseBridgeName(env.BERTH_LOCAL_BRIDGE || "berth0"),
      localNodeImages: (env.BERTH_LOCAL_NODE_IMAGES ?? "")
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean),
    },
  };
}
