// Organization invitations (issue 26): nobody becomes a member without accepting, an invitation
// answers the same for a name that is no user, a member can leave, the last owner cannot.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Caller, call, createUser, type Harness, startHarness } from "../support/harness.ts";

let h: Harness;
let alice: Caller;
let bob: Caller;
let carol: Caller;

before(async () => {
  h = await startHarness();
  alice = await createUser(h, "alice");
  bob = await createUser(h, "bob");
  carol = await createUser(h, "carol");
  assert.equal((await call(h, alice, "POST", "/api/v1.1/orgs/", { name: "acme" })).status, 201);
});

after(async () => {
  await h.close();
});

const memberNames = async (org: string) =>
  ((await call(h, h.admin, "GET", `/api/v1.1/orgs/${org}/`)).body.members as { username: string }[]).map(
    (m) => m.username,
  );

describe("invitations", () => {
  test("an invited user is not a member until it accepts, then has the role it was invited with", async () => {
    const invited = await call(h, alice, "POST", "/api/v1.1/orgs/acme/members/", {
      username: "bob",
      role: "owner",
    });
    assert.equal(invited.status, 201, invited.raw);
    assert.equal(invited.body.org, "acme");
    assert.equal(invited.body.username, "bob");
    assert.equal(invited.body.role, "owner");
    assert.equal(invited.body.state, "pending");
    assert.equal(typeof invited.body.created, "string");
    assert.ok(!(await memberNames("acme")).includes("bob"), "not a member before accepting");
    assert.equal((await call(h, bob, "GET", "/api/app/v1/acme/service/")).status, 404);
    assert.ok(!(await call(h, bob, "GET", "/auth/")).body.namespaces.includes("acme"));

    const pending = await call(h, alice, "GET", "/api/v1.1/orgs/acme/invitations/");
    assert.equal(pending.status, 200);
    assert.deepEqual(
      pending.body.objects.map((i: { username: string; role: string }) => [i.username, i.role]),
      [["bob", "owner"]],
    );
    const mine = await call(h, bob, "GET", "/api/v1.1/users/bob/invitations/");
    assert.equal(mine.status, 200);
    assert.deepEqual(
      mine.body.objects.map((i: { org: string; state: string }) => [i.org, i.state]),
      [["acme", "pending"]],
    );
    // Another user's invitations are not readable.
    assert.equal((await call(h, carol, "GET", "/api/v1.1/users/bob/invitations/")).status, 404);
    assert.equal((await call(h, carol, "POST", "/api/v1.1/users/bob/invitations/acme/accept/")).status, 404);

    const accepted = await call(h, bob, "POST", "/api/v1.1/users/bob/invitations/acme/accept/");
    assert.equal(accepted.status, 200, accepted.raw);
    assert.ok(
      accepted.body.members.some(
        (m: { username: string; role: string }) => m.username === "bob" && m.role === "owner",
      ),
    );
    assert.equal((await call(h, bob, "GET", "/api/app/v1/acme/service/")).status, 200);
    assert.equal((await call(h, bob, "GET", "/api/v1.1/users/bob/invitations/")).body.objects.length, 0);
    assert.equal((await call(h, alice, "GET", "/api/v1.1/orgs/acme/invitations/")).body.objects.length, 0);
    // Accepting again: there is nothing left to accept.
    assert.equal((await call(h, bob, "POST", "/api/v1.1/users/bob/invitations/acme/accept/")).status, 404);
  });

  test("a declined invitation leaves the user outside and cannot be accepted afterwards", async () => {
    const invited = await call(h, alice, "POST", "/api/v1.1/orgs/acme/members/", { username: "carol" });
    assert.equal(invited.status, 201);
    const declined = await call(h, carol, "POST", "/api/v1.1/users/carol/invitations/acme/decline/");
    assert.equal(declined.status, 204, declined.raw);
    assert.equal(
      (await call(h, carol, "POST", "/api/v1.1/users/carol/invitations/acme/accept/")).status,
      404,
    );
    assert.ok(!(await memberNames("acme")).includes("carol"));
    assert.equal((await call(h, alice, "GET", "/api/v1.1/orgs/acme/invitations/")).body.objects.length, 0);
  });

  test("an owner withdraws a pending invitation; it can no longer be accepted", async () => {
    await call(h, alice, "POST", "/api/v1.1/orgs/acme/members/", { username: "carol" });
    const revoked = await call(h, alice, "DELETE", "/api/v1.1/orgs/acme/invitations/carol/");
    assert.equal(revoked.status, 204);
    assert.equal((await call(h, alice, "DELETE", "/api/v1.1/orgs/acme/invitations/carol/")).status, 404);
    assert.equal(
      (await call(h, carol, "POST", "/api/v1.1/users/carol/invitations/acme/accept/")).status,
      404,
    );
    assert.ok(!(await memberNames("acme")).includes("carol"));
  });

  test("a known and an unknown username get the same answer, and nobody can accept the unknown one", async () => {
    const strip = (r: {
      status: number;
      body: Record<string, unknown>;
      headers: Record<string, unknown>;
    }) => ({
      status: r.status,
      keys: Object.keys(r.body).sort(),
      body: { ...r.body, username: "<name>", created: "<time>" },
      type: r.headers["content-type"],
    });
    const known = await call(h, alice, "POST", "/api/v1.1/orgs/acme/members/", { username: "carol" });
    const unknown = await call(h, alice, "POST", "/api/v1.1/orgs/acme/members/", { username: "nosuchuser" });
    assert.equal(known.status, 201);
    assert.deepEqual(strip(unknown), strip(known));
    // A user created later under that name does not inherit the invitation.
    const late = await createUser(h, "nosuchuser");
    assert.equal(
      (await call(h, late, "GET", "/api/v1.1/users/nosuchuser/invitations/")).body.objects.length,
      0,
    );
    assert.equal(
      (await call(h, late, "POST", "/api/v1.1/users/nosuchuser/invitations/acme/accept/")).status,
      404,
    );
    assert.ok(!(await memberNames("acme")).includes("nosuchuser"));
    await call(h, alice, "DELETE", "/api/v1.1/orgs/acme/invitations/carol/");
  });

  test("a member cannot invite, and a non-member's invitation attempt looks like a missing organization", async () => {
    const member = await call(h, h.admin, "POST", "/api/v1.1/orgs/acme/members/", {
      username: "carol",
      role: "member",
      direct: true,
    });
    assert.equal(member.status, 201, member.raw);
    assert.equal(member.body.state, "accepted", "an administrator adds directly with direct: true");
    const refused = await call(h, carol, "POST", "/api/v1.1/orgs/acme/members/", { username: "dave" });
    assert.equal(refused.status, 403);
    assert.equal(refused.body.code, "not_an_owner");
    assert.equal((await call(h, carol, "GET", "/api/v1.1/orgs/acme/invitations/")).status, 403);
    const dave = await createUser(h, "dave");
    const outsider = await call(h, dave, "POST", "/api/v1.1/orgs/acme/members/", { username: "dave" });
    const missing = await call(h, dave, "POST", "/api/v1.1/orgs/nosuchorg/members/", { username: "dave" });
    assert.equal(outsider.status, 404);
    assert.deepEqual(outsider.body, missing.body);
  });

  test("only administrators may add directly; an owner's direct: true is refused and adds nobody", async () => {
    const res = await call(h, alice, "POST", "/api/v1.1/orgs/acme/members/", {
      username: "dave",
      direct: true,
    });
    assert.equal(res.status, 403);
    assert.equal(res.body.code, "admin_only");
    assert.ok(!(await memberNames("acme")).includes("dave"));
  });
});

