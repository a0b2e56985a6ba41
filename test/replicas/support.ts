// The replica tier: real Berth processes sharing one PostgreSQL (BERTH_TEST_PG_URL; CI starts it in
// .ci/run). Each run gets a database of its own, dropped at the end.
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { loadConfig } from "../../src/config/index.ts";
import { assemblePlatform, type Platform, type PlatformOptions } from "../../src/platform.ts";
import { openDatabase } from "../../src/store/db.ts";
import { Store } from "../../src/store/store.ts";
import { basic, waitFor } from "../support/harness.ts";

const root = path.resolve(import.meta.dirname, "../..");

export const ADMIN_KEY = "replicas-admin-key-0123456789";
export const adminAuth = basic("admin", ADMIN_KEY);
/** The BERTH_SECRET_KEY replicas share (an env override of "" makes one use its key file). */
export const SECRET_KEY = "replica-tier-shared-secret";

/** Why the tier cannot run (no PostgreSQL named), or undefined; under CI=true a missing one fails. */
export function pgUnavailable(): string | undefined {
  const url = process.env.BERTH_TEST_PG_URL;
  if (url?.startsWith("postgres")) return undefined;
  if (process.env.CI === "true") throw new Error("BERTH_TEST_PG_URL must name a PostgreSQL server in CI");
  return "BERTH_TEST_PG_URL is not set (CI sets it)";
}

/**
 * Replica B of the in-process replica tests (test/services/replica-*, test/streams/replica-access):
 * a second platform on the database of the test's first replica, quiet, without health probes or
 * an attached engine; assembled, ready and started. `env` adds or overrides BERTH_* settings.
 */
export async function assembleReplicaB(o: {
  dataDir: string;
  databaseUrl: string;
  env?: Record<string, string>;
  options?: PlatformOptions;
}): Promise<Platform> {
  const b = await assemblePlatform(
    loadConfig({
      BERTH_DATA_DIR: o.dataDir,
      BERTH_DATABASE_URL: o.databaseUrl,
      BERTH_REPLICA_ID: "replica-b",
      BERTH_LOG_LEVEL: "silent",
      BERTH_NODE_HEALTH_INTERVAL_MS: "3600000",
      BERTH_AUTO_ATTACH_ENGINE: "false",
      ...o.env,
    }),
    o.options,
  );
  await b.app.ready();
  await b.start();
  return b;
}

export interface FreshDatabase {
  url: string;
  store: Store;
  drop(): Promise<void>;
}

/** A new, empty database on the test server, with a store the test reads through. */
export async function freshPgDatabase(prefix: string): Promise<FreshDatabase> {
  const base = process.env.BERTH_TEST_PG_URL!;
  const name = `${prefix}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const u = new URL(base);
  u.pathname = `/${name}`;
  const url = u.toString();
  const db = openDatabase(url);
  return {
    url,
    store: new Store(db.kysely, db.dialect),
    async drop() {
      await db.close();
      const c = new pg.Client({ connectionString: base });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
    },
  };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export interface Replica {
  name: string;
  port: number;
  base: string;
  proc: ChildProcess;
  dataDir: string;
  log(): string;
  /** Resolves with the exit code (or signal) once the process is gone. */
  exited: Promise<number | string | null>;
}

/** Starts a real server process (the test kinds included) as replica `name`; resolves once it answers. */
export async function startReplica(
  name: string,
  env: Record<string, string>,
  opts: { waitReady?: boolean; nodeArgs?: string[] } = {},
): Promise<Replica> {
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `berth-replica-${name}-`));
  const proc = spawn(
    process.execPath,
    [...(opts.nodeArgs ?? []), "--import", "tsx", "test/support/server-with-test-kinds.ts"],
    {
      cwd: root,
      env: {
        ...process.env,
        BERTH_LISTEN: `127.0.0.1:${port}`,
        BERTH_DATA_DIR: dataDir,
        BERTH_REPLICA_ID: name,
        BERTH_ADMIN_USERNAME: "admin",
        BERTH_ADMIN_PASSWORD: "admin-password",
        BERTH_ADMIN_API_KEY: ADMIN_KEY,
        BERTH_SECRET_KEY: SECRET_KEY,
        BERTH_AUTO_ATTACH_ENGINE: "false",
        BERTH_LOG_LEVEL: "info",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  proc.stdout?.on("data", (d) => {
    if (out.length < 2_000_000) out += d;
  });
  proc.stderr?.on("data", (d) => {
    if (out.length < 2_000_000) out += d;
  });
  const exited = new Promise<number | string | null>((resolve) =>
    proc.once("exit", (code, signal) => resolve(code ?? signal)),
  );
  const base = `http://127.0.0.1:${port}`;
  await waitFor(
    `replica ${name} on ${port}`,
    async () => {
      if (proc.exitCode !== null) throw new Error(`replica ${name} exited: ${out.slice(-3000)}`);
      const res = await fetch(`${base}/${opts.waitReady === false ? "healthz" : "readyz"}`);
      return res.status === 200;
    },
    // Three processes compiling TypeScript at once on a busy 2-core machine take minutes.
    240_000,
    200,
  ).catch((err: Error) => {
    throw new Error(`${err.message}\n--- replica ${name} output:\n${out.slice(-4000)}`);
  });
  return { name, port, base, proc, dataDir, exited, log: () => out };
}

export async function kill(r: Replica): Promise<void> {
  if (r.proc.exitCode === null && r.proc.signalCode === null) {
    r.proc.kill("SIGKILL");
    await r.exited;
  }
}

export function cleanup(r: Replica | undefined): void {
  if (!r) return;
  if (r.proc.exitCode === null && r.proc.signalCode === null) r.proc.kill("SIGKILL");
  fs.rmSync(r.dataDir, { recursive: true, force: true });
}

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON.
export async function api(r: Replica, method: string, url: string, body?: unknown): Promise<any> {
  const res = await fetch(`${r.base}${url}`, {
    method,
    headers: {
      authorization: adminAuth,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = text;
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

/**
 * A TCP proxy in front of PostgreSQL that the test can cut (every connection dropped, new ones
 * refused) and restore, so a replica loses its database without disturbing anyone else's.
 */
export class CuttableProxy {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  async open(): Promise<void> {
    const server = net.createServer((client) => {
      const upstream = net.connect(this.targetPort, this.targetHost);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on("close", () => this.sockets.delete(s));
        s.on("error", () => s.destroy());
      }
      client.pipe(upstream);
      upstream.pipe(client);
      client.on("close", () => upstream.destroy());
      upstream.on("close", () => client.destroy());
    });
    await new Promise<void>((resolve) => server.listen(this.port, "127.0.0.1", resolve));
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
  }

  async cut(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    for (const sock of this.sockets) sock.destroy();
    this.sockets.clear();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  /** The database URL through this proxy. */
  urlFor(url: string): string {
    const u = new URL(url);
    u.hostname = "127.0.0.1";
    u.port = String(this.port);
    return u.toString();
  }
}

/** The error with each replica's warnings and errors appended (what a failed run needs to be read). */
export function withLogs(err: unknown, replicas: (Replica | undefined)[]): unknown {
  if (!(err instanceof Error)) return err;
  for (const r of replicas) {
    if (!r) continue;
    const lines = r
      .log()
      .split("\n")
      .filter((l) => /"level":(40|50|60)/.test(l))
      .slice(-15)
      .map((l) => l.slice(0, 600));
    if (lines.length) err.message += `\n--- replica ${r.name} warnings and errors:\n${lines.join("\n")}`;
  }
  return err;
}
