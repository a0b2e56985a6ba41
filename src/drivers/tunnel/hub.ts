// Berth's end of agent tunnels: one live WebSocket per node, engine clients that reach the node's
// engine through it, pings that notice a dead tunnel, and the control messages (terminate).
import http from "node:http";
import type { Duplex } from "node:stream";
import { WebSocket } from "ws";
import { DockerEngine } from "../docker/docker-engine.ts";
import type { Engine } from "../engine.ts";
import { connectionError, TunnelMux } from "./mux.ts";

/** Control messages are small JSON text frames; anything larger is a protocol error. */
const MAX_CONTROL_BYTES = 4096;

/** What an agent may offer besides its engine (a stream target each). */
export const AGENT_FEATURES: readonly string[] = ["router"];
/** The handshake header in which an agent names what it offers, comma-separated. */
export const AGENT_FEATURES_HEADER = "x-berth-agent-features";

/** What the agent may say outside streams. */
export type AgentMessage = { type: "terminated"; removed: number; errors: string[] };

/**
 * Node's HTTP client on tunnel streams: every request gets a stream of its own (no keep-alive),
 * so an upgraded request (attach, exec) simply keeps its stream.
 */
export class TunnelHttpAgent extends http.Agent {
  constructor(private readonly openStream: () => Duplex) {
    super({ keepAlive: false });
  }

  override createConnection(
    _options: http.ClientRequestArgs,
    callback?: (err: Error | null, stream: Duplex) => void,
  ): Duplex | undefined {
    try {
      return this.openStream();
    } catch (err) {
      callback?.(err as Error, undefined as unknown as Duplex);
      return undefined;
    }
  }
}

export interface TunnelSession {
  nodeUuid: string;
  /** The address Berth sees the agent connect from. */
  remoteAddress: string;
  connectedAt: number;
  /** What the agent offers besides its engine (`router`), as its handshake said; empty for older agents. */
  features: ReadonlySet<string>;
  mux: TunnelMux;
  /** Sends a control message to the agent. */
  send(message: { type: "terminate" }): void;
  close(reason: string): void;
}

export interface TunnelHubOptions {
  /** How often Berth pings each agent; one missed answer and the tunnel is closed. */
  pingIntervalMs: number;
  onError?(err: unknown): void;
}

/** What a listener of the hub is told (see `TunnelHub.listen`). */
export interface TunnelListener {
  /** A node's tunnel came up or went down. */
  changed?(nodeUuid: string, connected: boolean, why: string): void;
  /** An agent sent a control message. */
  said?(nodeUuid: string, message: AgentMessage): void;
}

export class TunnelHub {
  private readonly sessions = new Map<string, TunnelSession>();
  private readonly engines = new Map<string, Engine>();
  private readonly listeners = new Set<TunnelListener>();

  constructor(private readonly opts: TunnelHubOptions) {}