describe("leaving", () => {
  test("a member leaves an organization by removing itself, and loses its namespace", async () => {
    assert.ok((await memberNames("acme")).includes("carol"));
    const left = await call(h, carol, "DELETE", "/api/v1.1/orgs/acme/members/carol/");
    assert.equal(left.status, 204, left.raw);
    assert.ok(!(await memberNames("acme")).includes("carol"));
    assert.equal((await call(h, carol, "GET", "/api/app/v1/acme/service/")).status, 404);
    // A member may remove only itself.
    const bobMember = await call(h, h.admin, "POST", "/api/v1.1/orgs/", { name: "solo" });
    assert.equal(bobMember.status, 201);
    await call(h, h.admin, "POST", "/api/v1.1/orgs/solo/members/", { username: "carol", direct: true });
    await call(h, h.admin, "POST", "/api/v1.1/orgs/solo/members/", { username: "dave", direct: true });
    const other = await call(h, carol, "DELETE", "/api/v1.1/orgs/solo/members/dave/");
    assert.equal(other.status, 403);
  });

  test("the last owner cannot leave: 409 with a sentence; with another owner it can", async () => {
    const res = await call(h, h.admin, "DELETE", "/api/v1.1/orgs/solo/members/admin/");
    assert.equal(res.status, 409);
    assert.equal(res.body.code, "last_owner");
    assert.match(res.body.error, /last owner of solo/);
    assert.ok((await memberNames("solo")).includes("admin"));
    // acme has two owners (alice, bob): one of them may leave, then the other may not.
    assert.equal((await call(h, bob, "DELETE", "/api/v1.1/orgs/acme/members/bob/")).status, 204);
    const last = await call(h, alice, "DELETE", "/api/v1.1/orgs/acme/members/alice/");
    assert.equal(last.status, 409);
    assert.equal(last.body.code, "last_owner");
    // Nor can the last owner be made a plain member.
    const demoted = await call(h, alice, "POST", "/api/v1.1/orgs/acme/members/", {
      username: "alice",
      role: "member",
    });
    assert.equal(demoted.status, 409, demoted.raw);
    assert.equal(demoted.body.code, "last_owner");
  });
});
