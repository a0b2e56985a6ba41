// The dashboard's browser session (issue 12): an HttpOnly, SameSite cookie from a password
// sign-in, accepted by the platform API and the streams only with its CSRF defence (a header on
// changes, a same-origin Origin on WebSocket upgrades), stored hashed, expiring, ended by
// sign-out, and limited like every password sign-in.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import WebSocket from "ws";
import { type Caller, createUser, type Harness, startHarness } from "../support/harness.ts";

let h: Harness;
let alice: Caller;
let offsetMs = 0;
let base = "";

before(async () => {
  h = await startHarness({
    clock: { now: () => Date.now() + offsetMs },
    env: {
      BERTH_SESSION_TTL_S: "600",
      BERTH_LOGIN_MAX_FAILURES_PER_USER: "3",
      BERTH_LOGIN_MAX_FAILURES_PER_ADDRESS: "50",
    },
  });
  alice = await createUser(h, "alice");
  await h.app.listen({ host: "127.0.0.1", port: 0 });
  base = `127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
});
after(() => h.close());

interface SignedIn {
  cookie: string;
  token: string;
  csrf: string;
  setCookie: string;
}

async function signIn(username: string, password: string, remoteAddress = "10.0.0.1"): Promise<SignedIn> {
  const res = await h.app.inject({
    method: "POST",
    url: "/api/session/",
    payload: { username, password },
    remoteAddress,
  });
  assert.equal(res.statusCode, 200, res.body);
  const setCookie = String(res.headers["set-cookie"]);
  const token = /berth_session=([^;]+)/.exec(setCookie)![1]!;
  return { cookie: `berth_session=${token}`, token, csrf: res.json().csrf_token, setCookie };
}

const inject = (
  method: "GET" | "POST" | "DELETE",
  url: string,
  headers: Record<string, string>,
  payload?: unknown,
) => h.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as object }) });

/** Opens a stream with the cookie; resolves the upgrade's status (101 when a socket opened). */
function upgrade(path: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://${base}${path}`, { headers });
    ws.once("open", () => {
      ws.close();
      resolve(101);
    });
    ws.once("unexpected-response", (_req, res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    ws.once("error", reject);
  });
}

describe("sign-in", () => {
  test("issues an HttpOnly, SameSite=Strict cookie whose token is stored only as its SHA-256", async () => {
    const s = await signIn("alice", alice.password);
    assert.match(s.setCookie, /HttpOnly/i);
    assert.match(s.setCookie, /SameSite=Strict/i);
    assert.match(s.setCookie, /Path=\//);
    assert.match(s.setCookie, /Max-Age=600/);
    assert.doesNotMatch(s.setCookie, /Secure/, "plain-HTTP installations get a cookie the browser keeps");
    const hashes = (await h.store.db.selectFrom("sessions").select("token_hash").execute()).map(
      (r) => r.token_hash,
    );
    assert.ok(hashes.includes(createHash("sha256").update(s.token).digest("hex")));
    assert.ok(!hashes.includes(s.token));
    const who = await inject("GET", "/api/session/", { cookie: s.cookie });
    assert.equal(who.json().username, "alice");
    assert.equal(who.json().csrf_token, s.csrf);
    assert.equal(who.headers["cache-control"], "no-store");
  });

  test("a wrong password, or an API key in its place, is refused with the same sentence", async () => {
    for (const password of ["wrong-password", alice.key]) {
      const res = await h.app.inject({
        method: "POST",
        url: "/api/session/",
        payload: { username: "alice", password },
        remoteAddress: "10.0.0.9",
      });
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().error, "The username or password is wrong.");
      assert.equal(res.headers["set-cookie"], undefined);
    }
  });

  test("repeated failures are limited like every password sign-in (429 with Retry-After)", async () => {
    const bob = await createUser(h, "bob");
    for (let i = 0; i < 3; i++) {
      const res = await h.app.inject({
        method: "POST",
        url: "/api/session/",
        payload: { username: "bob", password: "nope-nope" },
      });
      assert.equal(res.statusCode, 401);
    }
    const locked = await h.app.inject({
      method: "POST",
      url: "/api/session/",
      payload: { username: "bob", password: bob.password },
    });
    assert.equal(locked.statusCode, 429);
    assert.ok(Number(locked.headers["retry-after"]) > 0);
    assert.match(locked.json().error, /Too many failed sign-ins/);
  });

  test("a sign-in posted from a page of another site is refused", async () => {
    const res = await h.app.inject({
      method: "POST",
      url: "/api/session/",
      headers: { origin: "https://evil.example", host: base },
      payload: { username: "alice", password: alice.password },
    });
    assert.equal(res.statusCode, 403);
    assert.equal(res.json().code, "csrf_refused");
  });

  test("without a session the page is told it is signed out (not an error)", async () => {
    const res = await inject("GET", "/api/session/", {});
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { signed_in: false });
  });
});

