// The tunnel protocol: many byte streams multiplexed over one message transport (a WebSocket),
// with per-stream flow control and hard limits. Berth is the only side that opens streams; the
// agent connects each one to its local engine socket and nothing else. Everything the other side
// sends is checked: a frame that breaks the rules ends the whole tunnel, never Berth's process.
//
// Binary message = one frame: [type u8][stream id u32 BE][payload]
//   OPEN   (opener → acceptor) a new stream; no payload: the agent's engine. A payload names
//          another target the acceptor offers (`router`, agents of version 2, which say so in
//          the tunnel's handshake: an older agent takes a payload for a broken rule)
//   DATA   bytes; at most MAX_DATA_BYTES, never beyond the window the receiver granted
//   WINDOW payload u32 BE: the receiver may be sent that many more bytes
//   END    the sender sends no more data on this stream (half-close)
//   RESET  the stream is gone, both ways; payload: a short UTF-8 reason
import { Duplex } from "node:stream";

export const FRAME = { OPEN: 1, DATA: 2, WINDOW: 3, END: 4, RESET: 5 } as const;
const HEADER_BYTES = 5;
/** Largest payload of one DATA frame. */
export const MAX_DATA_BYTES = 32 * 1024;
/** Bytes a sender may have in flight per stream before the receiver grants more. */
export const STREAM_WINDOW_BYTES = 256 * 1024;
/** Streams open at once over one tunnel. */
export const MAX_STREAMS = 256;
const MAX_REASON_BYTES = 200;
/** Longest target name an OPEN frame may carry. */
const MAX_TARGET_BYTES = 32;

/** One side of the message transport (a WebSocket carrying binary messages). */
export interface MessageTransport {
  send(frame: Buffer): void;
  /** Ends the transport; the mux is already closed when this is called. */
  close(reason: string): void;
}

/** The other side broke the protocol; the tunnel is closed. */
export class TunnelProtocolError extends Error {}

/** An error with the code network errors carry, so engine clients treat it as unreachable. */
export function connectionError(message: string, code = "ECONNRESET"): Error {
  return Object.assign(new Error(message), { code });
}

function frame(type: number, id: number, payload?: Buffer): Buffer {
  const header = Buffer.allocUnsafe(HEADER_BYTES);
  header.writeUInt8(type, 0);
  header.writeUInt32BE(id, 1);
  return payload?.length ? Buffer.concat([header, payload]) : header;
}

function reasonBytes(reason: string): Buffer {
  let b = Buffer.from(reason, "utf8");
  if (b.length > MAX_REASON_BYTES) b = b.subarray(0, MAX_REASON_BYTES);
  return b;
}

/**
 * A logical stream of the tunnel. It stands in for a TCP socket where Node's HTTP client expects
 * one (hence the no-op socket methods), including after an HTTP upgrade (attach, exec).
 */
export class TunnelStream extends Duplex {
  readonly remoteAddress = "tunnel";
  readonly remotePort = 0;
  readonly localAddress = "tunnel";
  readonly localPort = 0;
  /** Bytes we may still send. */
  private sendWindow = STREAM_WINDOW_BYTES;
  /** Bytes the peer may still send us. */
  private recvWindow = STREAM_WINDOW_BYTES;
  /** Bytes received and handed on, not yet granted back to the peer. */
  private unacked = 0;
  private paused = false;
  private pending: { chunk: Buffer; callback: (err?: Error | null) => void } | undefined;
  private remoteEnded = false;
  private localEnded = false;
  private gone = false;

  constructor(
    private readonly mux: TunnelMux,
    readonly id: number,
  ) {
    super({ allowHalfOpen: true, highWaterMark: 64 * 1024 });
  }

  // Socket methods Node's HTTP client and agent call; a tunnel stream has nothing to tune.
  setKeepAlive(): this {
    return this;
  }
  setNoDelay(): this {
    return this;
  }
  setTimeout(_ms: number, callback?: () => void): this {
    if (callback) this.once("timeout", callback);
    return this;
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    this.pending = { chunk, callback };
    this.flush();
  }

