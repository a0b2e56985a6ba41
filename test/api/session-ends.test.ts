// Access that ends ends on open streams too (issue 26 items 3, 4 and 6): a dashboard session's
// events stream closes (1008) within 5 s of its sign-out, of its expiry, of a sign-out everywhere
// and of a password change made elsewhere; a password change needs the old password and ends
// every other session and access token; a deactivated user's key, sessions, tokens and streams
// refuse at once and its sign-in answers as a wrong password does.
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import WebSocket from "ws";
import { type Closed, closedWithin, openStream, StreamClient } from "../streams/support.ts";
import { type Caller, call, createUser, type Harness, startHarness } from "../support/harness.ts";

let h: Harness;
let base = "";

before(async () => {
  h = await startHarness({
    env: {
      BERTH_SESSION_TTL_S: "600",
      BERTH_LOGIN_MAX_FAILURES_PER_USER: "3",
      BERTH_LOGIN_MAX_FAILURES_PER_ADDRESS: "100",
    },
  });
  await h.app.listen({ host: "127.0.0.1", port: 0 });
  base = `127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
});
after(() => h.close());

interface Session {
  cookie: string;
  csrf: string;
}

async function signIn(target: Harness, username: string, password: string): Promise<Session> {
  const res = await target.app.inject({
    method: "POST",
    url: "/api/session/",
    payload: { username, password },
    remoteAddress: "10.1.0.1",
  });
  assert.equal(res.statusCode, 200, res.body);
  const token = /berth_session=([^;]+)/.exec(String(res.headers["set-cookie"]))![1]!;
  return { cookie: `berth_session=${token}`, csrf: res.json().csrf_token };
}

/** The events stream of a dashboard page: the cookie, from a page of this host. */
function sessionStream(s: Session, host = base): Promise<StreamClient> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://${host}/api/audit/v1/events/`, {
      headers: { cookie: s.cookie, origin: `http://${host}` },
    });
    const client = new StreamClient(ws);
    ws.once("open", () => resolve(client));
    ws.once("unexpected-response", (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    ws.once("error", reject);
  });
}

const withCookie = (s: Session, method: "GET" | "POST" | "DELETE", url: string, payload?: object) =>
  h.app.inject({
    method,
    url,
    headers: { cookie: s.cookie, ...(method === "GET" ? {} : { "x-csrf-token": s.csrf }) },
    ...(payload ? { payload } : {}),
  });

async function assertClosed(streams: Record<string, StreamClient>, within: number, reason: RegExp) {
  const closed = await closedWithin(streams, within);
  for (const [name, c] of Object.entries(closed)) {
    assert.notEqual(c, "still open", `${name}: still open ${within} ms after access ended`);
    assert.equal((c as Closed).code, 1008, name);
    assert.match((c as Closed).reason, reason, name);
  }
}

