// Stream liveness (CONTRACT §8): the server answers pings, sends its own, and drops a peer that
// stops answering them, while a live one stays. A platform of its own that pings often.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { type Harness, startHarness } from "../support/harness.ts";
import { listen, openStream } from "./support.ts";

const PING_INTERVAL_MS = 300;

let h: Harness;
let base: string;

before(async () => {
  h = await startHarness({ env: { BERTH_STREAM_PING_INTERVAL_MS: String(PING_INTERVAL_MS) } });
  base = await listen(h);
});
after(() => h.close());

test("the server answers pings and sends its own", async () => {
  const s = await openStream(`${base}/v1/events/`, { auth: h.admin.auth });
  const pong = new Promise((resolve) => s.ws.once("pong", resolve));
  s.ws.ping();
  await pong;
  await new Promise((resolve) => s.ws.once("ping", resolve));
  s.close();
});

test("a peer that does not answer pings is dropped; one that does stays", async () => {
  const dead = await openStream(`${base}/v1/events/`, { auth: h.admin.auth, options: { autoPong: false } });
  const alive = await openStream(`${base}/v1/events/`, { auth: h.admin.auth });
  const closed = await dead.closed;
  assert.equal(closed.code, 1006, "terminated without a close handshake");
  assert.equal(alive.isClosed, false);
  alive.close();
});

test("log streams are pinged too", async () => {
  const res = await h.app.inject({
    method: "POST",
    url: "/api/app/v1/service/",
    headers: { authorization: h.admin.auth },
    payload: { image: "busybox:local", name: "quiet" },
  });
  assert.equal(res.statusCode, 201, res.body);
  const s = await openStream(`${base}${res.json().resource_uri}logs/`, { auth: h.admin.auth });
  await new Promise((resolve) => s.ws.once("ping", resolve));
  assert.equal(s.isClosed, false, "a service without containers keeps its log stream open");
  s.close();
});
