// Typed configuration. This is the only module that reads process.env: everything
// else receives a Config object from the composition root (src/main.ts). Long because every
// setting is parsed and checked here, one line each, for one clear error naming the variable.
import { isIP } from "node:net";
import path from "node:path";
import { type BackupSettings, parseBackupSettings } from "./backups.ts";
import { parseRouterSettings, type RouterSettings } from "./router.ts";

export type LogLevel = "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";

export interface Config {
  listen: { host: string; port: number };
  backups?: BackupSettings; // scheduled control-plane backups (BERTH_BACKUP_DIR; undefined: none)
  /** Hosts, addresses and CIDRs S3 backup targets may reach although they are not public. */
  backupTargetAllow: string[];
  dataDir: string;
  databaseUrl: string;
  /** Which variable chose the database, named when it cannot be opened at start. */
  databaseOrigin: { variable: "BERTH_DATABASE_URL" | "BERTH_DATA_DIR"; set: boolean };
  /** PostgreSQL connections in the pool (BERTH_DATABASE_POOL, 1 to 1000; SQLite ignores it). */
  databasePoolSize: number;
  publicUrl: string;
  /** The built dashboard (web/build.ts) served at `/`. */
  webDir: string;
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
  /** This process's name among replicas sharing a database (logs, leases, metrics); generated when unset. */
  replicaId?: string;
  /** How long a replica's leases on nodes and jobs last without a heartbeat (PostgreSQL replicas). */
  replicaLeaseMs: number;
  /** How long a graceful stop (SIGTERM) may take: running actions finish or are released within it. */
  shutdownTimeoutMs: number;
  /** How often the reconciler compares every container with its engine (events trigger it too). */
  reconcileIntervalMs: number;
  /** Seconds an engine waits between SIGTERM and SIGKILL when Berth stops a container. */
  containerStopTimeoutS: number;
  /** Seconds a service start waits for the services it links to to have a running container. */
  linkWaitS: number;
  /** The routers serving services' domains (router.ts). */
  router: RouterSettings;
  /**
   * A start tells the truth (issue 29): a container without a health check counts as started once
   * it has stayed up this long; one with a check once it is healthy.
   */
  startMinUpMs: number;
  /** The longest a start waits for a container whose check (its image's) has an unknown timing. */
  startMaxWaitMs: number;
  /** Definitions kept per service as revisions to roll back to (store/revisions.ts); at least 2. */
  serviceRevisionsKept: number;
  /** WebSocket streams (CONTRACT §8, §9): events, logs, exec. */
  streams: {
    /** How often the server pings every stream socket; a peer that missed the previous pong is dropped. */
    pingIntervalMs: number;
    /** Bytes a socket may have queued unsent: an events subscriber beyond it is closed (1008), logs wait. */
    maxBufferedBytes: number;
    /** How often the events feed reads the change feed besides in-process wake-ups (other processes' commits). */
    eventsPollMs: number;
  };
  /** Accounts API (CONTRACT §11): access tokens, email confirmation, failed-login limits. */
  accounts: {
    /** Lifetime of a Bearer access token issued by POST /oauth/token. */
    tokenTtlS: number;
    /** Lifetime of a dashboard sign-in session (its cookie expires with it). */
    sessionTtlS: number;
    /** Lifetime of a one-time email confirmation token. */
    emailTokenTtlS: number;
    /** Least time between two confirmation messages to the same address (0 = no limit). */
    verifyIntervalS: number;
    /** Confirmation messages per hour: per user, and per receiving mailbox whichever users asked. */
    verifyMaxPerUser: number;
    verifyMaxPerAddress: number;
    /** Unverified addresses a user may hold at once. */
    maxUnverifiedEmails: number;
    /** smtp://[user:password@]host[:port]; unset = confirmation messages go to the server log. */
    smtpUrl?: string;
    /** Sender address of confirmation messages. */
    mailFrom: string;
    /** Failed sign-ins (password or wrong key) allowed per username and per client address per window. */
    loginMaxFailuresPerUser: number;
    loginMaxFailuresPerAddress: number;
    loginWindowS: number;
  };
  /** Registries (issue 7): Berth's own registry and the calls Berth makes to registries users name. */
  registry: {
    /** Berth runs its own registry when BERTH_REGISTRY_DATA_DIR and BERTH_REGISTRY_LISTEN are set. */
    native?: {
      /** Storage, generated configuration and log of the registry. */
      dataDir: string;
      /** host:port the registry listens on. */
      listen: string;
      /** host[:port] in image names (BERTH_REGISTRY_HOST); the listen address by default. */
      host: string;
      /** The Debian `docker-registry` server (BERTH_REGISTRY_BINARY). */
      binary: string;
    };
    /** Hosts, addresses and CIDRs Berth may contact although they are loopback, link-local or private. */
    allow: string[];
    /** Registries reached over plain HTTP (Berth's own is added); local nodes' engines trust them too. */
    insecure: string[];
    /** Limit of each call Berth makes to a registry. */
    timeoutMs: number;
  };
  /** Container and node stats (issue 32). */
  stats: {
    /** How often every node's running containers are sampled (the fine series' step); 0 turns collection off. */
    intervalMs: number;
    /** How long the fine series is kept. */
    fineKeepMs: number;
    /** Step of the rolled-up series. */
    coarseStepMs: number;
    /** How long the rolled-up series is kept (the longest range a read may ask for). */
    coarseKeepMs: number;
    /** Nodes sampled at the same time, and engine calls in flight per node. */
    nodeConcurrency: number;
    callsPerNode: number;
  };
  /** Alerts and notifications (issue 32). */
  alerts: {
    /** How often the rules are evaluated and due deliveries sent. */
    intervalMs: number;
    /** Hosts, addresses and CIDRs webhooks may reach although they are not public (test receivers). */
    webhookAllow: string[];
    /** Limit of each webhook call. */
    webhookTimeoutMs: number;
    /** Attempts of a delivery before it is given up, and the wait before the first retry (doubled each time). */
    maxAttempts: number;
    retryBaseMs: number;
  };
  /**
   * Bearer token an administrator gives Prometheus: `/metrics` adds per-namespace series only for a
   * request that carries it (unset: never).
   */
  metricsToken?: string;
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
    /**
     * User-namespace remapping of local nodes' engines: `required` (a node whose engine cannot
     * remap fails with the reason), `optional` (it runs without, and its log says so), `off`.
     */
    localUsernsRemap: "required" | "optional" | "off";
    /** How long a node registration token (`POST /api/infra/v1/token/`) stays usable. */
    agentTokenTtlS: number;
  };
}

