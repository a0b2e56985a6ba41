// Users, API keys, organizations and namespace access (CONTRACT §2, §3).
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

let h: Harness;
let alice: Caller;
let bob: Caller;
let carol: Caller;

before(async () => {
  h = await startHarness();
  alice = await createUser(h, "alice");
  bob = await createUser(h, "bob");
  carol = await createUser(h, "carol");
});

after(async () => {
  await h.close();
});

const newUser = (username: string) => ({
  username,
  email: `${username}@example.test`,
  password: `${username}-password`,
});

describe("bootstrap admin", () => {
  test("the bootstrap admin can call the platform API with its key", async () => {
    const res = await call(h, h.admin, "GET", "/api/infra/v1/provider/");
    assert.equal(res.status, 200);
    assert.ok(Array.isArray(res.body.objects));
  });

  test("GET /auth/ answers the username and its namespaces", async () => {
    const res = await call(h, h.admin, "GET", "/auth/");
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { username: "admin", namespaces: ["admin"] });
    const again = await call(h, h.admin, "GET", "/auth");
    assert.equal(again.status, 200);
  });

  test("GET /auth/ refuses a wrong key", async () => {
    const res = await call(h, { ...h.admin, auth: basic("admin", "wrong") }, "GET", "/auth/");
    assert.equal(res.status, 401);
    assert.equal(res.headers["www-authenticate"], 'Basic realm="berth"');
  });
});

describe("users", () => {
  test("an admin creates a user, who gets 201 and a profile", async () => {
    const res = await call(h, h.admin, "POST", "/api/v1.1/users/", {
      ...newUser("dora"),
      full_name: "Dora D",
    });
    assert.equal(res.status, 201);
    assert.equal(res.body.username, "dora");
    assert.equal(res.body.email, "dora@example.test");
    assert.equal(res.body.full_name, "Dora D");
    assert.equal(res.body.password, undefined, "the password is never echoed");
    assert.equal(res.body.password_hash, undefined);
    const me = await call(
      h,
      { ...alice, auth: basic("dora", "dora-password") },
      "GET",
      "/api/v1.1/users/dora/apikeys/",
    );
    assert.equal(me.status, 200, "the new user can sign in with its password on the accounts API");
  });

  test("only admins create users: others get 403 admin_only", async () => {
    const res = await call(h, alice, "POST", "/api/v1.1/users/", newUser("mallory"));
    assert.equal(res.status, 403);
    assert.equal(res.body.code, "admin_only");
    assert.equal(typeof res.body.error, "string");
    const check = await call(h, h.admin, "POST", "/api/v1.1/users/", newUser("mallory"));
    assert.equal(check.status, 201, "the refused call created nothing");
  });

  for (const name of ["service", "nodecluster", "events", "container", "action", "provider", "token"]) {
    test(`the reserved name "${name}" is refused for a user (400 naming username)`, async () => {
      const res = await call(h, h.admin, "POST", "/api/v1.1/users/", newUser(name));
      assert.equal(res.status, 400);
      assert.equal(typeof res.body.error, "string");
      assert.ok(
        res.body.details?.some((d: { field: string }) => d.field === "username"),
        JSON.stringify(res.body),
      );
    });
  }

  for (const name of ["service", "stack", "events", "nodetype"]) {
    test(`the reserved name "${name}" is refused for an organization (400 naming name)`, async () => {
      const res = await call(h, alice, "POST", "/api/v1.1/orgs/", { name });
      assert.equal(res.status, 400);
      assert.ok(
        res.body.details?.some((d: { field: string }) => d.field === "name"),
        JSON.stringify(res.body),
      );
    });
  }

  test("a duplicate user name is 409", async () => {
    const res = await call(h, h.admin, "POST", "/api/v1.1/users/", newUser("alice"));
    assert.equal(res.status, 409);
    assert.equal(typeof res.body.code, "string");
  });

  test("a user and an organization cannot share a name", async () => {
    const orgNamedLikeUser = await call(h, alice, "POST", "/api/v1.1/orgs/", { name: "bob" });
    assert.equal(orgNamedLikeUser.status, 409);
    const org = await call(h, alice, "POST", "/api/v1.1/orgs/", { name: "sharedname" });
    assert.equal(org.status, 201);
    const userNamedLikeOrg = await call(h, h.admin, "POST", "/api/v1.1/users/", newUser("sharedname"));
    assert.equal(userNamedLikeOrg.status, 409);
    const dupOrg = await call(h, bob, "POST", "/api/v1.1/orgs/", { name: "sharedname" });
    assert.equal(dupOrg.status, 409);
  });
});

