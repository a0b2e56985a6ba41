// The Berth agent: registers this host's Docker engine as a node (once, with a token), then keeps
// an outbound WebSocket to Berth through which Berth drives the engine; the engine needs no open
// port and no certificates. It reaches only the local engine socket. When Berth terminates the
// node, it removes Berth's containers from the engine and exits. Unless told not to, it also runs
// the node's router (Caddy, router.ts), which Berth configures through the same tunnel.

import { WebSocket } from "ws";
import { DockerEngine } from "../drivers/docker/docker-engine.ts";
import type { Engine } from "../drivers/engine.ts";
import type { Router } from "../drivers/router/router.ts";
import { forwardToEngineSocket } from "../drivers/tunnel/forwarder.ts";
import { AGENT_FEATURES_HEADER } from "../drivers/tunnel/hub.ts";
import type { TunnelMux } from "../drivers/tunnel/mux.ts";
import { type AgentIdentity, forgetIdentity, loadIdentity, saveIdentity } from "./identity.ts";
import { AgentRouterService } from "./router.ts";

/** 2: offers the router (a stream target named in OPEN frames, announced in the handshake). */
export const AGENT_VERSION = "2";
const BERTH_LABEL_PREFIX = "io.berth.";

export interface AgentOptions {
  /** Berth's URL, for example http://berth.example:8000. */
  url: string;
  /** Registration token; needed only the first time (no identity on disk yet). */
  token?: string;
  stateDir: string;
  /** The local engine's unix socket. */
  socketPath: string;
  nickname?: string;
  tags?: string[];
  log(line: string): void;
  /** Reconnect back-off bounds. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** A tunnel silent for this long (no ping from Berth) is dropped and reconnected. */
  silenceMs?: number;
  /** Runs no router on this host (something else serves :80 and :443). */
  noRouter?: boolean;
  /** A router driver in place of Caddy (tests). */
  router?: Router;
}

export type AgentExit =
  | { reason: "terminated"; removed: number }
  | { reason: "refused"; message: string }
  | { reason: "stopped" };

export class AgentError extends Error {}

/** Berth's error body, or the status line. */
async function errorText(res: Response): Promise<{ code: string; message: string }> {
  const text = await res.text().catch(() => "");
  try {
    const body = JSON.parse(text) as { code?: string; error?: string };
    return { code: body.code ?? "", message: body.error ?? text };
  } catch {
    return { code: "", message: `${res.status} ${res.statusText}` };
  }
}

export class BerthAgent {
  private readonly engine: Engine;
  private ws: WebSocket | undefined;
  private stopped = false;
  private wake: (() => void) | undefined;
  private readonly router: AgentRouterService | undefined;

  constructor(private readonly o: AgentOptions) {
    this.engine = new DockerEngine({ endpoint: { socketPath: o.socketPath } });
    this.router = o.noRouter
      ? undefined
      : new AgentRouterService({ stateDir: o.stateDir, log: o.log, router: o.router });
  }

  private get base(): string {
    return this.o.url.replace(/\/+$/, "");
  }

  /** The identity on disk, or a new one from registering with the token. */
  async ensureIdentity(): Promise<AgentIdentity> {
    const existing = await loadIdentity(this.o.stateDir);
    if (existing) {
      this.o.log(
        `node ${existing.node_uuid} (namespace ${existing.namespace}): identity found, re-attaching`,
      );
      return existing;
    }
    if (!this.o.token)
      throw new AgentError(
        "this host is not registered yet: pass --token <token> (create one with POST /api/infra/v1/token/)",
      );
    const info = await this.engine.info().catch((err: Error) => {
      throw new AgentError(`no Docker engine answers on ${this.o.socketPath}: ${err.message}`);
    });
    const res = await fetch(`${this.base}/api/agent/v1/register/`, {
      method: "POST",
      headers: { "content-type": "application/json", "user-agent": `berth-agent/${AGENT_VERSION}` },
      body: JSON.stringify({
        token: this.o.token,
        engine: {
          id: info.id,
          name: info.name,
          cpus: info.cpus,
          memory_mb: info.memoryMb,
          ...(info.diskGb !== undefined ? { disk_gb: info.diskGb } : {}),
          version: info.engineVersion,
          storage_driver: info.storageDriver,
          exec_driver: info.execDriver,
        },
        ...(this.o.nickname ? { nickname: this.o.nickname } : {}),
        ...(this.o.tags?.length ? { tags: this.o.tags } : {}),
        agent_version: AGENT_VERSION,
      }),
    });
    if (res.status !== 201) {
      const e = await errorText(res);
      throw new AgentError(
        `Berth refused the registration (${res.status}${e.code ? ` ${e.code}` : ""}): ${e.message}`,
      );
    }
    const node = (await res.json()) as {
      uuid: string;
      namespace: string;
      node_key: string;
      resource_uri: string;
    };
    const identity: AgentIdentity = {
      url: this.base,
      node_uuid: node.uuid,
      namespace: node.namespace,
      node_key: node.node_key,
      resource_uri: node.resource_uri,
    };
    await saveIdentity(this.o.stateDir, identity);
    this.o.log(`registered as node ${node.uuid} in namespace ${node.namespace}`);
    return identity;
  }

