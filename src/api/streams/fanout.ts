// Fan-out of live events to sockets, off the path of the requests that caused them (issue 34,
// item 6). Subscribers that want the same events (the same namespaces and filter: one shape) form
// a group; the feed hands each change to the fan-out once, which tests it once per group and queues
// it there. The bytes go out later, in passes:
// - each event's WebSocket frame (header and JSON) is built once, and a group's queued events are
//   joined once into chunks every member is sent, so a pass costs one write per socket and chunk,
//   however many events it carries and however many sockets share the shape;
// - a pass serves at most SLICE_SOCKETS sockets or SLICE_CPU_MS of CPU time per turn of the event
//   loop, then yields (setImmediate), so requests are answered between its slices;
// - passes are paced by the CPU time they take: after a pass, the next waits until the fan-out's
//   share of the main thread's CPU is back under CPU_SHARE. A socket write costs a fixed part (the
//   system call, a TCP segment, waking the reader: 3.5 µs on a quiet loopback, 15–35 µs on a loaded
//   2-core machine) and the kernel's copy of its bytes (about 0.06 µs per 320-byte event); waiting
//   gathers more events per pass and saves only the fixed part, once per socket. With few
//   subscribers passes follow each other within milliseconds; with 1,000 on a busy server the bytes
//   alone take about CPU_SHARE and passes come every few hundred ms. (Issue 34 item 6: letting
//   passes take 20–25 % once events were 30 ms old raised the fan-out from about 19 % to 25 % of the
//   main thread's CPU and cut p99 delivery only from 1.5 s to 0.5–1.5 s; PATCH ≥ 80 % of its
//   throughput and p99 < 100 ms together need the writes off the main thread.) CPU time, not wall
//   time, so a loaded machine (the thread waiting for a core) does not make the fan-out take a
//   larger share. Time the loop spent idle counts as others' (nothing waited for it), so an idle
//   server serves at once;
// - a member whose socket holds more than its bound unsent is dropped (1008, CONTRACT §8), with a
//   reason that names the revision to resume from with `since` (sockets.ts, dropSlow).
import { type EventLoopUtilization, performance } from "node:perf_hooks";
import type { WebSocket } from "ws";
import type { EventFeed, FeedEvent } from "./feed.ts";
import { isOpen } from "./sockets.ts";

/** The most CPU time a slice of a pass takes before it yields (checked every SLICE_CHECK sockets). */
const SLICE_CPU_MS = 8;
/**
 * The most sockets a slice of a pass writes to before it yields. CPU time is the bound that keeps
 * turns short; every slice costs the pass a turn of the loop (with a busy loop, several ms of wall
 * time each), so a pass over 1,000 sockets that fits in SLICE_CPU_MS takes one turn, not four.
 */
export const SLICE_SOCKETS = 1000;
const SLICE_CHECK = 25;
/** The share of the main thread's CPU time passes may take while events keep coming. */
export const CPU_SHARE = 0.15;
/** The longest a pass held back by the CPU share waits before it looks again. */
const MAX_CHECK_MS = 20;
/** The longest a queued event waits for a pass, however long the last one took. */
export const MAX_WAIT_MS = 1000;
/** Bytes of one chunk: a member is written a chunk at a time, its bound checked before each. */
const CHUNK_BYTES = 256 * 1024;

/** What every fan-out of this process has done (benchmarks print it; nothing decides by it). */
export const fanOutTotals = {
  passes: 0,
  slices: 0,
  writes: 0,
  events: 0,
  cpuMs: 0,
  /** Wall ms from each pass's oldest queued event to the pass's start, summed. */
  waitMs: 0,
  /** Wall ms from each pass's start to its end, summed. */
  passWallMs: 0,
};

/** What the pacing reads: wall time, CPU time, and the loop's idle time since a mark (all ms). */
export interface FanOutClock {
  now(): number;
  /** CPU time of this process (user and system; the main thread's, as long as no other works). */
  cpuMs(): number;
  /** A mark of the loop's idle time, and the idle ms since one. */
  idleMark(): unknown;
  idleSince(mark: unknown): number;
}

const processClock: FanOutClock = {
  now: () => performance.now(),
  cpuMs() {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  },
  idleMark: () => performance.eventLoopUtilization(),
  idleSince: (mark) => performance.eventLoopUtilization(mark as EventLoopUtilization).idle,
};

/** One socket of a group. */
export interface FanOutMember {
  /** Revision of the last change served to it (events at or before it are not sent again). */
  cursor: number;
  /**
   * Sends one chunk: `bytes` (the frames of `events`, joined) when every event is after its
   * cursor. False when it can take no more (closed, or dropped as too slow).
   */
  write(bytes: Buffer, events: readonly FeedEvent[]): boolean;
}

