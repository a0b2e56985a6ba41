// Certificate renewal settings (issue 30): BERTH_ROUTER_RENEW_INTERVAL_MS and
// BERTH_ROUTER_RENEWAL_WINDOW_RATIO default to Caddy's own (10 minutes, a third of a certificate's
// lifetime), are refused at start with one line naming the variable, and reach the configuration
// Caddy is given (its TLS automation's renew_interval and the ACME policy's renewal_window_ratio).
// Renewals on a real Caddy: test/real/router-renewal.test.ts.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { loadConfig } from "../../src/config/index.ts";
import { caddyConfig } from "../../src/drivers/router/caddy-config.ts";
import type { RouterConfig } from "../../src/drivers/router/router.ts";

const paths = {
  adminListen: "unix//tmp/x.sock",
  storageDir: "/tmp/s",
  logFile: "/tmp/l",
  accessLogFile: "/tmp/a",
};

function tlsOf(acme: RouterConfig["acme"]) {
  const config: RouterConfig = {
    routes: [
      {
        id: "r1",
        namespace: "alice",
        service: "s",
        service_name: "web",
        host: "app.test",
        path: "/",
        port: 80,
        tls: "acme",
        redirect_https: true,
        sticky: false,
        weight: 1,
        source: "domains",
        upstreams: [],
      },
    ],
    certificates: [],
    acme,
  };
  const apps = caddyConfig(config, paths).apps as { tls: { automation: Record<string, unknown> } };
  return apps.tls.automation as { renew_interval?: string; policies: { renewal_window_ratio?: number }[] };
}

describe("certificate renewal settings", () => {
  test("unset are Caddy's defaults; other values are taken; bad ones are refused naming the variable", () => {
    const d = loadConfig({}).router;
    assert.equal(d.renewIntervalMs, 600_000);
    assert.equal(d.renewalWindowRatio, 1 / 3);
    const set = loadConfig({
      BERTH_ROUTER_RENEW_INTERVAL_MS: "2000",
      BERTH_ROUTER_RENEWAL_WINDOW_RATIO: "0.75",
    }).router;
    assert.equal(set.renewIntervalMs, 2000);
    assert.equal(set.renewalWindowRatio, 0.75);
    for (const bad of ["0", "999", "ten", "1.5"])
      assert.throws(
        () => loadConfig({ BERTH_ROUTER_RENEW_INTERVAL_MS: bad }),
        (e: Error) =>
          e.message === `BERTH_ROUTER_RENEW_INTERVAL_MS must be an integer of at least 1000, not "${bad}"`,
        bad,
      );
    for (const bad of ["0", "1", "-0.2", "half", "2"])
      assert.throws(
        () => loadConfig({ BERTH_ROUTER_RENEWAL_WINDOW_RATIO: bad }),
        (e: Error) =>
          e.message.startsWith(`BERTH_ROUTER_RENEWAL_WINDOW_RATIO must be a number above 0 and below 1`),
        bad,
      );
  });

  test("they reach Caddy's configuration: the renewal check interval and the ACME policy's window", () => {
    const automation = tlsOf({
      directory: "https://acme.test/dir",
      email: "",
      caRootFile: "",
      renewIntervalMs: 2000,
      renewalWindowRatio: 0.75,
    });
    assert.equal(automation.renew_interval, "2000ms");
    assert.equal(automation.policies[0]!.renewal_window_ratio, 0.75);
  });
});