describe("API keys", () => {
  test("a new key is shown once, never listed, authenticates, and stops working when revoked", async () => {
    const created = await call(h, alice, "POST", "/api/v1.1/users/alice/apikeys/", { label: "laptop" });
    assert.equal(created.status, 201);
    assert.equal(typeof created.body.key, "string");
    assert.ok(created.body.key.length >= 20, "the key is long and random");
    assert.equal(created.body.label, "laptop");
    assert.equal(typeof created.body.id, "number");
    assert.equal(typeof created.body.created, "string");
    const key = created.body.key as string;
    const withKey: Caller = { ...alice, key, auth: basic("alice", key) };

    const listed = await call(h, alice, "GET", "/api/v1.1/users/alice/apikeys/");
    assert.equal(listed.status, 200);
    const entry = listed.body.objects.find((k: { id: number }) => k.id === created.body.id);
    assert.ok(entry, "the new key is listed");
    assert.equal(entry.label, "laptop");
    assert.equal(entry.key, undefined);
    assert.ok(!listed.raw.includes(key), "the listing never contains the secret");
    for (const k of listed.body.objects) {
      for (const field of Object.keys(k)) assert.doesNotMatch(field, /key|hash|secret/i);
    }

    const used = await call(h, withKey, "GET", "/api/infra/v1/provider/");
    assert.equal(used.status, 200);

    const revoked = await h.app.inject({
      method: "DELETE",
      url: `/api/v1.1/users/alice/apikeys/${created.body.id}/`,
      headers: { authorization: alice.auth },
    });
    assert.equal(revoked.statusCode, 204);
    assert.equal(revoked.body, "");
    assert.equal(revoked.headers["content-length"], "0");

    const after = await call(h, withKey, "GET", "/api/infra/v1/provider/");
    assert.equal(after.status, 401);
    const relisted = await call(h, alice, "GET", "/api/v1.1/users/alice/apikeys/");
    assert.ok(!relisted.body.objects.some((k: { id: number }) => k.id === created.body.id));
    const again = await call(h, alice, "DELETE", `/api/v1.1/users/alice/apikeys/${created.body.id}/`);
    assert.equal(again.status, 404, "revoking twice finds nothing");
  });

  test("a key can be created with no body at all, unlabelled", async () => {
    const res = await h.app.inject({
      method: "POST",
      url: "/api/v1.1/users/carol/apikeys/",
      headers: { authorization: carol.auth },
    });
    assert.equal(res.statusCode, 201, res.body);
    const body = res.json();
    assert.equal(body.label, "");
    assert.equal((await call(h, { ...carol, auth: basic("carol", body.key) }, "GET", "/auth/")).status, 200);
  });

  test("another user's keys are 404, whatever the method", async () => {
    const aliceKeys = await call(h, alice, "GET", "/api/v1.1/users/alice/apikeys/");
    const aliceKeyId = aliceKeys.body.objects[0].id;
    const list = await call(h, bob, "GET", "/api/v1.1/users/alice/apikeys/");
    const create = await call(h, bob, "POST", "/api/v1.1/users/alice/apikeys/", { label: "stolen" });
    const del = await call(h, bob, "DELETE", `/api/v1.1/users/alice/apikeys/${aliceKeyId}/`);
    const missing = await call(h, bob, "GET", "/api/v1.1/users/nosuchuser/apikeys/");
    for (const res of [list, create, del]) {
      assert.equal(res.status, 404);
      assert.deepEqual(res.body, missing.body, "same body as a user that does not exist");
    }
    const still = await call(h, alice, "GET", "/api/infra/v1/provider/");
    assert.equal(still.status, 200, "alice's key still works");
  });

  test("a user cannot revoke another user's key through its own path", async () => {
    const aliceKeys = await call(h, alice, "GET", "/api/v1.1/users/alice/apikeys/");
    const aliceKeyId = aliceKeys.body.objects[0].id;
    const res = await call(h, bob, "DELETE", `/api/v1.1/users/bob/apikeys/${aliceKeyId}/`);
    assert.equal(res.status, 404);
    assert.equal((await call(h, alice, "GET", "/auth/")).status, 200);
  });

  test("an admin manages another user's keys", async () => {
    const created = await call(h, h.admin, "POST", "/api/v1.1/users/carol/apikeys/", { label: "by admin" });
    assert.equal(created.status, 201);
    const works = await call(h, { ...carol, auth: basic("carol", created.body.key) }, "GET", "/auth/");
    assert.equal(works.status, 200);
    assert.equal(works.body.username, "carol");
    const del = await call(h, h.admin, "DELETE", `/api/v1.1/users/carol/apikeys/${created.body.id}/`);
    assert.equal(del.status, 204);
  });

  test("a key is bound to its user: another username with it is 401", async () => {
    const res = await call(h, { ...bob, auth: basic("bob", alice.key) }, "GET", "/auth/");
    assert.equal(res.status, 401);
  });
});