async function bearerToken(who: Caller): Promise<string> {
  const res = await h.app.inject({
    method: "POST",
    url: "/oauth/token",
    payload: {
      grant_type: "password",
      username: who.username,
      password: who.password,
      scope: "profile_read",
    },
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().access_token;
}

const profileWith = (username: string, authorization: string) =>
  h.app.inject({ method: "GET", url: `/api/v1.1/users/${username}/`, headers: { authorization } });

describe("a session's streams end with the session", () => {
  test("sign-out closes the session's events stream within 5 s; another session's stays open", async () => {
    const alice = await createUser(h, "signout");
    const s = await signIn(h, "signout", alice.password);
    const other = await signIn(h, "signout", alice.password);
    const stream = await sessionStream(s);
    const kept = await sessionStream(other);
    const out = await withCookie(s, "DELETE", "/api/session/");
    assert.equal(out.statusCode, 204, out.body);
    await assertClosed({ stream }, 5000, /signed out/);
    assert.equal(kept.isClosed, false, "a stream of another session of the same user stays open");
    assert.equal((await withCookie(other, "GET", "/api/app/v1/service/")).statusCode, 200);
    kept.close();
  });

  test("an expired session's events stream closes within 5 s of the expiry (REST already answers 401)", async () => {
    const short = await startHarness({ env: { BERTH_SESSION_TTL_S: "2" } });
    try {
      await short.app.listen({ host: "127.0.0.1", port: 0 });
      const host = `127.0.0.1:${(short.app.server.address() as AddressInfo).port}`;
      const who = await createUser(short, "brief");
      const s = await signIn(short, "brief", who.password);
      const stream = await sessionStream(s, host);
      const closed = await closedWithin({ stream }, 2000 + 5000);
      assert.notEqual(closed.stream, "still open", "the stream outlived its session by 5 s");
      assert.equal((closed.stream as Closed).code, 1008);
      assert.match((closed.stream as Closed).reason, /expired/);
      const rest = await short.app.inject({
        method: "GET",
        url: "/api/app/v1/service/",
        headers: { cookie: s.cookie },
      });
      assert.equal(rest.statusCode, 401);
    } finally {
      await short.close();
    }
  });

  test("sign out everywhere ends every session and access token of the user, and their streams", async () => {
    const who = await createUser(h, "everywhere");
    const sessions = [
      await signIn(h, "everywhere", who.password),
      await signIn(h, "everywhere", who.password),
    ];
    const streams = { first: await sessionStream(sessions[0]!), second: await sessionStream(sessions[1]!) };
    const keyStream = await openStream(`ws://${base}/api/audit/v1/events/`, { auth: who.auth });
    const token = await bearerToken(who);
    assert.equal((await profileWith("everywhere", `Bearer ${token}`)).statusCode, 200);
    // From the dashboard: the session cookie and its CSRF token.
    const res = await withCookie(sessions[0]!, "DELETE", "/api/v1.1/users/everywhere/sessions/");
    assert.equal(res.statusCode, 204, res.body);
    await assertClosed(streams, 5000, /signed out/);
    for (const s of sessions)
      assert.equal((await withCookie(s, "GET", "/api/app/v1/service/")).statusCode, 401);
    assert.equal((await profileWith("everywhere", `Bearer ${token}`)).statusCode, 401);
    // API keys are for programs: they and their streams stay.
    assert.equal(keyStream.isClosed, false);
    assert.equal((await call(h, who, "GET", "/api/app/v1/service/")).status, 200);
    keyStream.close();
    // Another user cannot end them (404, no existence leak); an administrator can.
    const mallory = await createUser(h, "mallory");
    assert.equal((await call(h, mallory, "DELETE", "/api/v1.1/users/everywhere/sessions/")).status, 404);
    assert.equal((await call(h, h.admin, "DELETE", "/api/v1.1/users/everywhere/sessions/")).status, 204);
  });
});

describe("password change", () => {
  test("needs the old password; a wrong one is refused and counts as a failed sign-in", async () => {
    const who = await createUser(h, "forgetful");
    const url = "/api/v1.1/users/forgetful/password/";
    const missing = await call(h, who, "POST", url, { new_password: "brand-new-password" });
    assert.equal(missing.status, 400, missing.raw);
    assert.equal(missing.body.details[0].field, "old_password");
    const wrong = await call(h, who, "POST", url, {
      old_password: "not-it",
      new_password: "brand-new-password",
    });
    assert.equal(wrong.status, 403, wrong.raw);
    assert.equal(wrong.body.code, "wrong_password");
    const short = await call(h, who, "POST", url, { old_password: who.password, new_password: "short" });
    assert.equal(short.status, 400, short.raw);
    // Guessing the old password here is limited like signing in (3 failures per user and address).
    await call(h, who, "POST", url, { old_password: "not-it-2", new_password: "brand-new-password" });
    await call(h, who, "POST", url, { old_password: "not-it-3", new_password: "brand-new-password" });
    const locked = await call(h, who, "POST", url, {
      old_password: who.password,
      new_password: "brand-new-password",
    });
    assert.equal(locked.status, 429, locked.raw);
    // Access tokens cannot change a password (Basic or the session only).
    const other = await createUser(h, "tokenholder");
    const token = await bearerToken(other);
    const viaToken = await h.app.inject({
      method: "POST",
      url: "/api/v1.1/users/tokenholder/password/",
      headers: { authorization: `Bearer ${token}` },
      payload: { old_password: other.password, new_password: "brand-new-password" },
    });
    assert.equal(viaToken.statusCode, 403, viaToken.body);
  });

  test("ends every other session and access token and their streams, keeps the current session", async () => {
    const who = await createUser(h, "rotator");
    const current = await signIn(h, "rotator", who.password);
    const elsewhere = await signIn(h, "rotator", who.password);
    const currentStream = await sessionStream(current);
    const elsewhereStream = await sessionStream(elsewhere);
    const token = await bearerToken(who);
    const res = await withCookie(current, "POST", "/api/v1.1/users/rotator/password/", {
      old_password: who.password,
      new_password: "rotated-password-1",
    });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), { username: "rotator", sessions_ended: 1, access_tokens_ended: 1 });
    await assertClosed({ elsewhereStream }, 5000, /signed out/);
    assert.equal(currentStream.isClosed, false, "the session the change was made from stays");
    assert.equal((await withCookie(current, "GET", "/api/app/v1/service/")).statusCode, 200);
    assert.equal((await withCookie(elsewhere, "GET", "/api/app/v1/service/")).statusCode, 401);
    assert.equal((await profileWith("rotator", `Bearer ${token}`)).statusCode, 401);
    currentStream.close();
    // The new password signs in; the old one no longer does.
    await signIn(h, "rotator", "rotated-password-1");
    const old = await h.app.inject({
      method: "POST",
      url: "/api/session/",
      payload: { username: "rotator", password: who.password },
      remoteAddress: "10.1.0.2",
    });
    assert.equal(old.statusCode, 401);
  });

  test("an administrator resets another user's password without the old one; that user's sessions end", async () => {
    const who = await createUser(h, "resettee");
    const s = await signIn(h, "resettee", who.password);
    const stream = await sessionStream(s);
    const res = await call(h, h.admin, "POST", "/api/v1.1/users/resettee/password/", {
      new_password: "set-by-the-admin",
    });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.sessions_ended, 1);
    await assertClosed({ stream }, 5000, /signed out/);
    await signIn(h, "resettee", "set-by-the-admin");
    // Another user may not (404, as for a user it cannot see).
    const mallory = await createUser(h, "mallory2");
    const refused = await call(h, mallory, "POST", "/api/v1.1/users/resettee/password/", {
      new_password: "taken-over-now",
    });
    assert.equal(refused.status, 404, refused.raw);
  });
});