  /** Registers if needed, then keeps the tunnel up until Berth terminates the node or stop() is called. */
  async run(): Promise<AgentExit> {
    const identity = await this.ensureIdentity();
    const minMs = this.o.minBackoffMs ?? 1000;
    const maxMs = this.o.maxBackoffMs ?? 30_000;
    let backoff = minMs;
    while (!this.stopped) {
      const started = Date.now();
      const outcome = await this.connectOnce(identity);
      if (outcome.kind === "exit") return outcome.exit;
      if (this.stopped) break;
      // A tunnel that held for a while starts the back-off over.
      if (Date.now() - started > 10_000) backoff = minMs;
      const wait = Math.round(backoff * (0.75 + Math.random() * 0.5));
      this.o.log(`tunnel down (${outcome.why}); reconnecting in ${wait} ms`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, wait);
        this.wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      backoff = Math.min(maxMs, backoff * 2);
    }
    return { reason: "stopped" };
  }

  stop(): void {
    this.stopped = true;
    this.ws?.close(1000, "agent stopping");
    this.wake?.();
  }

  private connectOnce(
    identity: AgentIdentity,
  ): Promise<{ kind: "exit"; exit: AgentExit } | { kind: "retry"; why: string }> {
    const url = `${this.base.replace(/^http/, "ws")}/api/agent/v1/node/${identity.node_uuid}/tunnel/`;
    return new Promise((resolve) => {
      const ws = new WebSocket(url, {
        headers: {
          authorization: `Bearer ${identity.node_key}`,
          "user-agent": `berth-agent/${AGENT_VERSION}`,
          ...(this.router ? { [AGENT_FEATURES_HEADER]: "router" } : {}),
        },
        maxPayload: 1024 * 1024,
        handshakeTimeout: 15_000,
      });
      this.ws = ws;
      let mux: TunnelMux | undefined;
      let settled = false;
      let heard = Date.now();
      const silenceMs = this.o.silenceMs ?? 45_000;
      const watchdog = setInterval(
        () => {
          if (Date.now() - heard > silenceMs) ws.terminate();
        },
        Math.min(5000, silenceMs / 3),
      );
      const done = (r: { kind: "exit"; exit: AgentExit } | { kind: "retry"; why: string }) => {
        if (settled) return;
        settled = true;
        clearInterval(watchdog);
        mux?.close("tunnel closed");
        resolve(r);
      };
      ws.on("unexpected-response", (req, res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => {
          if (chunks.length < 64) chunks.push(c);
        });
        res.on("end", () => {
          let body: { code?: string; error?: string } = {};
          try {
            body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as typeof body;
          } catch {}
          req.destroy();
          const status = res.statusCode ?? 0;
          if (status === 403 && body.code === "node_terminated") {
            this.o.log("Berth says this node was terminated");
            void this.cleanUp().then(async ({ removed }) => {
              await forgetIdentity(this.o.stateDir);
              done({ kind: "exit", exit: { reason: "terminated", removed } });
            });
            return;
          }
          if (status === 401 || status === 403 || status === 404) {
            done({ kind: "exit", exit: { reason: "refused", message: body.error ?? `HTTP ${status}` } });
            return;
          }
          done({ kind: "retry", why: `HTTP ${status}` });
        });
        res.on("error", () => done({ kind: "retry", why: `HTTP ${res.statusCode}` }));
      });
      ws.on("open", () => {
        this.o.log(`tunnel up to ${this.base} as node ${identity.node_uuid}`);
        heard = Date.now();
        mux = forwardToEngineSocket(
          {
            send: (frame) => {
              if (ws.readyState === WebSocket.OPEN) ws.send(frame);
            },
            close: (reason) => {
              if (ws.readyState === WebSocket.OPEN) ws.close(1000, reason.slice(0, 120));
            },
          },
          this.o.socketPath,
          this.router ? { router: (stream) => this.router?.take(stream) } : {},
        );
      });
      ws.on("ping", () => {
        heard = Date.now();
      });
      ws.on("message", (data, isBinary) => {
        heard = Date.now();
        const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
        if (isBinary) {
          mux?.receive(buf);
          return;
        }
        let message: { type?: string } = {};
        try {
          message = JSON.parse(buf.toString("utf8")) as typeof message;
        } catch {}
        if (message.type === "terminate") {
          this.o.log("Berth terminated this node: removing Berth's containers");
          void this.cleanUp().then(async ({ removed, errors }) => {
            if (ws.readyState === WebSocket.OPEN)
              ws.send(JSON.stringify({ type: "terminated", removed, errors }));
            await forgetIdentity(this.o.stateDir);
            ws.close(1000, "node terminated");
            done({ kind: "exit", exit: { reason: "terminated", removed } });
          });
        }
      });
      ws.on("error", (err) => {
        if (!settled && ws.readyState !== WebSocket.OPEN) done({ kind: "retry", why: err.message });
      });
      ws.on("close", (code, reason) =>
        done({ kind: "retry", why: `closed ${code} ${reason.toString()}`.trim() }),
      );
    });
  }

  /** Removes every container carrying Berth's labels from the local engine. */
  async cleanUp(): Promise<{ removed: number; errors: string[] }> {
    const errors: string[] = [];
    let removed = 0;
    const all = await this.engine.listContainers({ all: true }).catch((err: Error) => {
      errors.push(`could not list containers: ${err.message}`);
      return [];
    });
    for (const c of all) {
      if (!Object.keys(c.labels).some((k) => k.startsWith(BERTH_LABEL_PREFIX))) continue;
      try {
        await this.engine.removeContainer(c.id, { force: true });
        removed++;
      } catch (err) {
        errors.push(`container ${c.id.slice(0, 12)}: ${(err as Error).message}`);
      }
    }
    await this.router?.remove().catch((err: Error) => errors.push(`the router: ${err.message}`));
    this.o.log(
      `removed ${removed} container(s) Berth had started${errors.length ? `; ${errors.join("; ")}` : ""}`,
    );
    return { removed, errors };
  }
}
