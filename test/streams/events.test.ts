// The events stream over a real WebSocket (CONTRACT §2, §8): what a subscriber sees of a service's
// life on simulated nodes, filters, namespaces, resuming with `since`, refusals on the upgrade,
// and dropping a subscriber that does not read (pings: liveness.test.ts).
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import {
  addMember,
  type Caller,
  call,
  createUser,
  type Harness,
  startHarness,
  waitFor,
} from "../support/harness.ts";
import {
  type Frame,
  inState,
  listen,
  openStream,
  refusal,
  runningService,
  type StreamClient,
  simulatedCluster,
} from "./support.ts";

let h: Harness;
let base: string;
let alice: Caller;
let bob: Caller;
let cluster: Frame;

const MAX_BUFFERED_BYTES = 64 * 1024;

before(async () => {
  h = await startHarness({
    env: {
      BERTH_RECONCILE_INTERVAL_MS: "200",
      BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
      // A subscriber that stops reading cannot answer pings either: here only the bound may drop it.
      BERTH_STREAM_PING_INTERVAL_MS: "600000",
      BERTH_STREAM_MAX_BUFFERED_BYTES: String(MAX_BUFFERED_BYTES),
    },
  });
  base = await listen(h);
  alice = await createUser(h, "alice");
  bob = await createUser(h, "bob");
  cluster = await simulatedCluster(h, alice, 2);
});
after(() => h.close());

const withoutNs = (uri: string) =>
  uri.replace(/^\/api\/(\w+)\/v1\/[^/]+\/(\w+)\/([^/]+)\/$/, "/api/$1/v1/$2/$3/");
const of = (frames: Frame[], uri: string) => frames.filter((f) => f.resource_uri === uri);

