// What the benchmarks share: a real Berth (SQLite in a temporary directory, or the database of
// BERTH_BENCH_DATABASE_URL) listening on loopback, with an admin key; simulated nodes written
// straight into the store (their engines are the in-memory fake engine, as simulated clusters'
// are); services created through the API; a bare Fastify that serves fixed bodies as a baseline.

import { randomUUID } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Fastify, { type FastifyInstance } from "fastify";
import { loadConfig } from "../src/config/index.ts";
import { assemblePlatform, type Platform } from "../src/platform.ts";
import { openDatabase } from "../src/store/db.ts";
import type { NodeRow } from "../src/store/nodes.ts";
import { newContainerRow } from "../src/store/services.ts";
import { fakeEngineNodeRow } from "../test/support/rows.ts";

export const ADMIN_KEY = "bench-admin-key-0123456789abcdef";
export const ADMIN_AUTH = `Basic ${Buffer.from(`admin:${ADMIN_KEY}`).toString("base64")}`;
export const AWS_TYPE = "/api/infra/v1/nodetype/aws/t2.micro/";

export interface Bench {
  platform: Platform;
  /** http://127.0.0.1:<port> */
  base: string;
  close(): Promise<void>;
}

export async function startBerth(
  opts: { env?: Record<string, string>; start?: boolean } = {},
): Promise<Bench> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-bench-"));
  const database = await benchSchema();
  const platform = await assemblePlatform(
    loadConfig({
      BERTH_DATA_DIR: dataDir,
      BERTH_LOG_LEVEL: "warn",
      BERTH_AUTO_ATTACH_ENGINE: "false",
      BERTH_NODE_HEALTH_INTERVAL_MS: "3600000",
      ...database.env,
      ...opts.env,
    }),
  );
  await platform.identity.bootstrapAdmin({
    username: "admin",
    password: "bench-password",
    apiKey: ADMIN_KEY,
  });
  if (opts.start) await platform.start();
  await platform.app.listen({ host: "127.0.0.1", port: 0 });
  const address = platform.app.server.address();
  if (!address || typeof address === "string") throw new Error("no TCP address");
  return {
    platform,
    base: `http://127.0.0.1:${address.port}`,
    async close() {
      await platform.close();
      await database.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * On the PostgreSQL server named by BERTH_BENCH_DATABASE_URL, a schema of the run's own (dropped
 * on close): a run never finds an earlier run's services (a second run's seeding failed with
 * 409 name_taken) nor leaves its own.
 */
async function benchSchema(): Promise<{ env: Record<string, string>; drop(): Promise<void> }> {
  const pg = process.env.BERTH_BENCH_DATABASE_URL;
  if (!pg?.startsWith("postgres")) return { env: {}, drop: async () => {} };
  const schema = `bench_${process.pid}_${randomUUID().slice(0, 8)}`;
  const admin = openDatabase(pg);
  await admin.kysely.schema.createSchema(schema).execute();
  await admin.close();
  const url = new URL(pg);
  url.searchParams.set("options", `-c search_path=${schema}`);
  return {
    env: { BERTH_DATABASE_URL: url.toString() },
    async drop() {
      const a = openDatabase(pg);
      await a.kysely.schema.dropSchema(schema).cascade().execute();
      await a.close();
    },
  };
}

/** Calls the API as the admin (through the listener's router, without a socket). */
export async function api<T = unknown>(
  b: Bench,
  method: "GET" | "POST" | "PATCH" | "DELETE",
  url: string,
  payload?: unknown,
  auth = ADMIN_AUTH,
): Promise<{ status: number; body: T; headers: Record<string, unknown> }> {
  const res = await b.platform.app.inject({
    method,
    url,
    headers: { authorization: auth },
    ...(payload === undefined ? {} : { payload: payload as object }),
  });
  return {
    status: res.statusCode,
    body: res.body ? (res.json() as T) : (undefined as T),
    headers: res.headers,
  };
}

export async function must<T>(p: Promise<{ status: number; body: T }>, what: string): Promise<T> {
  const r = await p;
  if (r.status >= 300) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** Deployed simulated nodes in the namespace, written in one transaction each 500. */
export async function seedNodes(b: Bench, namespace: string, count: number): Promise<NodeRow[]> {
  const out: NodeRow[] = [];
  const now = Date.now();
  for (let start = 0; start < count; start += 500) {
    await b.platform.store.transaction(async (tx) => {
      for (let i = start; i < Math.min(count, start + 500); i++) {
        out.push(
          await tx.nodes.insertNode(
            fakeEngineNodeRow(namespace, now, {
              node_type: AWS_TYPE,
              public_ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
              slot: i,
              tags: JSON.stringify(["bench"]),
            }),
          ),
        );
      }
    });
  }
  return out;
}

export const SERVICE_BODY = (name: string, extra: Record<string, unknown> = {}) => ({
  image: "busybox:local",
  name,
  run_command: "sleep 100000",
  container_ports: [{ inner_port: 80, protocol: "tcp" }],
  container_envvars: [
    { key: "MODE", value: "bench" },
    { key: "LEVEL", value: "3" },
  ],
  tags: ["bench"],
  target_num_containers: 1,
  ...extra,
});

/**
 * `count` containers of a service, written straight into the store on the given nodes (round
 * robin) in state Running, as a deployed service's would read. Seeds large namespaces quickly.
 */
export async function seedContainers(
  b: Bench,
  service: { uuid: string; namespace: string; name: string },
  nodes: NodeRow[],
  count: number,
  firstNumber = 1,
): Promise<void> {
  const s = (await b.platform.store.services.findService(service.uuid))!;
  const now = Date.now();
  for (let start = 0; start < count; start += 1000) {
    await b.platform.store.transaction(async (tx) => {
      for (let i = start; i < Math.min(count, start + 1000); i++) {
        const number = firstNumber + i;
        const node = nodes[i % nodes.length]!;
        await tx.services.insertContainer(
          newContainerRow(s, node.uuid, number, now, {
            phase: null,
            observed: "running",
            engine_id: randomUUID().replace(/-/g, ""),
            private_ip: `172.17.${(i >> 8) & 255}.${i & 255}`,
            ports: JSON.stringify([{ inner_port: 80, protocol: "tcp", outer_port: 32768 + (i % 20000) }]),
            started_at: now,
          }),
        );
      }
    });
  }
  await b.platform.store.transaction(async (tx) => {
    const fresh = (await tx.services.findService(s.uuid))!;
    await tx.services.updateService(fresh, {
      state: "Running",
      target_num_containers: fresh.target_num_containers + count,
      started_at: now,
      deployed_at: now,
    });
  });
}

/**
 * A bare Fastify answering GET <path> with the same JSON body as Berth (serialized per request,
 * as any handler's answer is): the floor the API is compared with.
 */
export async function startBare(
  bodies: Record<string, unknown>,
): Promise<{ base: string; app: FastifyInstance }> {
  const app = Fastify({ logger: false });
  for (const [url, body] of Object.entries(bodies)) app.get(url, async () => body);
  await app.listen({ host: "127.0.0.1", port: 0 });
  const address = app.server.address();
  if (!address || typeof address === "string") throw new Error("no TCP address");
  return { base: `http://127.0.0.1:${address.port}`, app };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function rssMb(): number {
  return Math.round(process.memoryUsage().rss / 1024 / 1024);
}

export const ratio = (a: number, b: number) => (b > 0 ? `${(a / b).toFixed(2)}×` : "n/a");
