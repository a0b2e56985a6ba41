// The administrators' list of users: every user in the order they joined, with is_active and
// is_admin, searchable by username; anyone else is refused.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { call, createUser, type Harness, startHarness } from "../support/harness.ts";

describe("GET /api/v1.1/users/", () => {
  let h: Harness;
  before(async () => {
    h = await startHarness();
  });
  after(() => h.close());

  test("admins list users (search by username, deactivated ones marked); others get 403", async () => {
    const alice = await createUser(h, "alice");
    await createUser(h, "albert");
    assert.equal((await call(h, h.admin, "POST", "/api/v1.1/users/albert/deactivate/")).status, 200);
    const all = await call(h, h.admin, "GET", "/api/v1.1/users/");
    assert.equal(all.status, 200, all.raw);
    const names = (all.body.objects as { username: string }[]).map((u) => u.username);
    assert.deepEqual(names.slice(-2), ["alice", "albert"]);
    const found = await call(h, h.admin, "GET", "/api/v1.1/users/?username__icontains=AL");
    assert.deepEqual(
      (found.body.objects as { username: string; is_active: boolean; is_admin: boolean }[]).map((u) => [
        u.username,
        u.is_active,
        u.is_admin,
      ]),
      [
        ["alice", true, false],
        ["albert", false, false],
      ],
    );
    assert.equal(found.body.meta.total_count, 2);
    const refused = await call(h, alice, "GET", "/api/v1.1/users/");
    assert.equal(refused.status, 403);
    assert.equal(typeof refused.body.error, "string");
  });
});
