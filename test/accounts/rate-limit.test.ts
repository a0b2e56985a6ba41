// Failed sign-in limits (per user-and-address pair and per client address) on Basic-with-password on the accounts
// API and on POST /oauth/token: 429 with Retry-After; API keys keep working.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { LoginLimiter } from "../../src/accounts/limiter.ts";
import type { ApiError } from "../../src/domain/errors.ts";
import { basic, type Caller, createUser, type Harness, startHarness } from "../support/harness.ts";
import { requestToken } from "./support.ts";

let h: Harness;
let alice: Caller;
let bob: Caller;

before(async () => {
  h = await startHarness({
    env: {
      BERTH_LOGIN_MAX_FAILURES_PER_USER: "3",
      BERTH_LOGIN_MAX_FAILURES_PER_ADDRESS: "5",
      BERTH_LOGIN_WINDOW_S: "120",
    },
  });
  alice = await createUser(h, "alice");
  bob = await createUser(h, "bob");
});

after(async () => {
  await h.close();
});

async function getProfile(username: string, secret: string, remoteAddress: string) {
  const res = await h.app.inject({
    method: "GET",
    url: `/api/v1.1/users/${username}/`,
    headers: { authorization: basic(username, secret) },
    remoteAddress,
  });
  return { status: res.statusCode, headers: res.headers, body: res.json() };
}

describe("per user and address", () => {
  test("after 3 wrong passwords from one address, even the right one gets 429 there, with Retry-After", async () => {
    for (let i = 1; i <= 3; i++) {
      const res = await getProfile("alice", "wrong-password", "192.0.2.1");
      assert.equal(res.status, 401, `attempt ${i}`);
    }
    const locked = await getProfile("alice", alice.password, "192.0.2.1");
    assert.equal(locked.status, 429);
    assert.equal(locked.body.code, "rate_limited");
    const wait = Number(locked.headers["retry-after"]);
    assert.ok(wait > 0 && wait <= 120, `Retry-After ${wait}`);

    const viaToken = await requestToken(
      h,
      { grant_type: "password", username: "alice", password: alice.password, scope: "profile_read" },
      { remoteAddress: "192.0.2.1" },
    );
    assert.equal(viaToken.status, 429, "the token endpoint shares the limit");
    assert.ok(Number(viaToken.headers["retry-after"]) > 0);
  });

  test("a stranger's failures do not lock the owner out of an address with no failures", async () => {
    // Failures spread over addresses stay under the per-address limit, but add up for alice.
    for (let i = 10; i < 16; i++) {
      const res = await getProfile("alice", "wrong-password", `192.0.2.${i}`);
      assert.equal(res.status, 401);
    }
    const own = await getProfile("alice", alice.password, "198.51.100.9");
    assert.equal(own.status, 200, "alice's own password from her own address still works");
    const viaToken = await requestToken(
      h,
      { grant_type: "password", username: "alice", password: alice.password, scope: "profile_read" },
      { remoteAddress: "198.51.100.10" },
    );
    assert.equal(viaToken.status, 200);
  });

  test("the API key still works during the lockout", async () => {
    const res = await getProfile("alice", alice.key, "192.0.2.1");
    assert.equal(res.status, 200);
  });

  test("other users are not affected", async () => {
    const res = await getProfile("bob", bob.password, "198.51.100.9");
    assert.equal(res.status, 200);
  });
});

describe("per address", () => {
  test("after 5 failures from one address, it gets 429 for any user; other addresses do not", async () => {
    const names = ["u1", "u2", "u3", "u4", "u5"];
    for (const name of names) {
      const res = await requestToken(
        h,
        { grant_type: "password", username: name, password: "guess", scope: "profile_read" },
        { remoteAddress: "203.0.113.5" },
      );
      assert.equal(res.status, 400);
      assert.equal(res.body.error, "invalid_grant");
    }
    const locked = await getProfile("bob", bob.password, "203.0.113.5");
    assert.equal(locked.status, 429);
    assert.ok(Number(locked.headers["retry-after"]) > 0);
    const elsewhere = await getProfile("bob", bob.password, "203.0.113.6");
    assert.equal(elsewhere.status, 200);
  });
});

describe("LoginLimiter", () => {
  const limits = { maxFailuresPerUser: 2, maxFailuresPerAddress: 10, windowS: 60 };
  const wrong = async () => undefined;
  const right = async () => "ok";

  test("the lockout ends with the window", async () => {
    let now = 1_000_000;
    const l = new LoginLimiter(limits, { now: () => now });
    await l.guard("u", "a", wrong);
    await l.guard("u", "a", wrong);
    await assert.rejects(l.guard("u", "a", right), (e: ApiError) => {
      assert.equal(e.kind, "rate_limited");
      assert.equal(e.headers?.["Retry-After"], "60");
      return true;
    });
    now += 30_000;
    await assert.rejects(l.guard("u", "a", right), (e: ApiError) => e.headers?.["Retry-After"] === "30");
    now += 30_000;
    assert.equal(await l.guard("u", "a", right), "ok");
  });

  test("a success clears the user's failures", async () => {
    const l = new LoginLimiter(limits, { now: () => 0 });
    await l.guard("u", "a", wrong);
    await l.guard("u", "a", right);
    await l.guard("u", "a", wrong);
    assert.equal(await l.guard("u", "a", right), "ok", "only one failure since the success");
  });

  test("parallel guesses are counted before they finish", async () => {
    const l = new LoginLimiter(limits, { now: () => 0 });
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const slowWrong = async () => {
      await gate;
      return undefined;
    };
    const attempts = Array.from({ length: 5 }, () => l.guard("u", "a", slowWrong));
    release();
    const results = await Promise.allSettled(attempts);
    assert.equal(results.filter((r) => r.status === "fulfilled").length, 2);
    assert.equal(results.filter((r) => r.status === "rejected").length, 3);
  });
});
