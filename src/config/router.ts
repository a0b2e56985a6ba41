// The router's settings (issue 30), read by loadConfig (index.ts) from the environment it is given.

export interface RouterSettings {
  /** ACME directory certificates are ordered from (BERTH_ROUTER_ACME_DIRECTORY; Let's Encrypt's by default). */
  acmeDirectory: string;
  /** Account e-mail given to the ACME server (BERTH_ROUTER_ACME_EMAIL; none by default). */
  acmeEmail: string;
  /**
   * PEM file of the root signing the ACME directory's own HTTPS certificate, for a private ACME
   * server (BERTH_ROUTER_ACME_CA_ROOT; "" trusts the system's roots).
   */
  acmeCaRoot: string;
  /** How often every router is checked again: certificates, a router restarted (BERTH_ROUTER_INTERVAL_MS). */
  intervalMs: number;
  /** Milliseconds a leaving container keeps its requests in flight after its routers let it go (BERTH_ROUTER_DRAIN_GRACE_MS). */
  drainGraceMs: number;
  /** Longest wait for the routers when draining (BERTH_ROUTER_DRAIN_TIMEOUT_MS). */
  drainTimeoutMs: number;
  /**
   * Longest a running start-first rollout keeps an old container routed (BERTH_ROUTER_HOLD_MAX_MS,
   * 30 minutes by default): a safety cap for a rollout that died. A paused rollout's holds have no limit.
   */
  holdMaxMs: number;
  /** How often Caddy checks its certificates for renewal (BERTH_ROUTER_RENEW_INTERVAL_MS; Caddy's 10 minutes by default). */
  renewIntervalMs: number;
  /**
   * The part of a certificate's lifetime, before its expiry, in which Caddy renews it
   * (BERTH_ROUTER_RENEWAL_WINDOW_RATIO, above 0 and below 1; Caddy's 1/3 by default).
   */
  renewalWindowRatio: number;
}

/** Caddy's own defaults (certmagic's DefaultRenewCheckInterval and DefaultRenewalWindowRatio). */
export const DEFAULT_RENEW_INTERVAL_MS = 10 * 60_000;
export const DEFAULT_RENEWAL_WINDOW_RATIO = 1 / 3;

export const LETS_ENCRYPT = "https://acme-v02.api.letsencrypt.org/directory";

function int(name: string, value: string | undefined, fallback: number, min: number): number {
  if (value === undefined || value === "") return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min)
    throw new Error(`${name} must be an integer of at least ${min}, not "${value}"`);
  return n;
}

function ratio(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined || value === "") return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0 || n >= 1)
    throw new Error(
      `${name} must be a number above 0 and below 1 (a part of a certificate's lifetime), not "${value}"`,
    );
  return n;
}

export function parseRouterSettings(env: Record<string, string | undefined>): RouterSettings {
  const directory = env.BERTH_ROUTER_ACME_DIRECTORY || LETS_ENCRYPT;
  if (!/^https?:\/\/[^\s]+$/.test(directory))
    throw new Error(`BERTH_ROUTER_ACME_DIRECTORY must be an http(s) URL, not "${directory}"`);
  return {
    acmeDirectory: directory,
    acmeEmail: env.BERTH_ROUTER_ACME_EMAIL ?? "",
    acmeCaRoot: env.BERTH_ROUTER_ACME_CA_ROOT ?? "",
    intervalMs: int("BERTH_ROUTER_INTERVAL_MS", env.BERTH_ROUTER_INTERVAL_MS, 15_000, 100),
    drainGraceMs: int("BERTH_ROUTER_DRAIN_GRACE_MS", env.BERTH_ROUTER_DRAIN_GRACE_MS, 1000, 0),
    drainTimeoutMs: int("BERTH_ROUTER_DRAIN_TIMEOUT_MS", env.BERTH_ROUTER_DRAIN_TIMEOUT_MS, 10_000, 0),
    holdMaxMs: int("BERTH_ROUTER_HOLD_MAX_MS", env.BERTH_ROUTER_HOLD_MAX_MS, 30 * 60_000, 1000),
    renewIntervalMs: int(
      "BERTH_ROUTER_RENEW_INTERVAL_MS",
      env.BERTH_ROUTER_RENEW_INTERVAL_MS,
      DEFAULT_RENEW_INTERVAL_MS,
      1000,
    ),
    renewalWindowRatio: ratio(
      "BERTH_ROUTER_RENEWAL_WINDOW_RATIO",
      env.BERTH_ROUTER_RENEWAL_WINDOW_RATIO,
      DEFAULT_RENEWAL_WINDOW_RATIO,
    ),
  };
}