describe("organizations", () => {
  test("the org flow: owner, members, namespaces and no existence leak", async () => {
    const created = await call(h, alice, "POST", "/api/v1.1/orgs/", { name: "acme" });
    assert.equal(created.status, 201);
    assert.equal(created.body.name, "acme");
    assert.deepEqual(created.body.members, [{ username: "alice", role: "owner" }]);

    await addMember(h, alice, "acme", bob);
    const added = await call(h, alice, "GET", "/api/v1.1/orgs/acme/");
    assert.deepEqual(
      [...added.body.members].sort((a: { username: string }, b: { username: string }) =>
        a.username.localeCompare(b.username),
      ),
      [
        { username: "alice", role: "owner" },
        { username: "bob", role: "member" },
      ],
    );

    const bobAuth = await call(h, bob, "GET", "/auth/");
    assert.equal(bobAuth.status, 200);
    assert.ok(bobAuth.body.namespaces.includes("acme"));
    assert.ok(bobAuth.body.namespaces.includes("bob"));
    const aliceAuth = await call(h, alice, "GET", "/auth/");
    assert.ok(aliceAuth.body.namespaces.includes("acme"));
    const carolAuth = await call(h, carol, "GET", "/auth/");
    assert.ok(!carolAuth.body.namespaces.includes("acme"));

    const bobReads = await call(h, bob, "GET", "/api/audit/v1/acme/action/");
    assert.equal(bobReads.status, 200);
    assert.ok(Array.isArray(bobReads.body.objects));

    const bobOrg = await call(h, bob, "GET", "/api/v1.1/orgs/acme/");
    assert.equal(bobOrg.status, 200);
    assert.equal(bobOrg.body.name, "acme");

    const carolReads = await call(h, carol, "GET", "/api/audit/v1/acme/action/");
    const nobodyReads = await call(h, carol, "GET", "/api/audit/v1/nosuchns/action/");
    assert.equal(carolReads.status, 404);
    assert.equal(nobodyReads.status, 404);
    assert.deepEqual(
      carolReads.body,
      nobodyReads.body,
      "a hidden namespace looks exactly like a missing one",
    );

    const carolOrg = await call(h, carol, "GET", "/api/v1.1/orgs/acme/");
    const carolNoOrg = await call(h, carol, "GET", "/api/v1.1/orgs/nosuchorg/");
    assert.equal(carolOrg.status, 404);
    assert.deepEqual(carolOrg.body, carolNoOrg.body);
  });

  test("a member who is not an owner cannot add or remove members (403)", async () => {
    const add = await call(h, bob, "POST", "/api/v1.1/orgs/acme/members/", { username: "carol" });
    assert.equal(add.status, 403);
    assert.equal(typeof add.body.error, "string");
    assert.equal(typeof add.body.code, "string");
    const remove = await call(h, bob, "DELETE", "/api/v1.1/orgs/acme/members/alice/");
    assert.equal(remove.status, 403);
    const org = await call(h, alice, "GET", "/api/v1.1/orgs/acme/");
    assert.ok(!org.body.members.some((m: { username: string }) => m.username === "carol"));
    assert.ok(org.body.members.some((m: { username: string }) => m.username === "alice"));
  });

  test("a non-member cannot change an organization's members: it looks missing", async () => {
    const res = await call(h, carol, "POST", "/api/v1.1/orgs/acme/members/", {
      username: "carol",
      role: "owner",
    });
    assert.equal(res.status, 404);
    assert.ok(!(await call(h, carol, "GET", "/auth/")).body.namespaces.includes("acme"));
  });

  test("the last owner cannot be removed (409)", async () => {
    const res = await call(h, alice, "DELETE", "/api/v1.1/orgs/acme/members/alice/");
    assert.equal(res.status, 409);
    assert.equal(typeof res.body.error, "string");
    const org = await call(h, alice, "GET", "/api/v1.1/orgs/acme/");
    assert.ok(
      org.body.members.some(
        (m: { username: string; role: string }) => m.username === "alice" && m.role === "owner",
      ),
    );
  });

  test("an administrator adding an unknown user directly is 400 naming username", async () => {
    const res = await call(h, h.admin, "POST", "/api/v1.1/orgs/acme/members/", {
      username: "nosuchuser",
      direct: true,
    });
    assert.equal(res.status, 400);
    assert.ok(res.body.details?.some((d: { field: string }) => d.field === "username"));
  });

  test("a removed member loses the namespace; removal answers 204 with an empty body", async () => {
    const org = await call(h, alice, "POST", "/api/v1.1/orgs/", { name: "tempo" });
    assert.equal(org.status, 201);
    await addMember(h, alice, "tempo", carol);
    assert.equal((await call(h, carol, "GET", "/api/audit/v1/tempo/action/")).status, 200);
    const removed = await h.app.inject({
      method: "DELETE",
      url: "/api/v1.1/orgs/tempo/members/carol/",
      headers: { authorization: alice.auth },
    });
    assert.equal(removed.statusCode, 204);
    assert.equal(removed.body, "");
    assert.equal(removed.headers["content-length"], "0");
    assert.equal((await call(h, carol, "GET", "/api/audit/v1/tempo/action/")).status, 404);
    assert.ok(!(await call(h, carol, "GET", "/auth/")).body.namespaces.includes("tempo"));
  });

  test("with a second owner, the first owner can leave", async () => {
    const org = await call(h, bob, "POST", "/api/v1.1/orgs/", { name: "pair" });
    assert.equal(org.status, 201);
    await addMember(h, bob, "pair", carol, "owner");
    const leave = await call(h, bob, "DELETE", "/api/v1.1/orgs/pair/members/bob/");
    assert.equal(leave.status, 204);
    const view = await call(h, carol, "GET", "/api/v1.1/orgs/pair/");
    assert.deepEqual(view.body.members, [{ username: "carol", role: "owner" }]);
  });
});
