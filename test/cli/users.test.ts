// `berth user passwd`, `berth user deactivate|activate` and `berth logout --everywhere` (issue 26):
// the binary against a server process.
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { api, berth, Server } from "./support.ts";

let server: Server;
let carol: Record<string, string>;

const basic = (user: string, secret: string) =>
  `Basic ${Buffer.from(`${user}:${secret}`).toString("base64")}`;

/** Signs in to the dashboard as `user`; the session cookie. */
async function signIn(user: string, password: string): Promise<string> {
  const res = await fetch(`${server.url}/api/session/`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ username: user, password }),
  });
  assert.equal(res.status, 200, await res.text());
  return /berth_session=([^;]+)/.exec(res.headers.get("set-cookie") ?? "")![0];
}

const withCookie = async (cookie: string) =>
  (await fetch(`${server.url}/api/app/v1/service/`, { headers: { cookie } })).status;

before(async () => {
  server = await Server.start();
  assert.equal(
    (
      await api(server, "POST", "/api/v1.1/users/", {
        username: "carol",
        email: "c@example.test",
        password: "carol-password",
      })
    ).status,
    201,
  );
  const key = await fetch(`${server.url}/api/v1.1/users/carol/apikeys/`, {
    method: "POST",
    headers: { authorization: basic("carol", "carol-password"), "content-type": "application/json" },
    body: JSON.stringify({ label: "cli" }),
  });
  carol = {
    BERTH_URL: server.url,
    BERTH_USER: "carol",
    BERTH_APIKEY: ((await key.json()) as { key: string }).key,
    BERTH_CONFIG: path.join(server.configDir, "carol.json"),
  };
});
after(() => server.stop());

describe("berth user", () => {
  test("passwd needs the current password and ends the other sessions", async () => {
    const cookie = await signIn("carol", "carol-password");
    const wrong = await berth(["user", "passwd"], {
      env: carol,
      input: "not-the-password\nnew-password-1\n",
    });
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /old_password is not the current password/);
    assert.equal(await withCookie(cookie), 200, "a refused change ends nothing");
    const changed = await berth(["user", "passwd"], {
      env: carol,
      input: "carol-password\nnew-password-1\n",
    });
    assert.equal(changed.code, 0, changed.stderr);
    assert.match(changed.stdout, /Password of carol changed; 1 session and 0 access tokens ended/);
    assert.equal(await withCookie(cookie), 401);
    await signIn("carol", "new-password-1");
    // An administrator resets it without the current one.
    const reset = await berth(["user", "passwd", "carol"], {
      env: server.adminEnv(),
      input: "set-by-admin-1\n",
    });
    assert.equal(reset.code, 0, reset.stderr);
    await signIn("carol", "set-by-admin-1");
  });

  test("deactivate refuses the user's key at once; activate restores it; only administrators may", async () => {
    const refused = await berth(["user", "deactivate", "admin"], { env: carol });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /Only administrators can deactivate users/);
    const off = await berth(["user", "deactivate", "carol"], { env: server.adminEnv() });
    assert.equal(off.code, 0, off.stderr);
    assert.equal(off.stdout.trim(), "carol inactive");
    const whoami = await berth(["whoami"], { env: carol });
    assert.equal(whoami.code, 1);
    const on = await berth(["user", "activate", "carol"], { env: server.adminEnv() });
    assert.equal(on.stdout.trim(), "carol active");
    assert.equal((await berth(["whoami"], { env: carol })).code, 0);
  });

  test("logout --everywhere ends every dashboard session of the user", async () => {
    const first = await signIn("carol", "set-by-admin-1");
    const second = await signIn("carol", "set-by-admin-1");
    const out = await berth(["logout", "--everywhere"], { env: carol });
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, /Every session of carol ended/);
    assert.equal(await withCookie(first), 401);
    assert.equal(await withCookie(second), 401);
    // The API key stays (it was given by the environment, not stored by login).
    assert.equal((await berth(["whoami"], { env: carol })).code, 0);
  });
});