export class ConfigError extends Error {}

const LOG_LEVELS: LogLevel[] = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

function parseListen(value: string, name = "BERTH_LISTEN"): { host: string; port: number } {
  const match = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(value);
  const port = match ? Number(match[2]) : Number.NaN;
  if (!match || !(port >= 0 && port <= 65535)) {
    throw new ConfigError(`${name} must be <host>:<port> (for example 127.0.0.1:8000), got "${value}"`);
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

function parsePoolSize(value: string | undefined): number {
  if (value === undefined || value === "") return 10;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1 || n > 1000)
    throw new ConfigError(`BERTH_DATABASE_POOL must be a whole number from 1 to 1000, got "${value}"`);
  return n;
}

function parseNonNegativeInt(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined || value === "") return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new ConfigError(`${name} must be an integer ≥ 0, got "${value}"`);
  return n;
}

function parseSmtpUrl(value: string | undefined): string | undefined {
  if (value === undefined || value === "") return undefined;
  let ok: boolean;
  try {
    const u = new URL(value);
    ok = u.protocol === "smtp:" && u.hostname !== "";
  } catch {
    ok = false;
  }
  if (!ok) {
    throw new ConfigError(
      `BERTH_SMTP_URL must be smtp://[user:password@]host[:port], got "${value.replace(/\/\/[^@]*@/, "//***@")}"`,
    );
  }
  return value;
}

