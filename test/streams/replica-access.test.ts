// Access that ends on one replica ends on the others (issue 18 item 2, CONTRACT's "access that ends
// ends for open streams too"). Two Berth replicas share one PostgreSQL database: a key revoked, or a
// member removed, through replica A is refused by replica B on its next call, and B closes the
// streams that key or member holds open on it with 1008. B's identity cache is set to trust an entry
// for ten minutes, so only the change channel can tell B in time.
//
// Replicas share PostgreSQL, so this file runs in the PostgreSQL tier (BERTH_TEST_DATABASE_URL).
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { Platform } from "../../src/platform.ts";
import { assembleReplicaB } from "../replicas/support.ts";
import {
  addMember,
  basic,
  type Caller,
  call,
  createUser,
  freshDatabaseUrl,
  type Harness,
  startHarness,
  waitFor,
} from "../support/harness.ts";
import { type Closed, closedWithin, openStream } from "./support.ts";

const onPostgres = process.env.BERTH_TEST_DATABASE_URL?.startsWith("postgres") ?? false;

describe("access ended through one replica ends on another", {
  skip: onPostgres ? false : "replicas share a PostgreSQL database: this file runs in the PostgreSQL tier",
}, () => {
  let dataDir: string;
  let db: { url: string; cleanup(): Promise<void> };
  let a: Harness;
  let b: Platform;
  let baseB: string;
  let alice: Caller;
  let bob: Caller;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-test-"));
    db = await freshDatabaseUrl(dataDir);
    a = await startHarness({ env: { BERTH_DATABASE_URL: db.url, BERTH_REPLICA_ID: "replica-a" } });
    b = await assembleReplicaB({ dataDir: path.join(dataDir, "b"), databaseUrl: db.url });
    b.identity.cacheTtlMs = 600_000;
    await b.app.listen({ port: 0, host: "127.0.0.1" });
    const address = b.app.server.address();
    if (!address || typeof address === "string") throw new Error("no TCP address");
    baseB = `127.0.0.1:${address.port}`;
    alice = await createUser(a, "alice");
    bob = await createUser(a, "bob");
  });
  after(async () => {
    await b?.close();
    await a?.close();
    await db?.cleanup();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** GET `url` on replica B as `auth`: the status. */
  const onB = async (auth: string, url: string) =>
    (await fetch(`http://${baseB}${url}`, { headers: { authorization: auth } })).status;

  test("a key revoked through A is refused by B at once, and its stream on B closes with 1008", async () => {
    const made = await call(
      a,
      { ...bob, auth: basic("bob", bob.password) },
      "POST",
      "/api/v1.1/users/bob/apikeys/",
      { label: "on-b" },
    );
    assert.equal(made.status, 201, made.raw);
    const key = basic("bob", made.body.key);
    // B has read the key (and caches it for ten minutes) and holds a stream open with it.
    assert.equal(await onB(key, "/api/app/v1/service/"), 200);
    const stream = await openStream(`ws://${baseB}/api/audit/v1/events/`, { auth: key });
    const other = await openStream(`ws://${baseB}/api/audit/v1/events/`, { auth: bob.auth });

    const revoked = await call(
      a,
      { ...bob, auth: basic("bob", bob.password) },
      "DELETE",
      `/api/v1.1/users/bob/apikeys/${made.body.id}/`,
    );
    assert.equal(revoked.status, 204, revoked.raw);

    await waitFor(
      "B refuses the revoked key",
      async () => (await onB(key, "/api/app/v1/service/")) === 401,
      3000,
    );
    const { stream: closed } = await closedWithin({ stream }, 3000);
    assert.notEqual(closed, "still open", "the stream on B stayed open 3 s after the key was revoked on A");
    assert.equal((closed as Closed).code, 1008);
    assert.match((closed as Closed).reason, /revoked/);
    // Bob's other key still works on B, and its stream stays open.
    assert.equal(await onB(bob.auth, "/api/app/v1/service/"), 200);
    assert.equal(other.isClosed, false);
    other.close();
  });

  test("a member removed through A loses the namespace on B at once, and B closes its stream", async () => {
    assert.equal((await call(a, alice, "POST", "/api/v1.1/orgs/", { name: "crew" })).status, 201);
    await addMember(a, alice, "crew", bob);
    assert.equal(await onB(bob.auth, "/api/app/v1/crew/service/"), 200);
    const stream = await openStream(`ws://${baseB}/api/audit/v1/crew/events/`, { auth: bob.auth });

    const removed = await call(a, alice, "DELETE", "/api/v1.1/orgs/crew/members/bob/");
    assert.ok(removed.status < 300, removed.raw);

    await waitFor(
      "B no longer shows bob the namespace",
      async () => (await onB(bob.auth, "/api/app/v1/crew/service/")) === 404,
      3000,
    );
    const { stream: closed } = await closedWithin({ stream }, 3000);
    assert.notEqual(closed, "still open", "bob's stream of the namespace on B stayed open 3 s after removal");
    assert.equal((closed as Closed).code, 1008);
    // Bob's own namespace is untouched.
    assert.equal(await onB(bob.auth, "/api/app/v1/service/"), 200);
  });

  test("a dashboard session signed out through A (or ended by a password change) closes its stream on B", async () => {
    const signIn = async () => {
      const res = await a.app.inject({
        method: "POST",
        url: "/api/session/",
        payload: { username: "alice", password: alice.password },
      });
      assert.equal(res.statusCode, 200, res.body);
      const token = /berth_session=([^;]+)/.exec(String(res.headers["set-cookie"]))![1]!;
      return { cookie: `berth_session=${token}`, csrf: res.json().csrf_token as string };
    };
    const onBWithCookie = (cookie: string) =>
      openStream(`ws://${baseB}/api/audit/v1/events/`, {
        options: { headers: { cookie, origin: `http://${baseB}` } },
      });
    const first = await signIn();
    const second = await signIn();
    const streams = {
      signedOut: await onBWithCookie(first.cookie),
      other: await onBWithCookie(second.cookie),
    };

    const out = await a.app.inject({
      method: "DELETE",
      url: "/api/session/",
      headers: { cookie: first.cookie, "x-csrf-token": first.csrf },
    });
    assert.equal(out.statusCode, 204, out.body);
    const { signedOut } = await closedWithin({ signedOut: streams.signedOut }, 5000);
    assert.notEqual(signedOut, "still open", "the session's stream on B outlived its sign-out on A by 5 s");
    assert.equal((signedOut as Closed).code, 1008);
    assert.match((signedOut as Closed).reason, /signed out/);
    assert.equal(streams.other.isClosed, false, "another session's stream stays open");

    // A password change through A ends the other session: its stream on B closes too.
    const changed = await call(
      a,
      { ...alice, auth: basic("alice", alice.password) },
      "POST",
      "/api/v1.1/users/alice/password/",
      { old_password: alice.password, new_password: "alice-second-password" },
    );
    assert.equal(changed.status, 200, changed.raw);
    const { other } = await closedWithin({ other: streams.other }, 5000);
    assert.notEqual(
      other,
      "still open",
      "the session's stream on B outlived the password change on A by 5 s",
    );
    assert.equal((other as Closed).code, 1008);
  });
});
