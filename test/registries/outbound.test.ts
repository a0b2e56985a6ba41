// Outbound safety with a strict configuration: names resolve through a table (tests send no DNS
// queries) and only `allowed.internal.test` is allow-listed, by name. Hosts that are or resolve to
// loopback, link-local, metadata or private addresses are refused before anything is sent.
// (Its own file: the harness cannot run two platforms on PostgreSQL in one process.)
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { call, createUser, startHarness } from "../support/harness.ts";
import { type FakeRegistry, startFakeRegistry } from "./support.ts";

const USER = "ci-robot";
const PASSWORD = "s3cret-Passw0rd-that-must-never-leak";
const base = "/api/repo/v1/repository/";

let openReg: FakeRegistry;

before(async () => {
  openReg = await startFakeRegistry({ auth: "none" });
});
after(() => openReg?.close());

describe("outbound safety", () => {
  test("hosts that are or resolve to loopback, link-local, metadata or private addresses are refused", async () => {
    // Names resolve through a table here (tests send no DNS queries); only `allowed.internal.test`
    // is allow-listed, by name.
    const table: Record<string, string[]> = {
      "registry.internal.test": ["127.0.0.1"],
      "metadata.internal.test": ["169.254.169.254"],
      "mixed.example.test": ["93.184.216.34", "10.0.0.7"],
      "allowed.internal.test": ["127.0.0.1"],
    };
    const strict = await startHarness({
      env: {
        BERTH_REGISTRY_ALLOW: "allowed.internal.test",
        BERTH_INSECURE_REGISTRIES: `allowed.internal.test:${openReg.host.split(":")[1]}`,
        BERTH_REGISTRY_TIMEOUT_MS: "1500",
      },
      resolveRegistryHost: async (hostname) => {
        const found = table[hostname];
        if (!found) throw Object.assign(new Error("not found"), { code: "ENOTFOUND" });
        return found.map((address) => ({ address, family: 4 as const }));
      },
    });
    const sentBefore = openReg.requests.length;
    try {
      const dave = await createUser(strict, "dave");
      const cases: [string, RegExp][] = [
        [
          "registry.internal.test:5000/team/app",
          /registry\.internal\.test resolves to 127\.0\.0\.1, which is a loopback address/,
        ],
        [
          "metadata.internal.test/team/app",
          /resolves to 169\.254\.169\.254, which is the cloud metadata address/,
        ],
        ["mixed.example.test/team/app", /resolves to 10\.0\.0\.7, which is a private address/],
        ["127.0.0.1:5000/team/app", /127\.0\.0\.1 is a loopback address/],
        ["169.254.169.254/team/app", /169\.254\.169\.254 is the cloud metadata address/],
        ["169.254.10.1:5000/team/app", /link-local address/],
        ["10.1.2.3:5000/team/app", /private address/],
        ["192.168.1.1/team/app", /private address/],
        ["[::1]:5000/team/app", /loopback address/],
        ["[fe80::1]:5000/team/app", /link-local address/],
        ["[::ffff:127.0.0.1]:5000/team/app", /loopback address/],
      ];
      for (const [name, why] of cases) {
        const r = await call(strict, dave, "POST", base, { name, username: USER, password: PASSWORD });
        assert.equal(r.status, 400, `${name}: ${r.raw}`);
        assert.equal(r.body.code, "registry_refused", name);
        assert.match(r.body.error, why, name);
        assert.match(r.body.error, /BERTH_REGISTRY_ALLOW/);
      }
      assert.equal(
        openReg.requests.length,
        sentBefore,
        "nothing was sent to the loopback registry while it was not allowed",
      );
      const unknown = await call(strict, dave, "POST", base, { name: "nowhere.example.test/team/app" });
      assert.equal(unknown.status, 400, unknown.raw);
      assert.equal(unknown.body.code, "registry_unreachable");
      assert.match(unknown.body.error, /does not resolve/);

      // Allow-listed by name: Berth contacts it, and the credentials check decides.
      const port = openReg.host.split(":")[1];
      const allowed = await call(strict, dave, "POST", base, {
        name: `allowed.internal.test:${port}/team/app`,
      });
      assert.equal(allowed.status, 201, allowed.raw);
      assert.ok(openReg.requests.some((r) => r.url === "/v2/"));
    } finally {
      await strict.close();
    }
  });
});
