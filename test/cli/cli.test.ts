// The `berth` binary as a user runs it, against a live server process: credentials (login,
// the config file, variables) and errors with their exit codes.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { basic } from "../support/harness.ts";
import { ADMIN, berth, liveServer } from "./support.ts";

const { live, ok } = liveServer();

describe("credentials", () => {
  test("login with a password stores URL, user and a new API key in a 0600 file; whoami and logout use it", async () => {
    const config = path.join(live.server.configDir, "nested", "config.json");
    const own = { BERTH_CONFIG: config, BERTH_URL: live.server.url };
    const login = await berth(["login", "-u", ADMIN.username, "--password-stdin"], {
      env: own,
      input: `${ADMIN.password}\n`,
    });
    assert.equal(login.code, 0, login.stderr);
    assert.match(login.stdout, /Signed in to http:\/\/127\.0\.0\.1:\d+ as admin/);
    assert.equal(fs.statSync(config).mode & 0o777, 0o600);
    const stored = JSON.parse(fs.readFileSync(config, "utf8"));
    assert.equal(stored.user, "admin");
    assert.equal(stored.url, live.server.url);
    assert.notEqual(stored.apikey, ADMIN.password, "a key is stored, never the password");

    // Only the config file now: no URL or key in the environment.
    const who = await berth(["whoami"], { env: { BERTH_CONFIG: config } });
    assert.equal(who.code, 0, who.stderr);
    assert.match(who.stdout, /^admin at http:\/\/127\.0\.0\.1:\d+ \(namespaces: admin\)\n$/);

    // Variables override the file: a wrong key from the environment is refused (401 → exit 1).
    const wrong = await berth(["service", "ls"], {
      env: { BERTH_CONFIG: config, DOCKERCLOUD_USER: "admin", DOCKERCLOUD_APIKEY: "not-the-key" },
    });
    assert.equal(wrong.code, 1);
    assert.equal(wrong.stdout, "");
    assert.match(wrong.stderr, /berth login/);

    const out = await berth(["logout"], { env: { BERTH_CONFIG: config } });
    assert.equal(out.code, 0, out.stderr);
    assert.equal(fs.existsSync(config), false);
    // logout revoked the key login made.
    const revoked = await fetch(`${live.server.url}/auth/`, {
      headers: { authorization: basic("admin", stored.apikey) },
    });
    assert.equal(revoked.status, 401);
    const after = await berth(["whoami"], { env: { BERTH_CONFIG: config, BERTH_URL: live.server.url } });
    assert.equal(after.code, 1);
    assert.match(after.stderr, /not signed in/);
  });

  test("login --apikey checks the key before storing it", async () => {
    const config = path.join(live.server.configDir, "k.json");
    const bad = await berth(["login", "--url", live.server.url, "-u", "admin", "--apikey", "nope"], {
      env: { BERTH_CONFIG: config },
    });
    assert.equal(bad.code, 1);
    assert.equal(fs.existsSync(config), false);
    const good = await berth(
      ["login", "--url", live.server.url, "-u", "admin", "--apikey", ADMIN.key, "--json"],
      {
        env: { BERTH_CONFIG: config },
      },
    );
    assert.equal(good.code, 0, good.stderr);
    assert.equal(JSON.parse(good.stdout).username, "admin");
  });
});

describe("errors and exit codes", () => {
  test("an unknown command or option is a usage error (2); an unknown object is 1, naming it", async () => {
    const cmd = await berth(["frobnicate"], { env: live.env });
    assert.equal(cmd.code, 2);
    assert.match(cmd.stderr, /unknown command 'frobnicate'/);
    const opt = await berth(["service", "ls", "--frob"], { env: live.env });
    assert.equal(opt.code, 2);
    assert.match(opt.stderr, /unknown option '--frob'/);
    const missing = await berth(["service", "start", "nosuch"], { env: live.env });
    assert.equal(missing.code, 1);
    assert.equal(missing.stderr, "berth: service nosuch not found\n");
    const scale = await berth(["service", "scale", "x", "many"], { env: live.env });
    assert.equal(scale.code, 2);
  });

  test("a refused operation prints the server's sentence; the server unreachable says so", async () => {
    await ok(["service", "create", "busybox:local", "--name", "idle"]);
    const stop = await berth(["service", "stop", "idle"], { env: live.env });
    assert.equal(stop.code, 1);
    assert.match(stop.stderr, /^berth: service idle is Not running; stop is allowed in /);
    const down = await berth(["service", "ls"], { env: { ...live.env, BERTH_URL: "http://127.0.0.1:9" } });
    assert.equal(down.code, 1);
    assert.match(down.stderr, /cannot reach http:\/\/127\.0\.0\.1:9/);
  });
});
