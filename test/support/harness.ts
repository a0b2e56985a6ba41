// Test harness: a real database (a fresh SQLite file, or PostgreSQL when BERTH_TEST_DATABASE_URL
// is set), the real app, and helpers to create users and call the API through inject().
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { InjectOptions } from "fastify";
import { loadConfig } from "../../src/config/index.ts";
import { assemblePlatform, type Platform, type PlatformOptions } from "../../src/platform.ts";
import { openDatabase } from "../../src/store/db.ts";

export interface Harness extends Platform {
  admin: Caller;
  dataDir: string;
}

export interface Caller {
  username: string;
  key: string;
  password: string;
  auth: string;
}

export function basic(username: string, secret: string): string {
  return `Basic ${Buffer.from(`${username}:${secret}`).toString("base64")}`;
}

/**
 * A fresh, empty database URL: a temporary SQLite file, or a new schema on the PostgreSQL
 * server named by BERTH_TEST_DATABASE_URL.
 */
export async function freshDatabaseUrl(dataDir: string): Promise<{ url: string; cleanup(): Promise<void> }> {
  const pgUrl = process.env.BERTH_TEST_DATABASE_URL;
  if (pgUrl?.startsWith("postgres")) {
    const schema = `t_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
    const admin = openDatabase(pgUrl);
    await admin.kysely.schema.createSchema(schema).execute();
    await admin.close();
    const url = new URL(pgUrl);
    url.searchParams.set("options", `-c search_path=${schema}`);
    return {
      url: url.toString(),
      async cleanup() {
        const a = openDatabase(pgUrl);
        await a.kysely.schema.dropSchema(schema).cascade().execute();
        await a.close();
      },
    };
  }
  return { url: `sqlite:${path.join(dataDir, "berth.sqlite")}`, cleanup: async () => {} };
}

export interface HarnessOptions extends PlatformOptions {
  leaseMs?: number;
  stepTimeoutMs?: number;
  /** Extra environment for loadConfig (BERTH_* settings). */
  env?: Record<string, string>;
}

export async function startHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-test-"));
  const database = await freshDatabaseUrl(dataDir);
  const config = loadConfig({
    BERTH_DATA_DIR: dataDir,
    BERTH_DATABASE_URL: database.url,
    BERTH_LOG_LEVEL: "silent",
    BERTH_ACTION_LEASE_MS: String(opts.leaseMs ?? 2000),
    BERTH_ACTION_STEP_TIMEOUT_MS: String(opts.stepTimeoutMs ?? 10_000),
    BERTH_ACTION_POLL_MS: "100",
    BERTH_SIM_DELAY_FACTOR: "0.01",
    BERTH_NODE_HEALTH_INTERVAL_MS: "3600000",
    BERTH_AUTO_ATTACH_ENGINE: "false",
    // Stats rounds run when a test asks (statsCollector.collect()), not in the background.
    BERTH_STATS_INTERVAL_MS: "0",
    BERTH_ALERT_INTERVAL_MS: "3600000",
    // A start waits this long for a container without a health check to stay up (issue 29).
    BERTH_START_MIN_UP_MS: "150",
    ...opts.env,
  });
  // Every answer of every test is checked against its route's response schema (api/answers.ts).
  const platform = await assemblePlatform(config, { checkAnswers: true, ...opts });
  await platform.app.ready();
  await platform.start();
  const boot = await platform.identity.bootstrapAdmin({
    username: "admin",
    password: "admin-password",
    apiKey: "admin-key-0123456789abcdef",
  });
  if (!boot) throw new Error("fresh database expected");
  const admin = {
    username: "admin",
    key: boot.apiKey,
    password: boot.password,
    auth: basic("admin", boot.apiKey),
  };
  const close = platform.close;
  return Object.assign(platform, {
    admin,
    dataDir,
    async close() {
      await close();
      await database.cleanup();
      // Retried: a process of a test's node (a router) may still be writing its last file there.
      fs.rmSync(dataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
    },
  });
}

/**
 * Stops every background worker (reconciler, router controller, stack follower, health checks, action queue, replica
 * heartbeat), so that only the requests a test makes run statements.
 */
export async function quiesce(h: Harness): Promise<void> {
  h.reconciler.stop();
  h.router.stop();
  h.stacks.stop();
  h.health.stop();
  await h.actions.stop();
  await h.coordinator?.stop();
}

/** Creates a user (through the API, as the admin) and an API key for it. */
export async function createUser(h: Harness, username: string): Promise<Caller> {
  const password = `${username}-password`;
  const res = await h.app.inject({
    method: "POST",
    url: "/api/v1.1/users/",
    headers: { authorization: h.admin.auth },
    payload: { username, email: `${username}@example.test`, password },
  });
  if (res.statusCode !== 201) throw new Error(`create user ${username}: ${res.statusCode} ${res.body}`);
  const keyRes = await h.app.inject({
    method: "POST",
    url: `/api/v1.1/users/${username}/apikeys/`,
    headers: { authorization: basic(username, password) },
    payload: { label: "test" },
  });
  if (keyRes.statusCode !== 201)
    throw new Error(`create key ${username}: ${keyRes.statusCode} ${keyRes.body}`);
  const key = keyRes.json().key as string;
  return { username, key, password, auth: basic(username, key) };
}

/** inject() as a caller; returns status, parsed JSON body and headers. */
export async function call(
  h: Harness,
  who: Caller | undefined,
  method: InjectOptions["method"],
  url: string,
  payload?: unknown,
) {
  const res = await h.app.inject({
    method,
    url,
    headers: who ? { authorization: who.auth } : {},
    ...(payload === undefined ? {} : { payload: payload as InjectOptions["payload"] }),
  });
  let body: unknown;
  try {
    body = res.body ? JSON.parse(res.body) : undefined;
  } catch {
    body = res.body;
  }
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON.
  return { status: res.statusCode, body: body as any, headers: res.headers, raw: res.body };
}

export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined | false>,
  // Generous: it bounds only a failing wait, and a loaded CI machine (tiers side by side) makes
  // passing ones slow.
  timeoutMs = 20_000,
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ""}`);
}

/**
 * Makes `member` a member of `org` the way users do (issue 26): an owner invites, the member
 * accepts. Throws when either step is refused.
 */
export async function addMember(
  h: Harness,
  owner: Caller,
  org: string,
  member: Caller,
  role: "owner" | "member" = "member",
): Promise<void> {
  const invited = await call(h, owner, "POST", `/api/v1.1/orgs/${org}/members/`, {
    username: member.username,
    role,
  });
  if (invited.status !== 201) throw new Error(`invite ${member.username}: ${invited.status} ${invited.raw}`);
  if (invited.body.state === "accepted") return;
  const accepted = await call(
    h,
    member,
    "POST",
    `/api/v1.1/users/${member.username}/invitations/${org}/accept/`,
  );
  if (accepted.status !== 200) throw new Error(`accept ${org}: ${accepted.status} ${accepted.raw}`);
}

/**
 * An administrator allows a namespace options that reach the node (PATCH of the namespace's
 * privileges, domain/privileges.ts): tests whose tenants need host paths, privileged containers….
 */
export async function allowPrivileges(h: Harness, namespace: string, privileges: Record<string, unknown>) {
  const res = await call(h, h.admin, "PATCH", `/api/v1.1/namespaces/${namespace}/`, { privileges });
  if (res.status !== 200) throw new Error(`allow ${namespace}: ${res.status} ${res.raw}`);
}