describe("deactivation", () => {
  test("a deactivated user's API key, sessions, tokens and streams refuse at once; sign-in has no oracle", async () => {
    const who = await createUser(h, "leaver");
    const s = await signIn(h, "leaver", who.password);
    const token = await bearerToken(who);
    const streams = {
      key: await openStream(`ws://${base}/api/audit/v1/events/`, { auth: who.auth }),
      session: await sessionStream(s),
    };
    const res = await call(h, h.admin, "POST", "/api/v1.1/users/leaver/deactivate/");
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.is_active, false);
    await assertClosed(streams, 5000, /./);
    assert.equal((await call(h, who, "GET", "/api/app/v1/service/")).status, 401);
    assert.equal((await withCookie(s, "GET", "/api/app/v1/service/")).statusCode, 401);
    assert.equal((await profileWith("leaver", `Bearer ${token}`)).statusCode, 401);
    await assert.rejects(openStream(`ws://${base}/api/audit/v1/events/`, { auth: who.auth }), /401/);
    // Sign-in: the same answer as a wrong password.
    const signin = await h.app.inject({
      method: "POST",
      url: "/api/session/",
      payload: { username: "leaver", password: who.password },
      remoteAddress: "10.1.0.3",
    });
    assert.equal(signin.statusCode, 401);
    assert.equal(signin.json().error, "The username or password is wrong.");
    const grant = await h.app.inject({
      method: "POST",
      url: "/oauth/token",
      payload: { grant_type: "password", username: "leaver", password: who.password, scope: "profile_read" },
    });
    assert.equal(grant.statusCode, 400);
    assert.equal(grant.json().error, "invalid_grant");

    // Activated again: the API key works again; ended sessions stay ended.
    const back = await call(h, h.admin, "POST", "/api/v1.1/users/leaver/activate/");
    assert.equal(back.status, 200, back.raw);
    assert.equal(back.body.is_active, true);
    assert.equal((await call(h, who, "GET", "/api/app/v1/service/")).status, 200);
    assert.equal((await withCookie(s, "GET", "/api/app/v1/service/")).statusCode, 401);
  });

  test("only administrators deactivate, and not themselves", async () => {
    const who = await createUser(h, "plain");
    const refused = await call(h, who, "POST", "/api/v1.1/users/admin/deactivate/");
    assert.equal(refused.status, 403, refused.raw);
    assert.equal(refused.body.code, "admin_only");
    const self = await call(h, h.admin, "POST", "/api/v1.1/users/admin/deactivate/");
    assert.equal(self.status, 409, self.raw);
    assert.equal(self.body.code, "cannot_deactivate_self");
    const unknown = await call(h, h.admin, "POST", "/api/v1.1/users/nobody-here/deactivate/");
    assert.equal(unknown.status, 404, unknown.raw);
    assert.equal((await call(h, h.admin, "GET", "/auth/")).status, 200);
  });
});