/** The default sender: berth@ the public host name, or localhost when that is an address. */
function defaultMailFrom(publicUrl: string): string {
  const host = new URL(publicUrl).hostname;
  return /[a-z]/i.test(host) && !host.includes(":") ? `berth@${host}` : "berth@localhost";
}

function parseList(value: string | undefined): string[] {
  return (value ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
}

function parseRegistryAllow(value: string | undefined): string[] {
  return parseAllowList("BERTH_REGISTRY_ALLOW", value);
}

function parseMetricsToken(value: string | undefined): string | undefined {
  if (value === undefined || value === "") return undefined;
  if (value.length < 16) throw new ConfigError("BERTH_METRICS_TOKEN must be at least 16 characters");
  return value;
}

function parseAllowList(name: string, value: string | undefined): string[] {
  const entries = parseList(value);
  const bad = entries.filter((e) => {
    const [net, prefix] = e.split("/");
    if (prefix === undefined) return !(isIP(e) !== 0 || /^[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?$/i.test(e));
    const family = isIP(net ?? "");
    const n = Number(prefix);
    return !(family !== 0 && Number.isInteger(n) && n >= 0 && n <= (family === 4 ? 32 : 128));
  });
  if (bad.length) {
    throw new ConfigError(
      `${name} must list host names, addresses or CIDRs separated by commas; not understood: ${bad.join(", ")}`,
    );
  }
  return entries;
}

function parseRegistryHosts(name: string, value: string | undefined): string[] {
  const hosts = parseList(value);
  const bad = hosts.filter((h) => !/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/.test(h));
  if (bad.length)
    throw new ConfigError(`${name} must list host[:port] entries, not understood: ${bad.join(", ")}`);
  return hosts;
}

function parseNativeRegistry(env: NodeJS.ProcessEnv): Config["registry"]["native"] {
  const dataDir = env.BERTH_REGISTRY_DATA_DIR || undefined;
  const listen = env.BERTH_REGISTRY_LISTEN || undefined;
  if (!dataDir && !listen) return undefined;
  if (!dataDir || !listen) {
    throw new ConfigError(
      "BERTH_REGISTRY_DATA_DIR and BERTH_REGISTRY_LISTEN must be set together or not at all",
    );
  }
  const parsed = parseListen(listen, "BERTH_REGISTRY_LISTEN");
  const wildcard = parsed.host === "0.0.0.0" || parsed.host === "::";
  const host = env.BERTH_REGISTRY_HOST || (wildcard ? undefined : listen);
  if (!host) {
    throw new ConfigError(
      "BERTH_REGISTRY_HOST must name the host[:port] engines pull from when BERTH_REGISTRY_LISTEN listens on every address",
    );
  }
  parseRegistryHosts("BERTH_REGISTRY_HOST", host);
  return {
    dataDir: path.resolve(dataDir),
    listen,
    host,
    binary: env.BERTH_REGISTRY_BINARY || "/usr/bin/docker-registry",
  };
}

function parseBool(name: string, value: string | undefined, fallback: boolean): boolean {
  if (value === undefined || value === "") return fallback;
  if (/^(1|true|yes|on)$/i.test(value)) return true;
  if (/^(0|false|no|off)$/i.test(value)) return false;
  throw new ConfigError(`${name} must be true or false, got "${value}"`);
}

function parseUsernsRemap(value: string | undefined): "required" | "optional" | "off" {
  const v = (value ?? "").trim().toLowerCase();
  if (v === "") return "required";
  if (v === "required" || v === "optional" || v === "off") return v;
  throw new ConfigError(`BERTH_LOCAL_USERNS_REMAP must be required, optional or off, got "${value}"`);
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

function parseReplicaId(value: string | undefined): string | undefined {
  if (value === undefined || value === "") return undefined;
  if (!/^[A-Za-z0-9][\w.-]{0,62}$/.test(value)) {
    throw new ConfigError(
      `BERTH_REPLICA_ID must be 1 to 63 letters, digits, '.', '_' or '-' (starting with a letter or digit), got "${value}"`,
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
    databaseOrigin: env.BERTH_DATABASE_URL
      ? { variable: "BERTH_DATABASE_URL", set: true }
      : { variable: "BERTH_DATA_DIR", set: env.BERTH_DATA_DIR !== undefined },
    databasePoolSize: parsePoolSize(env.BERTH_DATABASE_POOL),
    publicUrl,
    webDir: path.resolve(env.BERTH_WEB_DIR || path.join(import.meta.dirname, "../../web/dist")),
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
    replicaId: parseReplicaId(env.BERTH_REPLICA_ID),
    replicaLeaseMs: parsePositiveInt("BERTH_REPLICA_LEASE_MS", env.BERTH_REPLICA_LEASE_MS, 10_000),
    shutdownTimeoutMs: parsePositiveInt("BERTH_SHUTDOWN_TIMEOUT_MS", env.BERTH_SHUTDOWN_TIMEOUT_MS, 30_000),
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
    linkWaitS: parsePositiveInt("BERTH_LINK_WAIT_S", env.BERTH_LINK_WAIT_S, 120),
    router: parseRouterSettings(env),
    backups: parseBackupSettings(env),
    backupTargetAllow: parseAllowList("BERTH_BACKUP_TARGET_ALLOW", env.BERTH_BACKUP_TARGET_ALLOW),
    startMinUpMs: parsePositiveInt("BERTH_START_MIN_UP_MS", env.BERTH_START_MIN_UP_MS, 3000),
    startMaxWaitMs: parsePositiveInt("BERTH_START_MAX_WAIT_MS", env.BERTH_START_MAX_WAIT_MS, 300_000),
    serviceRevisionsKept: Math.max(
      2,
      parsePositiveInt("BERTH_SERVICE_REVISIONS", env.BERTH_SERVICE_REVISIONS, 10),
    ),
    streams: {
      pingIntervalMs: parsePositiveInt(
        "BERTH_STREAM_PING_INTERVAL_MS",
        env.BERTH_STREAM_PING_INTERVAL_MS,
        30_000,
      ),
      maxBufferedBytes: parsePositiveInt(
        "BERTH_STREAM_MAX_BUFFERED_BYTES",
        env.BERTH_STREAM_MAX_BUFFERED_BYTES,
        4 * 1024 * 1024,
      ),
      eventsPollMs: parsePositiveInt("BERTH_EVENTS_POLL_MS", env.BERTH_EVENTS_POLL_MS, 1000),
    },
    accounts: {
      tokenTtlS: parsePositiveInt("BERTH_TOKEN_TTL_S", env.BERTH_TOKEN_TTL_S, 3600),
      sessionTtlS: parsePositiveInt("BERTH_SESSION_TTL_S", env.BERTH_SESSION_TTL_S, 12 * 3600),
      emailTokenTtlS: parsePositiveInt("BERTH_EMAIL_TOKEN_TTL_S", env.BERTH_EMAIL_TOKEN_TTL_S, 86_400),
      verifyIntervalS: parseNonNegativeInt(
        "BERTH_EMAIL_VERIFY_INTERVAL_S",
        env.BERTH_EMAIL_VERIFY_INTERVAL_S,
        60,
      ),
      verifyMaxPerUser: parsePositiveInt(
        "BERTH_EMAIL_VERIFY_MAX_PER_USER",
        env.BERTH_EMAIL_VERIFY_MAX_PER_USER,
        5,
      ),
      verifyMaxPerAddress: parsePositiveInt(
        "BERTH_EMAIL_VERIFY_MAX_PER_ADDRESS",
        env.BERTH_EMAIL_VERIFY_MAX_PER_ADDRESS,
        3,
      ),
      maxUnverifiedEmails: parsePositiveInt("BERTH_EMAIL_MAX_UNVERIFIED", env.BERTH_EMAIL_MAX_UNVERIFIED, 5),
      smtpUrl: parseSmtpUrl(env.BERTH_SMTP_URL),
      mailFrom: env.BERTH_MAIL_FROM || defaultMailFrom(publicUrl),
      loginMaxFailuresPerUser: parsePositiveInt(
        "BERTH_LOGIN_MAX_FAILURES_PER_USER",
        env.BERTH_LOGIN_MAX_FAILURES_PER_USER,
        10,
      ),
      loginMaxFailuresPerAddress: parsePositiveInt(
        "BERTH_LOGIN_MAX_FAILURES_PER_ADDRESS",
        env.BERTH_LOGIN_MAX_FAILURES_PER_ADDRESS,
        50,
      ),
      loginWindowS: parsePositiveInt("BERTH_LOGIN_WINDOW_S", env.BERTH_LOGIN_WINDOW_S, 900),
    },
    registry: {
      native: parseNativeRegistry(env),
      allow: parseRegistryAllow(env.BERTH_REGISTRY_ALLOW),
      insecure: parseRegistryHosts("BERTH_INSECURE_REGISTRIES", env.BERTH_INSECURE_REGISTRIES),
      timeoutMs: parsePositiveInt("BERTH_REGISTRY_TIMEOUT_MS", env.BERTH_REGISTRY_TIMEOUT_MS, 10_000),
    },
    stats: {
      intervalMs: parseNonNegativeInt("BERTH_STATS_INTERVAL_MS", env.BERTH_STATS_INTERVAL_MS, 10_000),
      fineKeepMs: parsePositiveInt("BERTH_STATS_FINE_KEEP_S", env.BERTH_STATS_FINE_KEEP_S, 3600) * 1000,
      coarseStepMs: parsePositiveInt("BERTH_STATS_COARSE_STEP_S", env.BERTH_STATS_COARSE_STEP_S, 60) * 1000,
      coarseKeepMs:
        parsePositiveInt("BERTH_STATS_COARSE_KEEP_S", env.BERTH_STATS_COARSE_KEEP_S, 86_400) * 1000,
      nodeConcurrency: parsePositiveInt("BERTH_STATS_NODE_CONCURRENCY", env.BERTH_STATS_NODE_CONCURRENCY, 16),
      callsPerNode: parsePositiveInt("BERTH_STATS_CALLS_PER_NODE", env.BERTH_STATS_CALLS_PER_NODE, 4),
    },
    alerts: {
      intervalMs: parsePositiveInt("BERTH_ALERT_INTERVAL_MS", env.BERTH_ALERT_INTERVAL_MS, 15_000),
      webhookAllow: parseAllowList("BERTH_ALERT_WEBHOOK_ALLOW", env.BERTH_ALERT_WEBHOOK_ALLOW),
      webhookTimeoutMs: parsePositiveInt(
        "BERTH_ALERT_WEBHOOK_TIMEOUT_MS",
        env.BERTH_ALERT_WEBHOOK_TIMEOUT_MS,
        10_000,
      ),
      maxAttempts: parsePositiveInt("BERTH_ALERT_MAX_ATTEMPTS", env.BERTH_ALERT_MAX_ATTEMPTS, 5),
      retryBaseMs: parsePositiveInt("BERTH_ALERT_RETRY_BASE_MS", env.BERTH_ALERT_RETRY_BASE_MS, 30_000),
    },
    metricsToken: parseMetricsToken(env.BERTH_METRICS_TOKEN),
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
      localUsernsRemap: parseUsernsRemap(env.BERTH_LOCAL_USERNS_REMAP),
      agentTokenTtlS: parsePositiveInt("BERTH_AGENT_TOKEN_TTL_S", env.BERTH_AGENT_TOKEN_TTL_S, 3600),
    },
  };
}
