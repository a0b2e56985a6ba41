// The events fan-out costs per socket, not per socket and event (issue 34, item 6): subscribers of
// one shape share each event's frame, and a burst of events reaches each socket in one write, off
// the request that made them, in slices of a bounded number of sockets per turn of the event loop;
// commits that come together share one read of the feed. Passes are paced by the loop's CPU time,
// and a pass whose writes are cheap serves 1,000 sockets in one turn. Subscribers of different
// shapes each get exactly their events, in order. A subscriber that stops reading is dropped with 1008 and the
// revision to resume from, and resumes with `since` losing nothing, while those that keep up are
// served every event. (A subscriber that changes shape while events wait, as a terminated
// service's access re-check makes it, loses none: test/streams/events.test.ts, the first tests.)
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, test } from "node:test";
import type { WebSocket } from "ws";
import {
  CPU_SHARE,
  FanOut,
  type FanOutClock,
  type FanOutMember,
  MAX_WAIT_MS,
  SLICE_SOCKETS,
} from "../../src/api/streams/fanout.ts";
import { type EventFeed, FeedEvent } from "../../src/api/streams/feed.ts";
import { type Caller, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";
import { type Frame, listen, openStream, type StreamClient } from "./support.ts";

let h: Harness;
let base: string;
let alice: Caller;

/** A subscriber's bound on unsent bytes here: small, so that a few MB overflow it. */
const BOUND = 256 * 1024;

before(async () => {
  h = await startHarness({
    env: { BERTH_STREAM_PING_INTERVAL_MS: "600000", BERTH_STREAM_MAX_BUFFERED_BYTES: String(BOUND) },
  });
  base = await listen(h);
  alice = await createUser(h, "alice");
});
after(() => h.close());

/** Counts the writes to each server-side socket of the events stream from now on. */
function countWrites(): Map<WebSocket, number> {
  const writes = new Map<WebSocket, number>();
  for (const ws of h.app.websocketServer.clients) {
    const socket = (ws as unknown as { _socket: { write: (...a: unknown[]) => boolean } })._socket;
    const write = socket.write.bind(socket);
    writes.set(ws, 0);
    socket.write = (...a: unknown[]) => {
      writes.set(ws, (writes.get(ws) ?? 0) + 1);
      return write(...a);
    };
  }
  return writes;
}

test("a burst of events reaches each of many subscribers in one write, every event in order", async () => {
  const subscribers: StreamClient[] = [];
  for (let i = 0; i < 20; i++) {
    subscribers.push(await openStream(`${base}/api/audit/v1/alice/events/`, { auth: alice.auth }));
  }
  const services = await openStream(`${base}/api/audit/v1/alice/events/?type=service`, { auth: alice.auth });
  // Every socket is open on the server before the writes are counted.
  await waitFor("the sockets to be open", async () => h.app.websocketServer.clients.size === 21, 5000, 10);
  await new Promise((resolve) => setTimeout(resolve, 100));
  const writes = countWrites();
  await burst(60, "burst");
  for (const s of subscribers) {
    await s.until("the whole burst", (f) => f.length >= 60);
  }
  await services.until("the burst's services", (f) => f.length >= 30);
  const uris = (frames: Frame[]) => frames.map((f) => f.resource_uri as string);
  const expected = Array.from({ length: 60 }, (_, i) => `/api/app/v1/alice/service/burst-${i}/`);
  for (const s of subscribers) {
    assert.deepEqual(uris(s.frames), expected, "every event, once, in order");
    const revisions = s.frames.map((f) => f.revision as number);
    assert.deepEqual(
      revisions,
      [...revisions].sort((a, b) => a - b),
    );
  }
  assert.deepEqual(
    uris(services.frames),
    expected.filter((_, i) => i % 2 === 0),
    "a subscriber of another shape gets its own events",
  );
  // 60 frames each: one write per socket (two if the burst straddled two passes), not one or two per frame.
  const counts = [...writes.values()];
  assert.equal(counts.length, 21);
  assert.ok(
    counts.every((n) => n >= 1 && n <= 2),
    `writes per socket for 60 events: ${counts.join(", ")}`,
  );
  for (const s of [...subscribers, services]) s.close();
  await waitFor("the sockets to close", async () => h.app.websocketServer.clients.size === 0, 5000, 10);
});

/** A feed whose changes the test offers itself. */
function testFeed() {
  const listeners = new Set<(event: FeedEvent) => void>();
  const feed = {
    listen(listener: (event: FeedEvent) => void) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  } as unknown as EventFeed;
  const offer = (e: FeedEvent) => {
    for (const listener of listeners) listener(e);
  };
  return { feed, offer };
}

/** A clock the test moves: wall time, the process's CPU time, the loop's idle time (ms). */
function testClock() {
  const at = { t: 0, cpu: 0, idle: 0 };
  const clock: FanOutClock = {
    now: () => at.t,
    cpuMs: () => at.cpu,
    idleMark: () => at.idle,
    idleSince: (mark) => at.idle - (mark as number),
  };
  return { at, clock };
}

function feedEvent(revision: number, namespace: string, parents = "[]"): FeedEvent {
  return new FeedEvent({
    revision,
    namespace,
    type: "service",
    action: "update",
    resource_uri: `/api/app/v1/${namespace}/service/s-${revision}/`,
    state: "Running",
    parents,
    datetime: Date.now(),
  });
}

test("a pass writes to a bounded number of sockets per turn of the event loop (1,000 cheap ones in one), the same frame bytes to each", async () => {
  const { feed, offer } = testFeed();
  // CPU time stands still: only the bound on sockets per turn splits the pass.
  const fanout = new FanOut(feed, testClock().clock);
  const release = fanout.hold();
  // Writes since the loop last reached its check phase (a pass yields with setImmediate).
  let run = 0;
  let longestRun = 0;
  let watching = true;
  const tick = () => {
    run = 0;
    if (watching) setImmediate(tick);
  };
  setImmediate(tick);
  const members = Array.from({ length: 2500 }, () => {
    const got: Buffer[] = [];
    const member: FanOutMember & { got: Buffer[] } = {
      cursor: 0,
      got,
      write(bytes) {
        run += 1;
        longestRun = Math.max(longestRun, run);
        got.push(bytes);
        return true;
      },
    };
    fanout.join(member, "alice|*", (e) => e.namespace === "alice");
    return member;
  });
  try {
    offer(feedEvent(1, "alice"));
    offer(feedEvent(2, "bob"));
    offer(feedEvent(3, "alice"));
    await waitFor(
      "every member to be written",
      async () => members.every((m) => m.got.length > 0),
      10_000,
      5,
    );
    assert.ok(longestRun <= SLICE_SOCKETS, `${longestRun} sockets were written in one turn`);
    // 1,000 subscribers whose writes fit in the slice's CPU time are served in one turn, not four.
    assert.equal(longestRun, 1000, "1,000 cheap sockets in one turn of the event loop");
    const first = members[0]!.got[0]!;
    const frames = first.toString();
    assert.match(frames, /s-1/);
    assert.match(frames, /s-3/);
    assert.doesNotMatch(frames, /bob/, "only the events of its shape");
    for (const m of members) {
      assert.equal(m.got.length, 1, "both events in one write");
      assert.equal(m.got[0], first, "the same bytes, built once, for every member of a shape");
      assert.equal(m.cursor, 3);
    }
  } finally {
    watching = false;
    release();
    fanout.stop();
  }
});

test("a pass waits for its share of the loop's own time (CPU or idle), and never longer than the longest wait", async () => {
  const { at, clock } = testClock();
  const { feed, offer } = testFeed();
  const fanout = new FanOut(feed, clock);
  const release = fanout.hold();
  // Each write costs 1 ms of CPU: a pass over the 10 members costs 10 ms.
  const members = Array.from({ length: 10 }, () => {
    const got: number[] = [];
    const member: FanOutMember & { got: number[] } = {
      cursor: 0,
      got,
      write(_bytes, events) {
        at.cpu += 1;
        for (const e of events) got.push(e.revision);
        return true;
      },
    };
    fanout.join(member, "alice|*", (e) => e.namespace === "alice");
    return member;
  });
  const allGot = (revision: number) => members.every((m) => m.got.at(-1) === revision);
  /** Lets the pacing's checks run for a while (real time; the clock stands still meanwhile). */
  const settle = () => new Promise((resolve) => setTimeout(resolve, 60));
  const share = 10 * (1 / CPU_SHARE - 1);
  try {
    offer(feedEvent(1, "alice"));
    await waitFor("the first pass", async () => allGot(1), 10_000, 5);
    offer(feedEvent(2, "alice"));
    at.cpu += share - 5;
    await settle();
    assert.ok(!allGot(2), "the loop has not had its share since the last pass");
    // Idle time is nobody's: it counts as the loop's own.
    at.idle += 6;
    await waitFor("the pass once the loop had its share", async () => allGot(2), 10_000, 5);
    offer(feedEvent(3, "alice"));
    await settle();
    assert.ok(!allGot(3));
    at.t += MAX_WAIT_MS;
    await waitFor("the pass after the longest wait", async () => allGot(3), 10_000, 5);
    for (const m of members) assert.deepEqual(m.got, [1, 2, 3], "every event, once, in order");
  } finally {
    release();
    fanout.stop();
  }
});

test("commits that come together share one read of the feed, not one read each", async () => {
  const s = await openStream(`${base}/api/audit/v1/alice/events/`, { auth: alice.auth });
  const feedRead = /^select \* from "changes" where "revision" > \S+ order by "revision" limit/;
  let reads = 0;
  const counter = h.db.statements;
  const record = counter.record.bind(counter);
  counter.record = (event) => {
    record(event);
    if (feedRead.test(event.query.sql)) reads += 1;
  };
  try {
    const started = performance.now();
    // Sent together: one after another, a loaded machine spaces commits wider than the shared read.
    await Promise.all(Array.from({ length: 40 }, (_, i) => burst(1, `together-${i}`)));
    const elapsedMs = performance.now() - started;
    await s.until("the 40 events", (f) => f.length >= 40);
    // One read per 10 ms while commits keep coming, one more for the last of them.
    assert.ok(
      reads <= Math.ceil(elapsedMs / 10) + 2 && reads < 40,
      `${reads} reads of the feed for 40 commits in ${elapsedMs.toFixed(0)} ms`,
    );
  } finally {
    counter.record = record;
    s.close();
    await s.closed;
  }
});

test("a subscriber that stops reading is dropped with 1008 and where to resume; with since it loses nothing, and those that keep up get every event", async () => {
  const fast = [
    await openStream(`${base}/api/audit/v1/alice/events/`, { auth: alice.auth }),
    await openStream(`${base}/api/audit/v1/alice/events/?type=service`, { auth: alice.auth }),
  ];
  const slow = await rawSubscriber("/api/audit/v1/alice/events/");
  slow.socket.pause();
  await waitFor("the sockets to be open", async () => h.app.websocketServer.clients.size === 3, 5000, 10);
  const slowOnServer = [...h.app.websocketServer.clients].at(-1)!;
  const since0 = await h.store.latestRevision();
  // Events of about 2.5 KB, a burst of 400 at a time until the server gives up on the slow one
  // (its kernel buffers fill first; then its unsent bytes pass the bound).
  const parents = JSON.stringify(
    Array.from(
      { length: 32 },
      (_, i) => `/api/app/v1/alice/stack/00000000-0000-0000-0000-${String(i).padStart(12, "0")}/`,
    ),
  );
  let committed = 0;
  while (slowOnServer.readyState === slowOnServer.OPEN) {
    assert.ok(committed < 40_000, "the slow subscriber was never dropped");
    await burst(400, `flood-${committed}`, parents);
    committed += 400;
    const n = committed;
    await fast[0]!.until(`${n} events`, (f) => f.length >= n, 30_000);
  }
  // Events after the drop, which the dropped subscriber can only get by resuming (it may have had
  // every earlier one buffered before its close frame).
  await burst(400, "after-drop", parents);
  committed += 400;
  await fast[0]!.until(`${committed} events`, (f) => f.length >= committed, 30_000);
  const last = await h.store.latestRevision();
  const services = Math.ceil(committed / 2);
  await fast[1]!.until("every service event", (f) => f.length >= services, 30_000);
  const all = Array.from({ length: committed }, (_, i) => since0 + 1 + i);
  for (const [i, s] of fast.entries()) {
    assert.equal(s.isClosed, false, "a subscriber that keeps up stays open");
    const revisions = s.frames.map((f: Frame) => f.revision as number);
    assert.deepEqual(
      revisions,
      i === 0 ? all : all.filter((_, k) => k % 2 === 0),
      "every event, once, in order",
    );
  }
  slow.socket.resume();
  const close = await slow.closeFrame;
  assert.equal(close.code, 1008);
  assert.match(close.reason, /too slow/);
  const received = slow.revisions;
  assert.ok(
    received.length < committed,
    `it got ${received.length} of ${committed} events before being dropped`,
  );
  assert.deepEqual(received, all.slice(0, received.length), "what it got came in order, without a gap");
  const since = Number(/resume with since=(\d+)/.exec(close.reason)?.[1]);
  assert.equal(
    since,
    received.at(-1) ?? since0,
    "the reason names the revision of the last event it received",
  );
  // Resuming from there: exactly the rest.
  const resumed = await openStream(`${base}/api/audit/v1/alice/events/?since=${since}`, { auth: alice.auth });
  await resumed.until("the rest", (f) => f.at(-1)?.revision === last, 30_000);
  assert.deepEqual(
    resumed.frames.map((f: Frame) => f.revision as number),
    all.slice(received.length),
  );
  for (const s of [...fast, resumed]) s.close();
  await waitFor("the sockets to close", async () => h.app.websocketServer.clients.size === 0, 10_000, 10);
});

/** Commits `count` service and action changes of alice's namespace in one transaction. */
async function burst(count: number, tag: string, parents = "[]"): Promise<void> {
  await h.store.transaction(async (tx) => {
    for (let i = 0; i < count; i++) {
      await tx.appendChange({
        namespace: "alice",
        type: i % 2 === 0 ? "service" : "action",
        action: "update",
        resource_uri: `/api/app/v1/alice/service/${tag}-${i}/`,
        state: "Running",
        parents,
        datetime: Date.now(),
      });
    }
  });
}

/**
 * An events subscriber on a raw TCP socket, so that it can stop reading (pause) and later read what
 * the server queued: the revisions of its text frames, and its close frame.
 */
async function rawSubscriber(path: string) {
  const port = (h.app.server.address() as net.AddressInfo).port;
  const socket = net.connect(port, "127.0.0.1");
  await new Promise((resolve) => socket.once("connect", resolve));
  socket.write(
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
      `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: ${alice.auth}\r\n\r\n`,
  );
  const revisions: number[] = [];
  let onClose: (c: { code: number; reason: string }) => void = () => {};
  const closeFrame = new Promise<{ code: number; reason: string }>((resolve) => {
    onClose = resolve;
  });
  let buffer: Buffer = Buffer.alloc(0);
  let upgraded = false;
  await new Promise<void>((resolve, reject) => {
    socket.on("data", (chunk: Buffer) => {
      buffer = buffer.length ? Buffer.concat([buffer, chunk]) : chunk;
      if (!upgraded) {
        const end = buffer.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buffer.subarray(0, end).toString();
        if (!head.startsWith("HTTP/1.1 101")) return reject(new Error(head));
        upgraded = true;
        buffer = buffer.subarray(end + 4);
        resolve();
      }
      // Server frames are unmasked: opcode, then a 7-bit, 16-bit or 64-bit length.
      let at = 0;
      for (;;) {
        if (buffer.length - at < 2) break;
        const opcode = buffer[at]! & 0x0f;
        let length = buffer[at + 1]! & 0x7f;
        let offset = at + 2;
        if (length === 126) {
          if (buffer.length - at < 4) break;
          length = buffer.readUInt16BE(at + 2);
          offset = at + 4;
        } else if (length === 127) {
          if (buffer.length - at < 10) break;
          length = Number(buffer.readBigUInt64BE(at + 2));
          offset = at + 10;
        }
        if (buffer.length < offset + length) break;
        const payload = buffer.subarray(offset, offset + length);
        if (opcode === 1) revisions.push(JSON.parse(payload.toString()).revision);
        if (opcode === 8) onClose({ code: payload.readUInt16BE(0), reason: payload.subarray(2).toString() });
        at = offset + length;
      }
      buffer = buffer.subarray(at);
    });
  });
  return { socket, revisions, closeFrame };
}
