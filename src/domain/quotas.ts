// Quotas per namespace (issue 26): what a namespace may hold, with defaults an administrator can
// change per namespace (`limits` of the namespace settings). Pure rules: the store counts usage in
// the transaction that inserts (store/quotas.ts), and this module decides and words the refusal.
import { ApiError, type FieldProblem } from "./errors.ts";

/** Every resource a quota bounds, as named in `limits` and in a namespace's `quotas`. */
export const QUOTA_RESOURCES = [
  "services",
  "containers",
  "stacks",
  "nodeclusters",
  "nodes",
  "apikeys",
  "tokens",
  "triggers",
  "streams_per_key",
  "envvars_per_service",
  "env_bytes_per_service",
] as const;

export type QuotaResource = (typeof QUOTA_RESOURCES)[number];

/** A namespace's limits as an administrator set them: a number, or null for no limit. */
export type Limits = Partial<Record<QuotaResource, number | null>>;

/**
 * Defaults, sized for a person or a team on a shared platform and well below what hurt it (60 API
 * keys and tokens, 1,000 open event streams, 30 services of 200 variables of 4,000 characters).
 */
export const DEFAULT_LIMITS: Record<QuotaResource, number> = {
  /** Services not Terminated. */
  services: 200,
  /** The containers services ask for: the sum of target_num_containers of services not Terminated. */
  containers: 1000,
  /** Stacks not Terminated. */
  stacks: 50,
  /** Node clusters not Terminated. */
  nodeclusters: 20,
  /** Nodes asked for: target_num_nodes of clusters not Terminated, plus own nodes (byo) not Terminated. */
  nodes: 100,
  /** API keys of the user (personal namespace; service keys Berth makes are not counted). */
  apikeys: 20,
  /** Registration tokens that can still be used (neither used nor expired). */
  tokens: 20,
  /** Triggers of the namespace's services. */
  triggers: 100,
  /** Streams (events, logs, exec) open at once with one API key or session, per replica. */
  streams_per_key: 50,
  /** Environment variables of one service. */
  envvars_per_service: 100,
  /** Bytes of one service's environment: keys and values (UTF-8) together. */
  env_bytes_per_service: 32 * 1024,
};

/** The most an administrator may set: the schemas' bounds where one exists. */
export const MAX_LIMIT = 1_000_000;

const NOUNS: Record<QuotaResource, string> = {
  services: "services",
  containers: "containers",
  stacks: "stacks",
  nodeclusters: "node clusters",
  nodes: "nodes",
  apikeys: "API keys",
  tokens: "usable registration tokens",
  triggers: "triggers",
  streams_per_key: "open streams of this key",
  envvars_per_service: "environment variables in one service",
  env_bytes_per_service: "bytes of environment in one service",
};

/**
 * The limit in force: the administrator's (a number, or null for none), else the default. An
 * administrator's own namespace has no default limits (it runs the platform), only those set.
 */
export function limitOf(
  resource: QuotaResource,
  limits: Limits,
  opts: { exempt?: boolean } = {},
): number | null {
  const set = limits[resource];
  if (set !== undefined) return set;
  return opts.exempt ? null : DEFAULT_LIMITS[resource];
}

/** A quota problem: the field names the resource, with the limit and the usage. */
export interface QuotaProblem extends FieldProblem {
  limit: number;
  usage: number;
}

/** 403 `quota_exceeded`: names the resource, the limit and the usage (CONTRACT §6: quota → 403). */
export function quotaExceeded(
  namespace: string,
  resource: QuotaResource,
  limit: number,
  usage: number,
  opts: { field?: string; adding?: number } = {},
): ApiError {
  const adding = opts.adding ?? 1;
  const asked = adding > 1 ? ` (this asks for ${adding} more)` : "";
  const message =
    resource === "envvars_per_service" || resource === "env_bytes_per_service"
      ? `${namespace} allows at most ${limit} ${NOUNS[resource]}; this service has ${usage}. Shorten its environment, or ask an administrator to raise the limit ${resource}.`
      : `${namespace} has ${usage} ${NOUNS[resource]} and its limit is ${limit}${asked}; remove some, or ask an administrator to raise the limit ${resource}.`;
  const problem: QuotaProblem = {
    field: opts.field ?? resource,
    problem: `at most ${limit}; in use ${usage}`,
    limit,
    usage,
  };
  return new ApiError("forbidden", "quota_exceeded", message, [problem]);
}

/**
 * Refuses when `usage` (what the namespace holds before this change, not counting it) plus
 * `adding` goes over the limit. Asking for nothing more always passes, even over a lowered limit.
 */
export function assertWithinQuota(
  namespace: string,
  resource: QuotaResource,
  limit: number | null,
  usage: number,
  adding = 1,
): void {
  if (limit === null || adding <= 0) return;
  if (usage + adding > limit) throw quotaExceeded(namespace, resource, limit, usage, { adding });
}

/** How much environment a service definition holds: variables and their bytes (keys and values). */
export function envSize(envvars: readonly { key: string; value: string }[]): {
  count: number;
  bytes: number;
} {
  let bytes = 0;
  for (const e of envvars) bytes += utf8Length(e.key) + utf8Length(e.value);
  return { count: envvars.length, bytes };
}

/** Bytes of a string in UTF-8 (a lone surrogate counts as the 3 bytes of U+FFFD), without Node's Buffer. */
export function utf8Length(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

/** Refuses a service environment over the namespace's limits (a create or an update). */
export function assertEnvWithin(
  namespace: string,
  envvars: readonly { key: string; value: string }[],
  limits: { count: number | null; bytes: number | null },
): void {
  const { count, bytes } = envSize(envvars);
  if (limits.count !== null && count > limits.count)
    throw quotaExceeded(namespace, "envvars_per_service", limits.count, count, {
      field: "container_envvars",
    });
  if (limits.bytes !== null && bytes > limits.bytes)
    throw quotaExceeded(namespace, "env_bytes_per_service", limits.bytes, bytes, {
      field: "container_envvars",
    });
}