interface Chunk {
  bytes: Buffer;
  events: FeedEvent[];
}

class Group {
  readonly members = new Set<FanOutMember>();
  readonly queued: FeedEvent[] = [];
  constructor(readonly wants: (event: FeedEvent) => boolean) {}
}

export class FanOut {
  private readonly groups = new Map<string, Group>();
  private readonly memberGroups = new Map<FanOutMember, Group>();
  private readonly pending = new Set<Group>();
  private holders = 0;
  private unlisten: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private lastEnd = 0;
  /** CPU time the last pass took (ms). */
  private lastCpuMs = 0;
  /** The process's CPU time and the loop's idle mark when the last pass ended. */
  private restSince: { cpuMs: number; idle: unknown } | undefined;
  /** When the oldest event waiting for a pass was queued (clock.now()). */
  private oldestAt: number | undefined;

  constructor(
    private readonly feed: EventFeed,
    private readonly clock: FanOutClock = processClock,
  ) {}

  /**
   * Keeps the feed read for a subscriber from its upgrade on (through its catch-up, before it
   * joins a group); answers the release.
   */
  hold(): () => void {
    this.holders += 1;
    this.unlisten ??= this.feed.listen((event) => this.offer(event));
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.holders -= 1;
      if (this.holders === 0) {
        this.unlisten?.();
        this.unlisten = undefined;
      }
    };
  }

  /**
   * Puts a member in the group of its shape; live events after its cursor reach it from now. A
   * member that changes shape (its readable namespaces changed) is sent at once what either group
   * holds queued that its new shape wants, so the move loses nothing and repeats nothing.
   */
  join(member: FanOutMember, shape: string, wants: (event: FeedEvent) => boolean): void {
    const before = this.memberGroups.get(member);
    let group = this.groups.get(shape);
    if (group && group === before) return;
    if (!group) {
      group = new Group(wants);
      this.groups.set(shape, group);
    }
    if (before) {
      const due = new Map<number, FeedEvent>();
      for (const e of [...before.queued, ...group.queued]) {
        if (e.revision > member.cursor && wants(e)) due.set(e.revision, e);
      }
      const last = Math.max(before.queued.at(-1)?.revision ?? 0, group.queued.at(-1)?.revision ?? 0);
      this.leave(member);
      if (due.size > 0) {
        const events = [...due.values()].sort((a, b) => a.revision - b.revision);
        member.write(Buffer.concat(events.map(wsFrame)), events);
      }
      member.cursor = Math.max(member.cursor, last);
    }
    group.members.add(member);
    this.memberGroups.set(member, group);
  }

  leave(member: FanOutMember): void {
    const group = this.memberGroups.get(member);
    if (!group) return;
    this.memberGroups.delete(member);
    group.members.delete(member);
    if (group.members.size > 0) return;
    for (const [shape, g] of this.groups) if (g === group) this.groups.delete(shape);
    this.pending.delete(group);
    if (this.pending.size === 0) this.oldestAt = undefined;
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.pending.clear();
    this.oldestAt = undefined;
    this.unlisten?.();
    this.unlisten = undefined;
  }

  /** The feed's one listener: each change tested once per shape, queued for the next pass. */
  private offer(event: FeedEvent): void {
    for (const group of this.groups.values()) {
      if (!group.wants(event)) continue;
      group.queued.push(event);
      this.pending.add(group);
    }
    if (this.pending.size === 0) return;
    this.oldestAt ??= this.clock.now();
    this.schedule();
  }

  /**
   * Starts the next pass once the loop has spent, since the last one, (1 / CPU_SHARE − 1) times
   * the CPU time that pass took on other work or idle: time the thread actually had, so a pass
   * takes at most CPU_SHARE of the loop when requests keep it busy, and starts within
   * milliseconds when it is idle (idle time is nobody's). Never later than MAX_WAIT_MS.
   */
  private schedule(): void {
    if (this.running || this.timer) return;
    const needed = this.lastCpuMs * (1 / CPU_SHARE - 1);
    const since = this.restSince;
    const check = () => {
      this.timer = undefined;
      const others = since ? this.clock.cpuMs() - since.cpuMs + this.clock.idleSince(since.idle) : needed;
      if (others >= needed || this.clock.now() - this.lastEnd >= MAX_WAIT_MS) {
        void this.pass();
        return;
      }
      this.timer = setTimeout(check, Math.min(MAX_CHECK_MS, Math.max(1, needed - others)));
    };
    this.timer = setTimeout(check, 0);
  }

  private async pass(): Promise<void> {
    this.running = true;
    fanOutTotals.passes += 1;
    const clock = this.clock;
    const started = clock.now();
    fanOutTotals.waitMs += started - (this.oldestAt ?? started);
    this.oldestAt = undefined;
    let cpuMs = 0;
    let sliceCpu = clock.cpuMs();
    let served = 0;
    try {
      const groups = [...this.pending];
      this.pending.clear();
      for (const group of groups) {
        const events = group.queued.splice(0);
        fanOutTotals.events += events.length;
        const chunks = chunksOf(events);
        for (const member of [...group.members]) {
          if (!group.members.has(member)) continue;
          for (const chunk of chunks) if (!serve(member, chunk)) break;
          served += 1;
          if (served % SLICE_CHECK !== 0) continue;
          const used = clock.cpuMs() - sliceCpu;
          if (served < SLICE_SOCKETS && used < SLICE_CPU_MS) continue;
          cpuMs += used;
          fanOutTotals.slices += 1;
          await new Promise((resolve) => setImmediate(resolve));
          sliceCpu = clock.cpuMs();
          served = 0;
        }
      }
    } finally {
      cpuMs += clock.cpuMs() - sliceCpu;
      fanOutTotals.slices += 1;
      fanOutTotals.cpuMs += cpuMs;
      this.running = false;
      this.lastEnd = clock.now();
      fanOutTotals.passWallMs += this.lastEnd - started;
      this.restSince = { cpuMs: clock.cpuMs(), idle: clock.idleMark() };
      this.lastCpuMs = cpuMs;
      if (this.pending.size > 0) this.schedule();
    }
  }
}

