// What every stream socket shares: the @fastify/websocket options, the server's own pings (dead
// peers are dropped), bounded send buffers and the frames and close codes of CONTRACT §8–§9.
import type { WebsocketPluginOptions } from "@fastify/websocket";
import type { FastifyInstance } from "fastify";
import { WebSocket } from "ws";

/** Close codes (RFC 6455 §7.4.1) the streams use. */
export const CLOSE = {
  normal: 1000,
  goingAway: 1001,
  /** A subscriber too slow to keep up is dropped rather than buffered without bound (CONTRACT §8). */
  policy: 1008,
  internal: 1011,
} as const;

/** Clients send stdin (exec) and nothing else; a larger frame is refused by `ws` with 1009. */
const MAX_CLIENT_FRAME_BYTES = 1024 * 1024;

/** How long shutdown waits for peers to answer our close frame before cutting them off. */
const SHUTDOWN_GRACE_MS = 500;

/**
 * Options of the @fastify/websocket plugin. On shutdown every stream is closed with 1001 (going
 * away), so clients that reconnect know the server left rather than refused them.
 */
export function websocketPluginOptions(): WebsocketPluginOptions {
  return {
    options: { maxPayload: MAX_CLIENT_FRAME_BYTES },
    preClose(this: FastifyInstance, done: () => void) {
      const wss = this.websocketServer;
      if (wss.clients.size === 0) return done();
      for (const client of wss.clients) client.close(CLOSE.goingAway, "server shutting down");
      const deadline = Date.now() + SHUTDOWN_GRACE_MS;
      const check = setInterval(() => {
        if (wss.clients.size > 0 && Date.now() < deadline) return;
        clearInterval(check);
        for (const client of wss.clients) client.terminate();
        done();
      }, 20);
    },
  };
}

/**
 * The server pings every stream socket each interval; a socket that has not answered the previous
 * ping (nor sent anything) by the next one is dead and is terminated (CONTRACT §8). Pings from
 * clients are answered by `ws` itself.
 */
export class Heartbeat {
  private readonly alive = new Map<WebSocket, boolean>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly intervalMs: number) {}

  track(ws: WebSocket): void {
    this.alive.set(ws, true);
    const heard = () => this.alive.set(ws, true);
    ws.on("pong", heard);
    ws.on("message", heard);
    ws.once("close", () => this.alive.delete(ws));
    if (!this.timer) {
      this.timer = setInterval(() => this.beat(), this.intervalMs);
      this.timer.unref();
    }
  }

  private beat(): void {
    for (const [ws, alive] of this.alive) {
      if (ws.readyState !== WebSocket.OPEN) continue;
      if (!alive) {
        ws.terminate();
        continue;
      }
      this.alive.set(ws, false);
      ws.ping();
    }
    if (this.alive.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}

export function isOpen(ws: WebSocket): boolean {
  return ws.readyState === WebSocket.OPEN;
}

export function sendJson(ws: WebSocket, frame: object): void {
  if (isOpen(ws)) ws.send(JSON.stringify(frame));
}

/** The error frame of CONTRACT §9. */
export function sendErrorFrame(ws: WebSocket, errorMessage: string): void {
  sendJson(ws, { type: "error", data: { errorMessage } });
}

/** Closes with a code and a reason (trimmed to the 123 bytes a close frame allows). */
export function closeSocket(ws: WebSocket, code: number, reason: string): void {
  if (ws.readyState !== WebSocket.OPEN && ws.readyState !== WebSocket.CONNECTING) return;
  let text = reason;
  while (Buffer.byteLength(text) > 123) text = text.slice(0, -1);
  ws.close(code, text);
}

/**
 * Closes a subscriber that let too much pile up (1008, CONTRACT §8). Its close frame queues behind
 * the data it does not read, so it is cut off if it has not gone a few seconds later. Nothing is
 * lost to it: the reason names the revision to resume from (`since`), that of the last event
 * written to it before the close frame, so a client that reads up to the close frame resumes with
 * exactly that, and one cut off earlier with the revision of the last event it received.
 */
export function dropSlow(ws: WebSocket, maxBufferedBytes: number, resumeSince: number): void {
  closeSocket(
    ws,
    CLOSE.policy,
    `too slow: over ${maxBufferedBytes} bytes unsent; resume with since=${resumeSince} (or the revision of the last event received)`,
  );
  setTimeout(() => {
    if (ws.readyState !== WebSocket.CLOSED) ws.terminate();
  }, 5000).unref();
}

interface Corkable {
  cork(): void;
  uncork(): void;
}

/**
 * Holds a socket's writes until `uncork`, so that a page of events leaves in one `writev` instead
 * of one system call per frame (with many subscribers the calls dominate the cost of fan-out).
 * `ws` has no cork of its own and keeps the TCP socket private; without one this does nothing.
 */
export function corked(ws: WebSocket): Corkable | undefined {
  const socket = (ws as unknown as { _socket?: Partial<Corkable> | null })._socket;
  if (!socket || typeof socket.cork !== "function" || typeof socket.uncork !== "function") return undefined;
  socket.cork();
  return socket as Corkable;
}

/**
 * For streams that can pause their source (logs, exec): over the bound, waits until the socket's
 * unsent data falls to half of it, and the engine's stream meanwhile applies its own back-pressure.
 * False once the socket is closed.
 */
export async function drained(ws: WebSocket, maxBufferedBytes: number): Promise<boolean> {
  if (ws.bufferedAmount <= maxBufferedBytes) return isOpen(ws);
  while (isOpen(ws) && ws.bufferedAmount > maxBufferedBytes / 2) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return isOpen(ws);
}
