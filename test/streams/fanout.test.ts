// The events fan-out costs per socket, not per socket and event (issue 34, item 6): subscribers of
// one shape share each event's frame, and a burst of events reaches each socket in one write, off
// the request that made them. Subscribers of different shapes each get exactly their events, in
// order. (A subscriber that changes shape while events wait, as a terminated service's access
// re-check makes it, loses none: test/streams/events.test.ts, the first tests.)
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { WebSocket } from "ws";
import { type Caller, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";
import { type Frame, listen, openStream, type StreamClient } from "./support.ts";

let h: Harness;
let base: string;
let alice: Caller;

before(async () => {
  h = await startHarness({ env: { BERTH_STREAM_PING_INTERVAL_MS: "600000" } });
  base = await listen(h);
  alice = await createUser(h, "alice");
});
after(() => h.close());

/** Commits `count` service changes of alice's namespace in one transaction. */
async function burst(count: number, tag: string): Promise<void> {
  await h.store.transaction(async (tx) => {
    for (let i = 0; i < count; i++) {
      await tx.appendChange({
        namespace: "alice",
        type: i % 2 === 0 ? "service" : "action",
        action: "update",
        resource_uri: `/api/app/v1/alice/service/${tag}-${i}/`,
        state: "Running",
        parents: "[]",
        datetime: Date.now(),
      });
    }
  });
}

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
