// Authentication and namespace access are cached in the process, and a change takes effect at
// once: a revoked key fails on the very next call, a removed member loses the namespace on the
// very next call, a new member gains it, and a profile change shows on the next read.
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

describe("identity caches", () => {
  let h: Harness;
  let alice: Caller;
  let bob: Caller;

  before(async () => {
    h = await startHarness();
    alice = await createUser(h, "alice");
    bob = await createUser(h, "bob");
  });
  after(async () => {
    await h?.close();
  });

  test("a revoked API key is refused on the next call", async () => {
    const made = await call(
      h,
      { ...alice, auth: basic("alice", alice.password) },
      "POST",
      "/api/v1.1/users/alice/apikeys/",
      { label: "temp" },
    );
    assert.equal(made.status, 201);
    const temp = { ...alice, auth: basic("alice", made.body.key) };
    for (let i = 0; i < 3; i++)
      assert.equal((await call(h, temp, "GET", "/api/app/v1/service/")).status, 200);
    const revoked = await call(
      h,
      { ...alice, auth: basic("alice", alice.password) },
      "DELETE",
      `/api/v1.1/users/alice/apikeys/${made.body.id}/`,
    );
    assert.ok(revoked.status < 300, JSON.stringify(revoked.body));
    assert.equal((await call(h, temp, "GET", "/api/app/v1/service/")).status, 401);
    assert.equal(
      (await call(h, alice, "GET", "/api/app/v1/service/")).status,
      200,
      "other keys keep working",
    );
  });

  test("membership changes take effect on the next call", async () => {
    assert.equal((await call(h, alice, "POST", "/api/v1.1/orgs/", { name: "crew" })).status, 201);
    assert.equal((await call(h, bob, "GET", "/api/app/v1/crew/service/")).status, 404);
    await addMember(h, alice, "crew", bob);
    for (let i = 0; i < 3; i++)
      assert.equal((await call(h, bob, "GET", "/api/app/v1/crew/service/")).status, 200);
    const removed = await call(h, alice, "DELETE", "/api/v1.1/orgs/crew/members/bob/");
    assert.ok(removed.status < 300, JSON.stringify(removed.body));
    assert.equal((await call(h, bob, "GET", "/api/app/v1/crew/service/")).status, 404);
  });

  test("a profile change shows on the next read through a cached key", async () => {
    assert.equal((await call(h, bob, "GET", "/api/app/v1/service/")).status, 200);
    const changed = await call(h, bob, "PATCH", "/api/v1.1/users/bob/", { company: "Bob Cached" });
    assert.ok(changed.status < 300, JSON.stringify(changed.body));
    const read = await call(h, bob, "GET", "/api/v1.1/users/bob/");
    assert.equal(read.body.company, "Bob Cached");
  });
});