  /** Sends as much of the pending chunk as the window allows; completes the write once all is sent. */
  private flush(): void {
    const p = this.pending;
    if (!p || this.gone) return;
    while (p.chunk.length > 0 && this.sendWindow > 0) {
      const n = Math.min(p.chunk.length, this.sendWindow, MAX_DATA_BYTES);
      this.mux.sendFrame(FRAME.DATA, this.id, p.chunk.subarray(0, n));
      this.sendWindow -= n;
      p.chunk = p.chunk.subarray(n);
    }
    if (p.chunk.length === 0) {
      this.pending = undefined;
      p.callback();
    }
  }

  override _final(callback: (err?: Error | null) => void): void {
    if (!this.gone) this.mux.sendFrame(FRAME.END, this.id);
    this.localEnded = true;
    this.maybeForget();
    callback();
  }

  override _read(): void {
    if (this.paused) {
      this.paused = false;
      this.grant(true);
    }
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    if (!this.gone) {
      this.gone = true;
      if (!(this.localEnded && this.remoteEnded))
        this.mux.sendFrame(FRAME.RESET, this.id, reasonBytes(err?.message ?? "closed"));
      this.mux.forget(this.id);
    }
    const p = this.pending;
    this.pending = undefined;
    p?.callback(err ?? connectionError("tunnel stream closed"));
    callback(err);
  }

  private grant(force: boolean): void {
    if (this.gone || this.remoteEnded || this.unacked === 0) return;
    if (!force && this.unacked < STREAM_WINDOW_BYTES / 4) return;
    const payload = Buffer.allocUnsafe(4);
    payload.writeUInt32BE(this.unacked, 0);
    this.recvWindow += this.unacked;
    this.unacked = 0;
    this.mux.sendFrame(FRAME.WINDOW, this.id, payload);
  }

  private maybeForget(): void {
    if (this.localEnded && this.remoteEnded && !this.gone) {
      this.gone = true;
      this.mux.forget(this.id);
    }
  }

  // ---- frames from the peer (called by the mux) ----

  onData(payload: Buffer): void {
    if (this.remoteEnded) throw new TunnelProtocolError(`data after end on stream ${this.id}`);
    if (payload.length > this.recvWindow)
      throw new TunnelProtocolError(`stream ${this.id} sent beyond its window`);
    this.recvWindow -= payload.length;
    this.unacked += payload.length;
    if (this.push(payload)) this.grant(false);
    else this.paused = true;
  }

  onWindow(payload: Buffer): void {
    if (payload.length !== 4) throw new TunnelProtocolError("malformed window frame");
    const more = payload.readUInt32BE(0);
    if (more === 0 || this.sendWindow + more > STREAM_WINDOW_BYTES)
      throw new TunnelProtocolError(`stream ${this.id} granted more than its window`);
    this.sendWindow += more;
    this.flush();
  }

  onEnd(): void {
    if (this.remoteEnded) throw new TunnelProtocolError(`stream ${this.id} ended twice`);
    this.remoteEnded = true;
    this.push(null);
    this.maybeForget();
  }

  onReset(payload: Buffer): void {
    this.gone = true;
    this.mux.forget(this.id);
    const reason = payload.toString("utf8").replace(/[^\x20-\x7e]/g, "?");
    this.destroy(connectionError(`the tunnel's far end closed the stream: ${reason || "no reason"}`));
  }

  /** The whole tunnel went away. */
  abort(reason: string): void {
    this.gone = true;
    this.destroy(connectionError(reason));
  }
}

/**
 * One end of a tunnel. The opener (Berth) calls `open()`; the acceptor (the agent) is handed each
 * stream the opener starts. `receive()` takes every binary message from the transport.
 */
export class TunnelMux {
  private readonly streams = new Map<number, TunnelStream>();
  private nextId = 1;
  private closedReason: string | undefined;

  constructor(
    private readonly transport: MessageTransport,
    private readonly opts:
      | { role: "opener" }
      | {
          role: "acceptor";
          /** A stream Berth opened, to `target` ("" for the engine; the acceptor resets what it does not offer). */
          onStream(stream: TunnelStream, target: string): void;
        },
  ) {}

