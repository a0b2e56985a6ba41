// `berth service domain add|ls|rm` against a live server process (issue 30): the service's
// domains are changed by the CLI and shown with their certificates; a refusal says why.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { berth, liveServer, rows } from "./support.ts";

const { live, ok } = liveServer();

describe("service domain", () => {
  test("add, ls and rm change and show the service's host names", async () => {
    await ok(["service", "create", "busybox:local", "--name", "site", "-p", "8080"]);
    const added = await ok(["service", "domain", "add", "site", "www.site.test", "--path", "/shop"]);
    assert.match(added.stdout.split("\n")[0]!, /^HOST\s+PATH\s+PORT\s+TLS\s+CERTIFICATE/);
    await ok(["service", "domain", "add", "site", "plain.site.test", "--tls", "off", "--port", "8080"]);
    const ls = await ok(["service", "domain", "ls", "site"]);
    assert.deepEqual(
      rows(ls.stdout).map((r) => r.slice(0, 5)),
      [
        ["www.site.test", "/shop", "auto", "acme", "pending"],
        ["plain.site.test", "/", "8080", "off", "-"],
      ],
    );
    const json = JSON.parse((await ok(["service", "domain", "ls", "site", "--json"])).stdout);
    assert.equal(json[0].redirect_https, true);
    await ok(["service", "domain", "rm", "site", "www.site.test"]);
    assert.deepEqual(
      rows((await ok(["service", "domain", "ls", "site"])).stdout).map((r) => r[0]),
      ["plain.site.test"],
    );
    const missing = await berth(["service", "domain", "rm", "site", "nope.test"], { env: live.env });
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /does not serve nope\.test/);
    const bad = await berth(["service", "domain", "add", "site", "bad_host!"], { env: live.env });
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /domains\[\d\]\.host/);
  });
});