  /** Tells `listener` of every tunnel change and agent message from now on; returns its removal. */
  listen(listener: TunnelListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private tell(fn: (l: TunnelListener) => void): void {
    for (const l of this.listeners) {
      try {
        fn(l);
      } catch (err) {
        this.opts.onError?.(err);
      }
    }
  }

  isConnected(nodeUuid: string): boolean {
    return this.sessions.has(nodeUuid);
  }

  session(nodeUuid: string): TunnelSession | undefined {
    return this.sessions.get(nodeUuid);
  }

  /**
   * A new stream to the node's engine, or to another target its agent offers (`router`); fails at
   * once (as unreachable) when no agent is connected, or when it does not offer the target (an
   * older agent would take the target's name for a broken rule).
   */
  openStream(nodeUuid: string, target = ""): Duplex {
    const s = this.sessions.get(nodeUuid);
    if (!s) throw connectionError(`the agent of node ${nodeUuid} is not connected`, "ECONNREFUSED");
    if (target && !s.features.has(target))
      throw connectionError(
        `the agent of node ${nodeUuid} offers no ${target}: upgrade it (berth-agent version 2)`,
        "ECONNREFUSED",
      );
    return s.mux.open(target);
  }

  /** Whether the node's agent is connected here and offers the target. */
  offers(nodeUuid: string, target: string): boolean {
    return this.sessions.get(nodeUuid)?.features.has(target) ?? false;
  }

  /** The engine client of a node, through whichever tunnel the node has at the time of each call. */
  engineFor(nodeUuid: string): Engine {
    let engine = this.engines.get(nodeUuid);
    if (!engine) {
      engine = new DockerEngine({
        endpoint: { host: `tunnel-${nodeUuid.slice(0, 8)}`, port: 2375 },
        agent: new TunnelHttpAgent(() => this.openStream(nodeUuid)),
        pingTimeoutMs: 3000,
      });
      this.engines.set(nodeUuid, engine);
    }
    return engine;
  }

  /**
   * Takes an accepted WebSocket as the node's tunnel; a previous tunnel of the node is closed.
   * `features`: what the agent's handshake said it offers (`x-berth-agent-features`).
   */
  attach(
    nodeUuid: string,
    ws: WebSocket,
    remoteAddress: string,
    now: number,
    features: readonly string[] = [],
  ): TunnelSession {
    this.sessions.get(nodeUuid)?.close("replaced by a new connection of the agent");
    const mux = new TunnelMux(
      {
        send: (frame) => {
          if (ws.readyState === WebSocket.OPEN) ws.send(frame);
        },
        close: (reason) => {
          let text = reason;
          while (Buffer.byteLength(text) > 123) text = text.slice(0, -1);
          if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING)
            ws.close(reason.startsWith("protocol error") ? 1008 : 1000, text);
          // A peer that does not answer our close frame is cut off.
          setTimeout(() => ws.terminate(), 2000).unref();
        },
      },
      { role: "opener" },
    );
    const session: TunnelSession = {
      nodeUuid,
      remoteAddress,
      connectedAt: now,
      features: new Set(features.filter((f) => AGENT_FEATURES.includes(f))),
      mux,
      send: (message) => {
        if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(message));
      },
      close: (reason) => mux.close(reason),
    };
    let alive = true;
    const ping = setInterval(() => {
      if (!alive) {
        mux.close("the agent stopped answering pings");
        ws.terminate();
        return;
      }
      alive = false;
      if (ws.readyState === WebSocket.OPEN) ws.ping();
    }, this.opts.pingIntervalMs);
    ping.unref();
    ws.on("pong", () => {
      alive = true;
    });
    ws.on("message", (data, isBinary) => {
      alive = true;
      const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
      if (isBinary) {
        mux.receive(buf);
        return;
      }
      const message = parseControl(buf);
      if (!message) {
        mux.close("protocol error: malformed control message");
        return;
      }
      this.tell((l) => l.said?.(nodeUuid, message));
    });
    ws.on("error", (err) => this.opts.onError?.(err));
    ws.once("close", (code, reason) => {
      clearInterval(ping);
      const why =
        mux.closeReason ?? `the agent's connection closed (${code} ${reason.toString().slice(0, 123)})`;
      mux.close(why);
      if (this.sessions.get(nodeUuid) === session) {
        this.sessions.delete(nodeUuid);
        this.tell((l) => l.changed?.(nodeUuid, false, why));
      }
    });
    this.sessions.set(nodeUuid, session);
    this.tell((l) => l.changed?.(nodeUuid, true, `connected from ${remoteAddress}`));
    return session;
  }

  /** Closes every tunnel (shutdown). */
  closeAll(reason: string): void {
    for (const s of [...this.sessions.values()]) s.close(reason);
  }
}

function parseControl(buf: Buffer): AgentMessage | undefined {
  if (buf.length > MAX_CONTROL_BYTES) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(buf.toString("utf8"));
  } catch {
    return undefined;
  }
  if (typeof v !== "object" || v === null) return undefined;
  const m = v as Record<string, unknown>;
  if (m.type === "terminated") {
    const removed = typeof m.removed === "number" && Number.isInteger(m.removed) ? m.removed : 0;
    const errors = Array.isArray(m.errors)
      ? m.errors
          .filter((e): e is string => typeof e === "string")
          .slice(0, 10)
          .map((e) => e.slice(0, 300))
      : [];
    return { type: "terminated", removed: Math.max(0, removed), errors };
  }
  return undefined;
}