  /** Why the tunnel was closed, once it is. */
  get closeReason(): string | undefined {
    return this.closedReason;
  }

  get closed(): boolean {
    return this.closedReason !== undefined;
  }

  get openStreams(): number {
    return this.streams.size;
  }

  /** A new stream to one of the acceptor's targets: its engine (""), or another it offers. */
  open(target = ""): TunnelStream {
    if (this.opts.role !== "opener") throw new Error("only the opener starts streams");
    const name = Buffer.from(target, "utf8");
    if (name.length > MAX_TARGET_BYTES) throw new Error(`target name over ${MAX_TARGET_BYTES} bytes`);
    if (this.closedReason) throw connectionError(this.closedReason, "ECONNREFUSED");
    if (this.streams.size >= MAX_STREAMS)
      throw connectionError(`the tunnel already carries ${MAX_STREAMS} streams`, "ECONNREFUSED");
    const id = this.nextId;
    this.nextId = this.nextId >= 0xffffffff ? 1 : this.nextId + 1;
    const s = new TunnelStream(this, id);
    this.streams.set(id, s);
    this.sendFrame(FRAME.OPEN, id, name);
    return s;
  }

  sendFrame(type: number, id: number, payload?: Buffer): void {
    if (this.closedReason) return;
    this.transport.send(frame(type, id, payload));
  }

  forget(id: number): void {
    this.streams.delete(id);
  }

  /** One binary message from the peer. A broken rule closes the tunnel. */
  receive(message: Buffer): void {
    if (this.closedReason) return;
    try {
      this.handle(message);
    } catch (err) {
      if (!(err instanceof TunnelProtocolError)) throw err;
      this.close(`protocol error: ${err.message}`);
    }
  }

  private handle(message: Buffer): void {
    if (message.length < HEADER_BYTES) throw new TunnelProtocolError("frame shorter than its header");
    const type = message.readUInt8(0);
    const id = message.readUInt32BE(1);
    const payload = message.subarray(HEADER_BYTES);
    if (id === 0) throw new TunnelProtocolError("stream id 0");
    if (type === FRAME.OPEN) {
      if (this.opts.role !== "acceptor") throw new TunnelProtocolError("the agent may not open streams");
      if (payload.length > MAX_TARGET_BYTES) throw new TunnelProtocolError("open frame with a long payload");
      if (this.streams.has(id)) throw new TunnelProtocolError(`stream ${id} opened twice`);
      const s = new TunnelStream(this, id);
      if (this.streams.size >= MAX_STREAMS) {
        this.sendFrame(FRAME.RESET, id, reasonBytes("too many streams"));
        return;
      }
      this.streams.set(id, s);
      this.opts.onStream(s, payload.toString("utf8"));
      return;
    }
    if (type === FRAME.DATA && payload.length > MAX_DATA_BYTES)
      throw new TunnelProtocolError(`data frame of ${payload.length} bytes`);
    const s = this.streams.get(id);
    if (!s) {
      // A frame for a stream that just closed on our side is normal; one we never opened is not.
      if (this.opts.role === "opener" && !this.wasOpened(id))
        throw new TunnelProtocolError(`frame for stream ${id}, which Berth never opened`);
      return;
    }
    switch (type) {
      case FRAME.DATA:
        s.onData(payload);
        return;
      case FRAME.WINDOW:
        s.onWindow(payload);
        return;
      case FRAME.END:
        s.onEnd();
        return;
      case FRAME.RESET:
        s.onReset(payload);
        return;
      default:
        throw new TunnelProtocolError(`unknown frame type ${type}`);
    }
  }

  private wasOpened(id: number): boolean {
    return id < this.nextId;
  }

  /** Ends every stream and the transport. */
  close(reason: string): void {
    if (this.closedReason) return;
    this.closedReason = reason;
    for (const s of [...this.streams.values()]) s.abort(reason);
    this.streams.clear();
    this.transport.close(reason);
  }
}
