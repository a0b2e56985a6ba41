// When Caddy's driver (drivers/router/caddy.ts) loads a configuration, against a stand-in for
// Caddy's admin API on a unix socket that counts each POST /load: a change of upstreams alone is
// published to the route resolver and loads nothing (a load closes every WebSocket Caddy 2.6
// proxies), the routes then look their upstreams up there (dynamic_upstreams), a driver made again
// over the same running Caddy (Berth restarted) loads nothing for a configuration of the same
// shape, a Caddy started again is given its configuration, and a removed upstream is said to be
// chosen until Caddy's next lookup (settlesAt: what a drain waits for).
import assert from "node:assert/strict";
import dns from "node:dns";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { CaddyRouter } from "../../src/drivers/router/caddy.ts";
import { RouteResolver, routeDnsName } from "../../src/drivers/router/dns.ts";
import type { Route, RouterConfig } from "../../src/drivers/router/router.ts";

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-caddy-loads-"));
const socket = path.join(dir, "admin.sock");
const loaded: Record<string, unknown>[] = [];
const admin = http.createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    if (req.method === "POST" && req.url === "/load") loaded.push(JSON.parse(body));
    res.end("");
  });
});
const resolver = new RouteResolver({ host: "127.0.0.1", port: 0 });
let restartedCaddy = false;

function driver(): CaddyRouter {
  return new CaddyRouter({
    adminSocket: socket,
    address: "127.0.0.1",
    paths: {
      adminListen: `unix/${socket}`,
      storageDir: dir,
      logFile: path.join(dir, "caddy.log"),
      accessLogFile: path.join(dir, "access.log"),
    },
    ensureRunning: async () => {
      const again = restartedCaddy;
      restartedCaddy = false;
      return again;
    },
    dns: { ...resolver.forSource("*"), refreshMs: 50 },
    shapeFile: path.join(dir, "loaded-shape"),
  });
}

function config(hosts: Record<string, string[]>): RouterConfig {
  const routes: Route[] = Object.entries(hosts).map(([host, ips]) => ({
    id: `svc|${host}|/`,
    namespace: "alice",
    service: "svc",
    service_name: "web",
    host,
    path: "/",
    port: 8080,
    tls: "off",
    redirect_https: false,
    sticky: false,
    weight: 0,
    source: "domains",
    upstreams: ips.map((ip) => ({ container: ip, name: ip, address: `${ip}:8080`, node: "", held: false })),
  }));
  return {
    routes,
    certificates: [],
    acme: { directory: "https://acme.invalid/dir", email: "", caRootFile: "" },
  };
}

async function lookup(host: string): Promise<string[]> {
  const r = new dns.promises.Resolver({ timeout: 2000, tries: 1 });
  r.setServers([(await resolver.listen()).slice("udp/".length)]);
  return (await r.resolve4(routeDnsName(`svc|${host}|/`)).catch(() => [])).sort();
}

before(() => new Promise<void>((r) => admin.listen(socket, r)));
after(() => {
  admin.close();
  resolver.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test("upstream changes load nothing, a new domain loads, and a driver made again over a running Caddy loads nothing", async () => {
  const first = driver();
  await first.apply(config({ "app.test": ["10.0.0.2", "10.0.0.3"] }));
  assert.equal(loaded.length, 1);
  const proxy = JSON.stringify(loaded[0]);
  assert.match(proxy, /"dynamic_upstreams":\{"source":"a"/, "routes look their upstreams up");
  assert.ok(proxy.includes(routeDnsName("svc|app.test|/")), "by the route's name");

  // A scale (3 upstreams), then a redeploy (others): published, not loaded.
  await first.apply(config({ "app.test": ["10.0.0.2", "10.0.0.3", "10.0.0.4"] }));
  assert.ok(first.settlesAt() <= Date.now(), "an added upstream leaves nothing to wait for");
  await first.apply(config({ "app.test": ["10.0.0.7", "10.0.0.8", "10.0.0.9"] }));
  // Removed upstreams may be chosen until Caddy's next lookup: a drain waits for that (push).
  assert.ok(first.settlesAt() > Date.now(), "the removed upstreams settle after the refresh");
  assert.equal(loaded.length, 1, "no load for upstream changes");
  assert.deepEqual(await lookup("app.test"), ["10.0.0.7", "10.0.0.8", "10.0.0.9"]);
  assert.deepEqual(first.applyCounts, { loads: 1, upstreamUpdates: 2 });

  // Berth restarted: a new driver over the same Caddy.
  const second = driver();
  await second.apply(config({ "app.test": ["10.0.0.7", "10.0.0.8"] }));
  assert.equal(loaded.length, 1, "a restarted Berth loads nothing Caddy already runs");
  assert.deepEqual(await lookup("app.test"), ["10.0.0.7", "10.0.0.8"]);

  // A new domain, and a route left without upstreams (its 502 is in the configuration): loads.
  await second.apply(config({ "app.test": ["10.0.0.7", "10.0.0.8"], "api.test": ["10.0.0.7"] }));
  assert.equal(loaded.length, 2);
  await second.apply(config({ "app.test": [], "api.test": ["10.0.0.7"] }));
  assert.equal(loaded.length, 3);
  assert.match(JSON.stringify(loaded[2]), /No container of web is ready to answer app\.test/);

  // Caddy started again (a crash): it runs nothing, so the same configuration is loaded.
  restartedCaddy = true;
  await second.apply(config({ "app.test": [], "api.test": ["10.0.0.7"] }));
  assert.equal(loaded.length, 4);
});
