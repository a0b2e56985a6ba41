// Access re-checked on open streams (issue 14 item 4): revoking the API key that opened a stream,
// or removing its user from the organization whose namespace it reads, closes the events stream,
// a follow-logs stream and an exec stream with 1008 and a reason within 3 s.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  addMember,
  basic,
  type Caller,
  call,
  createUser,
  type Harness,
  startHarness,
} from "../support/harness.ts";
import { type Closed, closedWithin, inState, listen, openStream, type StreamClient } from "./support.ts";

let h: Harness;
let base: string;
let alice: Caller;
let bob: Caller;
let container: string;

const AWS = {
  region: "/api/infra/v1/region/aws/us-east-1/",
  node_type: "/api/infra/v1/nodetype/aws/t2.micro/",
};

before(async () => {
  h = await startHarness({
    env: { BERTH_RECONCILE_INTERVAL_MS: "200", BERTH_CONTAINER_STOP_TIMEOUT_S: "1" },
  });
  base = await listen(h);
  alice = await createUser(h, "alice");
  bob = await createUser(h, "bob");
  assert.equal((await call(h, alice, "POST", "/api/v1.1/orgs/", { name: "acme" })).status, 201);
  const cluster = await call(h, alice, "POST", "/api/infra/v1/acme/nodecluster/", {
    name: "pool",
    ...AWS,
    target_num_nodes: 1,
  });
  assert.equal(cluster.status, 201, cluster.raw);
  await call(h, alice, "POST", `${cluster.body.resource_uri}deploy/`);
  await inState(h, alice, cluster.body.resource_uri, "Deployed");
  const svc = await call(h, alice, "POST", "/api/app/v1/acme/service/", {
    image: "busybox:local",
    name: "shell",
    run_command: "sleep 100000",
  });
  assert.equal(svc.status, 201, svc.raw);
  await call(h, alice, "POST", `${svc.body.resource_uri}start/`);
  container = (await inState(h, alice, svc.body.resource_uri, "Running")).containers[0];
});
after(() => h.close());

/** A fresh API key of bob's; returns its id and Authorization value. */
async function bobKey(): Promise<{ id: number; auth: string }> {
  const res = await h.app.inject({
    method: "POST",
    url: "/api/v1.1/users/bob/apikeys/",
    headers: { authorization: basic("bob", bob.password) },
    payload: { label: "stream" },
  });
  assert.equal(res.statusCode, 201, res.body);
  const { id, key } = res.json() as { id: number; key: string };
  return { id, auth: basic("bob", key) };
}

async function openAll(auth: string): Promise<Record<string, StreamClient>> {
  return {
    events: await openStream(`${base}/api/audit/v1/acme/events/`, { auth }),
    logs: await openStream(`${base}${container}logs/?follow=true&tail=1`, { auth }),
    exec: await openStream(`${base}${container}exec/?command=cat`, { auth }),
  };
}

describe("access ends, streams close", () => {
  test("revoking the API key closes its events, logs and exec streams with 1008", async () => {
    const key = await bobKey();
    await addMember(h, alice, "acme", bob);
    const other = await openAll(bob.auth);
    const streams = await openAll(key.auth);
    const revoked = await h.app.inject({
      method: "DELETE",
      url: `/api/v1.1/users/bob/apikeys/${key.id}/`,
      headers: { authorization: basic("bob", bob.password) },
    });
    assert.equal(revoked.statusCode, 204);
    const closed = await closedWithin(streams, 3000);
    for (const [name, c] of Object.entries(closed)) {
      assert.notEqual(c, "still open", `${name} stream still open 3 s after the key was revoked`);
      assert.equal((c as Closed).code, 1008, name);
      assert.match((c as Closed).reason, /revoked/, name);
    }
    // Streams opened with another key of the same user are not touched.
    for (const [name, s] of Object.entries(other)) assert.equal(s.isClosed, false, name);
    for (const s of Object.values(other)) s.close();
    await call(h, alice, "DELETE", "/api/v1.1/orgs/acme/members/bob/");
  });

  test("removing the member closes the streams of the organization's namespace with 1008", async () => {
    await addMember(h, alice, "acme", bob);
    const streams = await openAll(bob.auth);
    const own = await openStream(`${base}/api/audit/v1/bob/events/`, { auth: bob.auth });
    const removed = await call(h, alice, "DELETE", "/api/v1.1/orgs/acme/members/bob/");
    assert.equal(removed.status, 204, removed.raw);
    const closed = await closedWithin(streams, 3000);
    for (const [name, c] of Object.entries(closed)) {
      assert.notEqual(c, "still open", `${name} stream still open 3 s after the member was removed`);
      assert.equal((c as Closed).code, 1008, name);
      assert.match((c as Closed).reason, /acme/, name);
    }
    assert.equal(own.isClosed, false, "bob's stream of his own namespace stays open");
    own.close();
  });
});