describe("events stream", () => {
  let all: StreamClient;
  let servicesOnly: StreamClient;
  let bobs: StreamClient;
  let byParent: StreamClient;
  let service: Frame;
  let containers: string[];

  test("a subscriber sees a service and its containers created, changing state and terminated, in order", async () => {
    all = await openStream(`${base}/api/audit/v1/events/`, { auth: alice.auth });
    servicesOnly = await openStream(`${base}/api/audit/v1/alice/events?type=service`, { auth: alice.auth });
    bobs = await openStream(`${base}/v1/events`, { auth: bob.auth });

    service = await runningService(h, alice, { name: "web", target_num_containers: 2 });
    containers = service.containers;
    byParent = await openStream(`${base}/api/audit/v1/events/?parents=${withoutNs(service.resource_uri)}`, {
      auth: alice.auth,
    });
    const terminate = await call(h, alice, "DELETE", service.resource_uri);
    assert.equal(terminate.status, 202, terminate.raw);
    await inState(h, alice, service.resource_uri, "Terminated");
    await all.until("the service's delete event", (fs) =>
      of(fs, service.resource_uri).some((f) => f.action === "delete"),
    );

    const own = of(all.frames, service.resource_uri);
    assert.deepEqual(
      { action: own[0].action, state: own[0].state },
      { action: "create", state: "Not running" },
      "the first event of the service is its creation",
    );
    const states = own.map((f) => f.state);
    for (const state of ["Starting", "Running", "Terminating"])
      assert.ok(states.includes(state), `the service went through ${state}: ${states.join(" → ")}`);
    assert.ok(states.indexOf("Starting") < states.indexOf("Running"));
    assert.ok(states.indexOf("Running") < states.indexOf("Terminating"));
    assert.deepEqual(
      { action: own.at(-1).action, state: own.at(-1).state },
      { action: "delete", state: "Terminated" },
    );
    assert.deepEqual(own[0].parents, [], "a service without a stack has no parents");

    const node = (uri: string) => uri.startsWith("/api/infra/v1/alice/node/");
    for (const uri of containers) {
      const events = of(all.frames, uri);
      assert.equal(events[0].action, "create", `${uri} starts with its creation`);
      assert.equal(events.at(-1).action, "delete", `${uri} ends with its termination`);
      assert.equal(events.at(-1).state, "Terminated");
      assert.ok(
        events.some((f) => f.state === "Running"),
        `${uri} ran`,
      );
      for (const e of events) {
        assert.equal(e.type, "container");
        assert.equal(e.parents[0], service.resource_uri, "a container's first parent is its service");
        assert.ok(e.parents.some(node), "a container names its node");
        assert.ok(e.parents.includes(cluster.resource_uri), "and the node's cluster");
      }
    }
    const actions = all.frames.filter((f) => f.type === "action" && f.parents[0] === service.resource_uri);
    assert.ok(
      actions.some((f) => f.state === "Success"),
      "the start and terminate actions are events too, with the service as parent",
    );

    // Every frame has the contract's fields; revisions only grow; ids and times have their forms.
    let last = 0;
    for (const f of all.frames) {
      assert.deepEqual(Object.keys(f).sort(), [
        "action",
        "datetime",
        "parents",
        "resource_uri",
        "revision",
        "state",
        "type",
        "uuid",
      ]);
      assert.ok(f.revision > last, "events arrive in revision order");
      last = f.revision;
      assert.match(f.uuid, /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      assert.match(f.datetime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
  });

  test("a type=service subscriber sees only services, the same events in the same order", async () => {
    await servicesOnly.until("the service's delete event", (fs) =>
      fs.some((f) => f.resource_uri === service.resource_uri && f.action === "delete"),
    );
    assert.ok(servicesOnly.frames.every((f) => f.type === "service"));
    assert.deepEqual(
      of(servicesOnly.frames, service.resource_uri),
      of(all.frames, service.resource_uri),
      "same ids, states and order",
    );
  });

  test("a parents filter (URI without namespace) gives the service's containers and actions only", async () => {
    await byParent.until("the containers' delete events", (fs) =>
      containers.every((uri) => fs.some((f) => f.resource_uri === uri && f.action === "delete")),
    );
    assert.ok(byParent.frames.length > 0);
    for (const f of byParent.frames) {
      assert.ok(
        f.parents.includes(service.resource_uri),
        `${f.type} ${f.resource_uri} has the service as parent`,
      );
      assert.ok(f.type === "container" || f.type === "action");
    }
  });

  test("another user's subscriber sees none of them, but its own", async () => {
    const mine = await call(h, bob, "POST", "/api/app/v1/service/", { image: "busybox:local", name: "bobs" });
    assert.equal(mine.status, 201);
    await bobs.until("bob's own service", (fs) => fs.some((f) => f.resource_uri === mine.body.resource_uri));
    const alices = bobs.frames.filter((f) => JSON.stringify(f).includes("/alice/"));
    assert.deepEqual(alices, [], "nothing of alice's namespace");
  });

  test("resuming with since sends exactly what was missed, with the same ids, then live events", async () => {
    const frames = of(all.frames, service.resource_uri);
    const from = frames[1]; // right after the create
    const resumed = await openStream(`${base}/api/audit/v1/events/?since=${from.revision}`, {
      auth: alice.auth,
    });
    const missed = all.frames.filter((f) => f.revision > from.revision);
    await resumed.until("the missed events", (fs) => fs.length >= missed.length);
    assert.deepEqual(resumed.frames.slice(0, missed.length), missed);

    const later = await call(h, alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "later",
    });
    await resumed.until("a live event after catching up", (fs) =>
      fs.some((f) => f.resource_uri === later.body.resource_uri),
    );
    const revisions = resumed.frames.map((f) => f.revision);
    assert.deepEqual(
      revisions,
      [...revisions].sort((a, b) => a - b),
      "no event twice, none out of order",
    );
    assert.equal(new Set(revisions).size, revisions.length);
    resumed.close();
  });

  test("object and type filters combine; an unknown type is a 400 on the upgrade", async () => {
    const one = containers[0]!;
    const filtered = await openStream(`${base}/api/audit/v1/events/?type=container&object=${one}&since=0`, {
      auth: alice.auth,
    });
    await filtered.until("the container's delete", (fs) => fs.some((f) => f.action === "delete"));
    assert.ok(filtered.frames.every((f) => f.resource_uri === one && f.type === "container"));
    filtered.close();

    const bad = await refusal(`${base}/api/audit/v1/events/?type=bogus`, alice.auth);
    assert.equal(bad.status, 400);
    assert.equal(bad.body.code, "invalid_field");
    const badSince = await refusal(`${base}/v1/events/?since=yesterday`, alice.auth);
    assert.equal(badSince.status, 400);
  });
});

describe("organizations", () => {
  test("an organization's events reach its members, on the bare path and on the organization's", async () => {
    assert.equal((await call(h, alice, "POST", "/api/v1.1/orgs/", { name: "acme" })).status, 201);
    await addMember(h, alice, "acme", bob);
    const bobAll = await openStream(`${base}/v1/events/`, { auth: bob.auth });
    const bobAcme = await openStream(`${base}/api/audit/v1/acme/events/?type=service`, { auth: bob.auth });
    const created = await call(h, alice, "POST", "/api/app/v1/acme/service/", {
      image: "busybox:local",
      name: "shared",
    });
    assert.equal(created.status, 201, created.raw);
    for (const s of [bobAll, bobAcme]) {
      await s.until("the organization's service", (fs) =>
        fs.some((f) => f.resource_uri === created.body.resource_uri && f.action === "create"),
      );
    }
    assert.ok(bobAcme.frames.every((f) => f.resource_uri.startsWith("/api/app/v1/acme/service/")));
    bobAll.close();
    bobAcme.close();
  });
});

describe("handshake", () => {
  test("bad or missing credentials are a 401 with WWW-Authenticate on the upgrade itself", async () => {
    for (const auth of [undefined, `Basic ${Buffer.from("alice:wrong").toString("base64")}`]) {
      const r = await refusal(`${base}/api/audit/v1/events/`, auth);
      assert.equal(r.status, 401);
      assert.equal(r.headers["www-authenticate"], 'Basic realm="berth"');
      assert.equal(typeof r.body.error, "string");
    }
    const wrongQuery = await refusal(`${base}/v1/events/?user=alice&token=nope`);
    assert.equal(wrongQuery.status, 401);
  });

  test("credentials in the query work for clients that send no header", async () => {
    const s = await openStream(`${base}/v1/events/?user=alice&token=${alice.key}`);
    const created = await call(h, alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "q",
    });
    await s.until("the new service", (fs) => fs.some((f) => f.resource_uri === created.body.resource_uri));
    s.close();
  });

  test("another user's namespace is a 404 on the upgrade, like a missing one", async () => {
    const r = await refusal(`${base}/api/audit/v1/alice/events/`, bob.auth);
    assert.equal(r.status, 404);
    const missing = await refusal(`${base}/api/audit/v1/nobody/events/`, bob.auth);
    assert.deepEqual(r.body, missing.body);
  });

  test("an upgrade on a path that is not a stream is a 404 on the handshake", async () => {
    const r = await refusal(`${base}/api/app/v1/service/`, alice.auth);
    assert.equal(r.status, 404);
    assert.equal(r.body.code, "not_found");
    assert.equal((await refusal(`${base}/api/app/v1/service/`)).status, 401, "credentials are checked first");
  });

  test("a plain GET on the stream path says to upgrade (426), and streams create no action", async () => {
    const before = (await call(h, alice, "GET", "/api/audit/v1/action/?limit=1")).body.meta.total_count;
    const plain = await call(h, alice, "GET", "/api/audit/v1/events/");
    assert.equal(plain.status, 426);
    assert.equal(plain.body.code, "websocket_required");
    const s = await openStream(`${base}/api/audit/v1/events/`, { auth: alice.auth });
    s.close();
    await s.closed;
    const afterCount = (await call(h, alice, "GET", "/api/audit/v1/action/?limit=1")).body.meta.total_count;
    assert.equal(afterCount, before);
  });
});

describe("bounded memory", () => {
  test("a subscriber that stops reading is closed with 1008 instead of growing the server's memory", async () => {
    const { socket, frames } = await rawSubscriber(`/v1/events/`, alice);
    socket.pause();
    // About 10 MB of events, more than the loopback connection's kernel buffers hold.
    const count = 8000;
    const parents = JSON.stringify(
      Array.from(
        { length: 16 },
        (_, i) => `/api/app/v1/alice/stack/00000000-0000-0000-0000-${String(i).padStart(12, "0")}/`,
      ),
    );
    await h.store.transaction(async (tx) => {
      for (let i = 0; i < count; i++) {
        await tx.appendChange({
          namespace: "alice",
          type: "service",
          action: "update",
          resource_uri: `/api/app/v1/alice/service/flood-${i}/`,
          state: "Running",
          parents,
          datetime: Date.now(),
        });
      }
    });
    await waitFor(
      "the server to give up on the subscriber",
      async () => [...h.app.websocketServer.clients].some((c) => c.readyState === c.CLOSING),
      20_000,
    );
    socket.resume();
    const close = await frames.closeFrame;
    assert.equal(close.code, 1008);
    assert.match(close.reason, /too slow/);
    assert.match(close.reason, /resume with since=/, "the reason says how to resume without a gap");
    assert.ok(frames.texts < count, `it got ${frames.texts} of ${count} events before being dropped`);
  });
});

/**
 * A WebSocket client on a raw TCP socket, so that the test can stop reading (pause) and later
 * parse what the server queued: the number of text frames and the close frame.
 */
async function rawSubscriber(path: string, who: Caller) {
  const port = (h.app.server.address() as net.AddressInfo).port;
  const socket = net.connect(port, "127.0.0.1");
  await new Promise((resolve) => socket.once("connect", resolve));
  socket.write(
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
      `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: ${who.auth}\r\n\r\n`,
  );
  let buffer = Buffer.alloc(0);
  let upgraded = false;
  const frames = { texts: 0, closeFrame: undefined as unknown as Promise<{ code: number; reason: string }> };
  let onClose: (c: { code: number; reason: string }) => void = () => {};
  frames.closeFrame = new Promise((resolve) => {
    onClose = resolve;
  });
  const opened = new Promise<void>((resolve, reject) => {
    socket.on("data", (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
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
      for (;;) {
        if (buffer.length < 2) return;
        const opcode = buffer[0]! & 0x0f;
        let length = buffer[1]! & 0x7f;
        let offset = 2;
        if (length === 126) {
          if (buffer.length < 4) return;
          length = buffer.readUInt16BE(2);
          offset = 4;
        } else if (length === 127) {
          if (buffer.length < 10) return;
          length = Number(buffer.readBigUInt64BE(2));
          offset = 10;
        }
        if (buffer.length < offset + length) return;
        const payload = buffer.subarray(offset, offset + length);
        buffer = buffer.subarray(offset + length);
        if (opcode === 1) frames.texts += 1;
        if (opcode === 8) onClose({ code: payload.readUInt16BE(0), reason: payload.subarray(2).toString() });
      }
    });
  });
  await opened;
  return { socket, frames };
}
