// Test harness: a real database (a fresh SQLite file, or PostgreSQL when BERTH_TEST_DATABASE_URL
// is set), the real app, and helpers to create users and call the API through inject().
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance, InjectOptions } from "fastify";
import { ActionEngine } from "../../src/actions/engine.ts";
import { Relations } from "../../src/actions/relations.ts";
import { type AppDeps, buildApp } from "../../src/api/app.ts";
import { Catalogue } from "../../src/catalogue/catalogue.ts";
import { systemClock } from "../../src/domain/time.ts";
import { IdentityService } from "../../src/identity/service.ts";
import { type Db, openDatabase } from "../../src/store/db.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import { Store } from "../../src/store/store.ts";

export interface Harness {
  app: FastifyInstance;
  store: Store;
  db: Db;
  identity: IdentityService;
  actions: ActionEngine;
  relations: Relations;
  admin: Caller;
  close(): Promise<void>;
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

/** A fresh, empty database: a temporary SQLite file, or a new schema on the PostgreSQL test server. */
export async function freshDatabase(): Promise<{ db: Db; cleanup(): Promise<void> }> {
  const pgUrl = process.env.BERTH_TEST_DATABASE_URL;
  if (pgUrl?.startsWith("postgres")) {
    const schema = `t_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
    const admin = openDatabase(pgUrl);
    await admin.kysely.schema.createSchema(schema).execute();
    await admin.close();
    const url = new URL(pgUrl);
    url.searchParams.set("options", `-c search_path=${schema}`);
    const db = openDatabase(url.toString());
    return {
      db,
      async cleanup() {
        await db.close();
        const a = openDatabase(pgUrl);
        await a.kysely.schema.dropSchema(schema).cascade().execute();
        await a.close();
      },
    };
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-test-"));
  const db = openDatabase(`sqlite:${path.join(dir, "berth.sqlite")}`);
  return {
    db,
    async cleanup() {
      await db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface HarnessOptions {
  leaseMs?: number;
  stepTimeoutMs?: number;
  /** Registers action kinds and routes before the app is built. */
  extend?(parts: {
    actions: ActionEngine;
    store: Store;
    relations: Relations;
    identity: IdentityService;
  }): Pick<AppDeps, "routes"> | undefined;
}

export async function startHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const { db, cleanup } = await freshDatabase();
  await migrateToLatest(db.kysely, db.dialect);
  const store = new Store(db.kysely, db.dialect);
  const identity = new IdentityService(store, systemClock);
  const actions = new ActionEngine({
    store,
    clock: systemClock,
    leaseMs: opts.leaseMs ?? 2000,
    stepTimeoutMs: opts.stepTimeoutMs ?? 10_000,
    pollMs: 100,
    maxAttempts: 5,
  });
  const relations = new Relations();
  const extra = opts.extend?.({ actions, store, relations, identity }) ?? {};
  const app = await buildApp({
    store,
    identity,
    actions,
    relations,
    catalogue: Catalogue.load(),
    publicUrl: "http://127.0.0.1:8000",
    logLevel: "silent",
    routes: extra.routes,
  });
  await app.ready();
  actions.start();
  const boot = await identity.bootstrapAdmin({
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
  return {
    app,
    store,
    db,
    identity,
    actions,
    relations,
    admin,
    async close() {
      await actions.stop();
      await app.close();
      await cleanup();
    },
  };
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
  timeoutMs = 10_000,
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