/** A chunk to one member: whole when it is after the member's cursor, else only what it has not had. */
function serve(member: FanOutMember, chunk: Chunk): boolean {
  const last = chunk.events.at(-1)!.revision;
  if (last <= member.cursor) return true;
  fanOutTotals.writes += 1;
  if (chunk.events[0]!.revision > member.cursor) {
    const ok = member.write(chunk.bytes, chunk.events);
    member.cursor = last;
    return ok;
  }
  // It joined while these were queued: only the later ones.
  const later = chunk.events.filter((e) => e.revision > member.cursor);
  const ok = member.write(Buffer.concat(later.map(wsFrame)), later);
  member.cursor = last;
  return ok;
}

function chunksOf(events: readonly FeedEvent[]): Chunk[] {
  const chunks: Chunk[] = [];
  let current: FeedEvent[] = [];
  let bytes = 0;
  const close = () => {
    if (current.length === 0) return;
    chunks.push({
      bytes: current.length === 1 ? wsFrame(current[0]!) : Buffer.concat(current.map(wsFrame)),
      events: current,
    });
    current = [];
    bytes = 0;
  };
  for (const event of events) {
    const size = wsFrame(event).length;
    if (bytes > 0 && bytes + size > CHUNK_BYTES) close();
    current.push(event);
    bytes += size;
  }
  close();
  return chunks;
}

const framed = new WeakMap<FeedEvent, Buffer>();

/**
 * The event's whole WebSocket frame (RFC 6455 §5.2: FIN, text, unmasked as a server sends it),
 * built once for every socket.
 */
export function wsFrame(event: FeedEvent): Buffer {
  let frame = framed.get(event);
  if (frame) return frame;
  const payload = event.frame();
  const n = payload.length;
  const head = n < 126 ? 2 : n < 65536 ? 4 : 10;
  frame = Buffer.allocUnsafe(head + n);
  frame[0] = 0x81;
  if (n < 126) frame[1] = n;
  else if (n < 65536) {
    frame[1] = 126;
    frame.writeUInt16BE(n, 2);
  } else {
    frame[1] = 127;
    frame.writeBigUInt64BE(BigInt(n), 2);
  }
  payload.copy(frame, head);
  framed.set(event, frame);
  return frame;
}

interface RawSocket {
  write(data: Buffer): boolean;
}

/**
 * The socket under a `ws` WebSocket that frames may be written to as they are: open, and with no
 * extension that would change the bytes of a frame (permessage-deflate). Writes of whole frames
 * do not interleave with `ws`'s own (each of which is one synchronous write).
 */
export function rawSocket(ws: WebSocket): RawSocket | undefined {
  if (!isOpen(ws) || ws.extensions !== "") return undefined;
  const socket = (ws as unknown as { _socket?: Partial<RawSocket> | null })._socket;
  return socket && typeof socket.write === "function" ? (socket as RawSocket) : undefined;
}