describe("the cookie on the platform API", () => {
  test("reads work with the cookie alone; changes need the CSRF token (403 without it)", async () => {
    const s = await signIn("alice", alice.password);
    const list = await inject("GET", "/api/app/v1/service/", { cookie: s.cookie });
    assert.equal(list.statusCode, 200, list.body);
    const body = { image: "busybox:local", name: "viacookie" };
    const refused = await inject("POST", "/api/app/v1/service/", { cookie: s.cookie }, body);
    assert.equal(refused.statusCode, 403);
    assert.equal(refused.json().code, "csrf_refused");
    assert.match(refused.json().error, /X-CSRF-Token/i);
    const wrong = await inject(
      "POST",
      "/api/app/v1/service/",
      { cookie: s.cookie, "x-csrf-token": "guess" },
      body,
    );
    assert.equal(wrong.statusCode, 403);
    const ok = await inject(
      "POST",
      "/api/app/v1/service/",
      { cookie: s.cookie, "x-csrf-token": s.csrf, "user-agent": "TestBrowser/1.0" },
      body,
    );
    assert.equal(ok.statusCode, 201, ok.body);
    const actionUri = ok.headers["x-platform-action-uri"] as string;
    const action = await inject("GET", actionUri, { cookie: s.cookie });
    assert.equal(action.json().user_agent, "TestBrowser/1.0");
    assert.equal(action.json().user, "alice");
  });

  test("Basic credentials still win over a cookie, and a bad cookie is a 401 without a browser dialog", async () => {
    const res = await inject("GET", "/api/app/v1/service/", {
      cookie: "berth_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    });
    assert.equal(res.statusCode, 401);
    assert.match(String(res.headers["www-authenticate"]), /Basic/);
    const fromPage = await inject("GET", "/api/app/v1/service/", {
      cookie: "berth_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
      "x-requested-with": "berth-dashboard",
    });
    assert.equal(fromPage.statusCode, 401);
    assert.equal(fromPage.headers["www-authenticate"], undefined);
  });

  test("a stream accepts the cookie only from a page of this host (Origin checked against Host)", async () => {
    const s = await signIn("alice", alice.password);
    assert.equal(await upgrade("/api/audit/v1/events/", { cookie: s.cookie, origin: `http://${base}` }), 101);
    assert.equal(
      await upgrade("/api/audit/v1/events/", { cookie: s.cookie, origin: "http://evil.example" }),
      403,
    );
    assert.equal(await upgrade("/api/audit/v1/events/", { cookie: s.cookie }), 403);
  });

  test("the session expires: the cookie stops working on the API and the page is told it is signed out", async () => {
    const s = await signIn("alice", alice.password);
    assert.equal((await inject("GET", "/api/app/v1/service/", { cookie: s.cookie })).statusCode, 200);
    offsetMs = 601_000;
    try {
      assert.equal((await inject("GET", "/api/app/v1/service/", { cookie: s.cookie })).statusCode, 401);
      assert.deepEqual((await inject("GET", "/api/session/", { cookie: s.cookie })).json(), {
        signed_in: false,
      });
    } finally {
      offsetMs = 0;
    }
  });
});

describe("sign-out", () => {
  test("needs the CSRF token, clears the cookie, and ends the session on the API and the streams", async () => {
    const s = await signIn("alice", alice.password);
    const refused = await inject("DELETE", "/api/session/", { cookie: s.cookie });
    assert.equal(refused.statusCode, 403);
    const out = await inject("DELETE", "/api/session/", { cookie: s.cookie, "x-csrf-token": s.csrf });
    assert.equal(out.statusCode, 204);
    assert.match(String(out.headers["set-cookie"]), /berth_session=;.*Expires=Thu, 01 Jan 1970/);
    assert.equal((await inject("GET", "/api/app/v1/service/", { cookie: s.cookie })).statusCode, 401);
    assert.equal((await inject("GET", "/auth/", { cookie: s.cookie })).statusCode, 401);
    assert.equal(await upgrade("/api/audit/v1/events/", { cookie: s.cookie, origin: `http://${base}` }), 401);
  });
});
