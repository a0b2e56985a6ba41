// A real WebSocket client (the `ws` package) for stream tests, against the harness app listening
// on an ephemeral loopback port.
import type { IncomingMessage } from "node:http";
import WebSocket from "ws";
import { FakeEngine } from "../../src/drivers/fake/index.ts";
import { type Caller, call, type Harness, waitFor } from "../support/harness.ts";

/** Starts the harness app on 127.0.0.1:<ephemeral> and returns its ws:// base. */
export async function listen(h: Harness): Promise<string> {
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const address = h.app.server.address();
  if (!address || typeof address === "string") throw new Error("no TCP address");
  return `ws://127.0.0.1:${address.port}`;
}

// biome-ignore lint/suspicious/noExplicitAny: frames are arbitrary JSON, read by the tests.
export type Frame = any;

export interface Closed {
  code: number;
  reason: string;
}

/** An open stream: every text frame it received (parsed), and how it closed. */
export class StreamClient {
  readonly frames: Frame[] = [];
  readonly closed: Promise<Closed>;
  private readonly waiters = new Set<() => void>();
  private closeInfo: Closed | undefined;

  constructor(readonly ws: WebSocket) {
    ws.on("message", (data, isBinary) => {
      if (isBinary) return;
      this.frames.push(JSON.parse(data.toString()));
      for (const w of this.waiters) w();
    });
    this.closed = new Promise((resolve) => {
      ws.on("close", (code, reason) => {
        this.closeInfo = { code, reason: reason.toString() };
        for (const w of this.waiters) w();
        resolve(this.closeInfo);
      });
    });
  }

  get isClosed(): boolean {
    return this.closeInfo !== undefined;
  }

  /** Resolves with the frames once `done(frames)` holds; fails after the timeout or an early close. */
  async until(what: string, done: (frames: Frame[]) => boolean, timeoutMs = 10_000): Promise<Frame[]> {
    if (done(this.frames)) return this.frames;
    return new Promise((resolve, reject) => {
      const check = () => {
        if (done(this.frames)) {
          finish();
          resolve(this.frames);
        } else if (this.closeInfo) {
          finish();
          reject(
            new Error(
              `${what}: the stream closed (${this.closeInfo.code} ${this.closeInfo.reason}) first; got ${JSON.stringify(this.frames).slice(0, 2000)}`,
            ),
          );
        }
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error(`${what}: timed out; got ${JSON.stringify(this.frames).slice(-2000)}`));
      }, timeoutMs);
      const finish = () => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
    });
  }

  send(text: string): void {
    this.ws.send(text);
  }

  close(): void {
    this.ws.close();
  }
}

export interface Refusal {
  status: number;
  headers: IncomingMessage["headers"];
  body: Frame;
}

/** Opens a stream; rejects with a Refusal when the server answers the upgrade with an HTTP status. */
export function openStream(
  url: string,
  opts: { auth?: string; options?: WebSocket.ClientOptions } = {},
): Promise<StreamClient> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, {
      ...opts.options,
      headers: { ...opts.options?.headers, ...(opts.auth ? { authorization: opts.auth } : {}) },
    });
    const client = new StreamClient(ws);
    ws.once("open", () => resolve(client));
    ws.once("unexpected-response", (_req, res) => {
      let text = "";
      res.on("data", (chunk: Buffer) => {
        text += chunk.toString();
      });
      res.on("end", () => {
        let body: Frame = text;
        try {
          body = JSON.parse(text);
        } catch {
          // not JSON: keep the text
        }
        reject(
          Object.assign(new Error(`upgrade refused: ${res.statusCode}`), {
            refusal: { status: res.statusCode ?? 0, headers: res.headers, body } satisfies Refusal,
          }),
        );
      });
    });
    ws.once("error", (err) => reject(err));
  });
}

/** The HTTP answer to an upgrade that must be refused; fails if a socket opens instead. */
export async function refusal(url: string, auth?: string): Promise<Refusal> {
  try {
    const client = await openStream(url, { auth });
    client.close();
  } catch (err) {
    const r = (err as { refusal?: Refusal }).refusal;
    if (r) return r;
    throw err;
  }
  throw new Error(`${url}: the upgrade was accepted`);
}

/** Opens a stream and waits for it to close: every frame it sent and the close. */
export async function drain(url: string, auth: string, timeoutMs = 10_000) {
  const client = await openStream(url, { auth });
  const timer = setTimeout(() => client.ws.terminate(), timeoutMs);
  const closed = await client.closed;
  clearTimeout(timer);
  return { frames: client.frames, closed };
}

const AWS = {
  region: "/api/infra/v1/region/aws/us-east-1/",
  node_type: "/api/infra/v1/nodetype/aws/t2.micro/",
};

/** Deploys a cluster of simulated nodes (fake engines) for `who`; resolves with the cluster. */
export async function simulatedCluster(h: Harness, who: Caller, nodes: number): Promise<Frame> {
  const created = await call(h, who, "POST", "/api/infra/v1/nodecluster/", {
    name: `pool-${nodes}`,
    ...AWS,
    target_num_nodes: nodes,
  });
  if (created.status !== 201) throw new Error(`cluster: ${created.status} ${created.raw}`);
  await call(h, who, "POST", `${created.body.resource_uri}deploy/`);
  return inState(h, who, created.body.resource_uri, "Deployed");
}

/** Waits until the object at `uri` is in `state`. */
export function inState(h: Harness, who: Caller, uri: string, state: string, timeoutMs = 10_000) {
  return waitFor(
    `${uri} ${state}`,
    async () => {
      const r = (await call(h, who, "GET", uri)).body;
      return r?.state === state ? r : undefined;
    },
    timeoutMs,
  );
}

/** Creates and starts a service of `busybox:local` containers that sleep; resolves once Running. */
export async function runningService(
  h: Harness,
  who: Caller,
  body: { name: string; target_num_containers?: number; run_command?: string },
): Promise<Frame> {
  const created = await call(h, who, "POST", "/api/app/v1/service/", {
    image: "busybox:local",
    run_command: "sleep 100000",
    ...body,
  });
  if (created.status !== 201) throw new Error(`service: ${created.status} ${created.raw}`);
  const started = await call(h, who, "POST", `${created.body.resource_uri}start/`);
  if (started.status !== 202) throw new Error(`start: ${started.status} ${started.raw}`);
  return inState(h, who, created.body.resource_uri, "Running");
}

/** The fake engine and engine container id behind a container resource URI. */
export async function fakeContainer(h: Harness, containerUri: string) {
  const uuid = containerUri.split("/").filter(Boolean).at(-1)!;
  const row = await h.store.services.findContainer(uuid);
  if (!row?.engine_id) throw new Error(`container ${uuid} has no engine container`);
  const node = await h.store.nodes.findNode(row.node_uuid);
  const engine = h.engines.forNode(node!);
  if (!(engine instanceof FakeEngine)) throw new Error("not a simulated node");
  return { engine, id: row.engine_id, name: row.name };
}

/** How each stream closed, or "still open" when it had not within `ms`. */
export async function closedWithin(streams: Record<string, StreamClient>, ms: number) {
  const out: Record<string, Closed | "still open"> = {};
  await Promise.all(
    Object.entries(streams).map(async ([name, s]) => {
      let timer: NodeJS.Timeout | undefined;
      out[name] = await Promise.race([
        s.closed,
        new Promise<"still open">((resolve) => {
          timer = setTimeout(() => resolve("still open"), ms);
        }),
      ]);
      clearTimeout(timer);
      if (out[name] === "still open") s.ws.terminate();
    }),
  );
  return out;
}
