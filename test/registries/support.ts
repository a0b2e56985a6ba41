// Helpers of the registry tests: a fake v2 registry on 127.0.0.1 (Basic or the Bearer token flow),
// a server log captured from the platform's logger, and a harness on simulated nodes whose fake
// engines know some registry images.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { FakeEngine, type FakeRegistryImage } from "../../src/drivers/fake/index.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";

export interface FakeRegistry {
  /** 127.0.0.1:<port> */
  host: string;
  /** Every request it received: method, path with query, Authorization header. */
  requests: { method: string; url: string; authorization: string | undefined }[];
  close(): Promise<void>;
}

export interface FakeRegistryOptions {
  /** "basic": GET /v2/ takes Basic credentials; "bearer": a token realm on the same server hands out tokens. */
  auth: "basic" | "bearer" | "none";
  username?: string;
  password?: string;
  /** Answers every request with this instead (redirects, errors). */
  override?: (req: IncomingMessage, res: ServerResponse) => boolean;
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, {
    "content-type": "application/json",
    "docker-distribution-api-version": "registry/2.0",
    ...headers,
  });
  res.end(JSON.stringify(body));
}

export async function startFakeRegistry(opts: FakeRegistryOptions): Promise<FakeRegistry> {
  const requests: FakeRegistry["requests"] = [];
  const basic = `Basic ${Buffer.from(`${opts.username}:${opts.password}`).toString("base64")}`;
  const issued = "fake-token-0123456789";
  let host = "";
  const server: Server = createServer((req, res) => {
    requests.push({ method: req.method ?? "", url: req.url ?? "", authorization: req.headers.authorization });
    if (opts.override?.(req, res)) return;
    const url = new URL(req.url ?? "/", `http://${host}`);
    if (url.pathname === "/v2/") {
      if (opts.auth === "none") return json(res, 200, {});
      const ok =
        opts.auth === "basic"
          ? req.headers.authorization === basic
          : req.headers.authorization === `Bearer ${issued}`;
      if (ok) return json(res, 200, {});
      const challenge =
        opts.auth === "basic"
          ? 'Basic realm="fake-registry"'
          : `Bearer realm="http://${host}/token",service="fake-registry"`;
      return json(res, 401, { errors: [{ code: "UNAUTHORIZED" }] }, { "www-authenticate": challenge });
    }
    if (url.pathname === "/token" && opts.auth === "bearer") {
      if (req.headers.authorization !== basic)
        return json(res, 401, { details: "incorrect username or password" });
      return json(res, 200, { token: issued, access_token: issued, expires_in: 300 });
    }
    json(res, 404, { errors: [{ code: "NOT_FOUND" }] });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    host,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Collects everything the platform logs (give it to startHarness as `logStream`, with BERTH_LOG_LEVEL=trace). */
export class LogCapture extends Writable {
  text = "";
  override _write(chunk: Buffer, _encoding: string, done: () => void): void {
    this.text += chunk.toString("utf8");
    done();
  }
}

export const AWS = {
  region: "/api/infra/v1/region/aws/us-east-1/",
  node_type: "/api/infra/v1/nodetype/aws/t2.micro/",
};

export interface SimHarness {
  h: Harness;
  alice: Caller;
  log: LogCapture;
  /** Every simulated node's engine, by node uuid. */
  engines: Map<string, FakeEngine>;
}

/** A harness whose simulated nodes' fake engines can pull `registry` images; the log is captured. */
export async function startSimHarness(
  opts: { env?: Record<string, string>; registry?: () => FakeRegistryImage[] } = {},
): Promise<SimHarness> {
  const log = new LogCapture();
  const engines = new Map<string, FakeEngine>();
  const h = await startHarness({
    env: {
      BERTH_RECONCILE_INTERVAL_MS: "200",
      BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
      BERTH_LOG_LEVEL: "trace",
      ...opts.env,
    },
    logStream: log,
    makeFakeEngine: (n) => {
      const e = new FakeEngine({
        name: `sim-${n.uuid.slice(0, 8)}`,
        subnet: `10.${128 + Math.floor(n.slot / 256)}.${n.slot % 256}.0/24`,
        registry: opts.registry?.() ?? [],
      });
      engines.set(n.uuid, e);
      return e;
    },
  });
  const alice = await createUser(h, "alice");
  return { h, alice, log, engines };
}

/** Closes the platform, then the fake engines (their containers' processes keep timers). */
export async function closeSim(s: SimHarness | undefined): Promise<void> {
  if (!s) return;
  await s.h.close();
  for (const e of s.engines.values()) e.close();
}

/** Creates and deploys a cluster of simulated nodes; returns it Deployed. */
export async function deployCluster(s: SimHarness, nodes: number, who = s.alice) {
  const res = await call(s.h, who, "POST", "/api/infra/v1/nodecluster/", {
    name: `pool-${Math.random().toString(36).slice(2, 8)}`,
    ...AWS,
    target_num_nodes: nodes,
  });
  assert.equal(res.status, 201, res.raw);
  const deploy = await call(s.h, who, "POST", `${res.body.resource_uri}deploy/`);
  assert.equal(deploy.status, 202, deploy.raw);
  return waitFor("cluster Deployed", async () => {
    const c = (await call(s.h, who, "GET", res.body.resource_uri)).body;
    return c.state === "Deployed" ? c : undefined;
  });
}

/** Waits until GET `uri` shows `state`. */
export function until(s: SimHarness, uri: string, state: string, who = s.alice, timeoutMs = 10_000) {
  return waitFor(
    `${uri} ${state}`,
    async () => {
      const r = (await call(s.h, who, "GET", uri)).body;
      return r.state === state ? r : undefined;
    },
    timeoutMs,
  );
}

/** Waits for an action to end; returns it with its log lines. */
export async function finishedAction(s: SimHarness, uuid: string) {
  const row = await waitFor(
    `action ${uuid} ends`,
    async () => {
      const a = await s.h.store.actions.findAction(uuid);
      return a && ["Success", "Failed", "Canceled"].includes(a.state) ? a : undefined;
    },
    15_000,
  );
  return { ...row, log: (await s.h.store.actions.actionLogTail(uuid, 500)).map((l) => l.line) };
}

/** The action uuid a response names in its header. */
export function actionOf(res: { headers: Record<string, unknown> }): string {
  const uri = res.headers["x-platform-action-uri"];
  assert.equal(typeof uri, "string", "the response names its action");
  return (uri as string).split("/").filter(Boolean).at(-1)!;
}

/** Creates a service, starts it and waits until it runs. */
export async function runningService(s: SimHarness, body: Record<string, unknown>, who = s.alice) {
  const created = await call(s.h, who, "POST", "/api/app/v1/service/", {
    run_command: "sleep 100000",
    ...body,
  });
  assert.equal(created.status, 201, created.raw);
  const start = await call(s.h, who, "POST", `${created.body.resource_uri}start/`);
  assert.equal(start.status, 202, start.raw);
  const a = await finishedAction(s, actionOf(start));
  assert.equal(a.state, "Success", a.log.join("\n"));
  return until(s, created.body.resource_uri, "Running", who);
}

export { call, createUser, waitFor };
