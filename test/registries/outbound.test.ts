// Outbound safety with a strict configuration: names resolve through a table (tests send no DNS
// queries) and only `allowed.internal.test` is allow-listed, by name. Hosts that are or resolve to
// loopback, link-local, metadata or private addresses are refused before anything is sent.
// (Its own file: the harness cannot run two platforms on PostgreSQL in one process.)
import assert from "node:assert/strict";
import { isIP } from "node:net";
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
      // AAAA answers in the IPv6 forms that carry an internal IPv4 address.
      "sixtofour.internal.test": ["2002:a00:7::1"],
      "translated.internal.test": ["::ffff:0:a9fe:a9fe"],
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
        return found.map((address) => ({
          address,
          family: isIP(address) === 6 ? (6 as const) : (4 as const),
        }));
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
        // IPv6 forms that carry an IPv4 address are judged by the IPv4 rules on that address
        // (issue 26: these three were dialled).
        ["[::127.0.0.1]:5000/team/app", /IPv4-compatible address of 127\.0\.0\.1, a loopback address/],
        ["[::ffff:0:7f00:1]:5000/team/app", /IPv4-translated address of 127\.0\.0\.1, a loopback address/],
        ["[2002:7f00:1::]:5000/team/app", /6to4 address of 127\.0\.0\.1, a loopback address/],
        ["[2002:a9fe:a9fe::1]/team/app", /6to4 address of 169\.254\.169\.254, the cloud metadata address/],
        ["[2002:c0a8:101::]:5000/team/app", /6to4 address of 192\.168\.1\.1, a private address/],
        ["[64:ff9b::7f00:1]:5000/team/app", /NAT64 address of 127\.0\.0\.1, a loopback address/],
        [
          "sixtofour.internal.test/team/app",
          /resolves to 2002:a00:7::1, which is a 6to4 address of 10\.0\.0\.7/,
        ],
        ["translated.internal.test/team/app", /IPv4-translated address of 169\.254\.169\.254/],
        // Ranges that are never a public registry.
        ["[::8.8.8.8]/team/app", /IPv4-compatible address/],
        ["[64:ff9b::808:808]/team/app", /translated \(NAT64\) address/],
        ["[64:ff9b:1::a00:1]/team/app", /local NAT64/],
        ["[2001:0:4136:e378:8000:63bf:3fff:fdd2]/team/app", /Teredo/],
        ["[100::1]/team/app", /discard-only address/],
        ["[fc00::1]/team/app", /unique local/],
        ["[fd12:3456::1]:5000/team/app", /unique local/],
        ["[fec0::1]/team/app", /site-local address/],
        ["[ff02::1]/team/app", /multicast address/],
        ["[ff0e::101]/team/app", /multicast address/],
        ["[::]:5000/team/app", /unspecified/],
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
