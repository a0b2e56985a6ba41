// A router on an agent node, on real engines (issue 30): a Docker engine in a network namespace of
// its own that listens only on its unix socket, and the Berth agent (the file Berth serves) run
// inside it; the agent starts Caddy there and Berth configures it through the agent's tunnel. A
// service on the node is reached like `curl --resolve app.agent.test:443:<node address>` over
// HTTPS with a certificate the test's own ACME server (pebble) issued, whose directory root crossed
// the tunnel; plain HTTP is redirected. Terminating the node stops the agent's Caddy.
//
// Needs root, dockerd, nsenter, caddy, pebble and openssl. Skipped locally without them; fails
// under CI=true. Lab range 10.241.0.0/16: the link 10.241.1.0/24 (host end "berth-ra0"), the
// engine's bridge 10.241.2.0/24 inside the namespace.
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import https from "node:https";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { findExecutable } from "../../src/drivers/local/host-tools.ts";
import { type AcmeLab, acmeLab } from "../support/acme-lab.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";
import { type NetnsDockerd, netnsDockerdUnavailable, startNetnsDockerd } from "../support/netns-dockerd.ts";

const PREFIX = "10.241.1";
const HOST_ADDRESS = `${PREFIX}.1`;
const NODE_ADDRESS = `${PREFIX}.2`;
const PEBBLE = `${HOST_ADDRESS}:14041`;
const PEBBLE_MANAGEMENT = "127.0.0.1:15241";
const DNS = "127.0.0.1:18241";
const DNS_MANAGEMENT = "127.0.0.1:18242";
const BERTH_PORT = 18041;
const HOST = "app.agent.test";

let unavailable = netnsDockerdUnavailable();
for (const tool of ["caddy", "pebble", "pebble-challtestsrv", "openssl"]) {
  if (!unavailable && !findExecutable(tool)) unavailable = `${tool} is not installed`;
}
if (unavailable && process.env.CI === "true")
  test("agent router prerequisites (required in CI)", () => assert.fail(unavailable));

const step = (what: string) => {
  if (process.env.RT_DEBUG) console.error(new Date().toISOString(), what);
};
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-router-agent-"));
function get(
  o: https.RequestOptions & { tls?: boolean },
): Promise<{ status: number; body: string; issuer: string }> {
  return new Promise((resolve, reject) => {
    const req = (o.tls ? https : http).request({ timeout: 5000, ...o }, (res) => {
      // Read while the socket is there (it is released by the end).
      const cert = o.tls ? (res.socket as import("node:tls").TLSSocket).getPeerCertificate() : undefined;
      let body = "";
      res.on("data", (c) => (body += c));
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, body, issuer: String(cert?.issuer?.CN ?? "") }),
      );
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end();
  });
}

describe("the router on an agent node", { skip: unavailable }, () => {
  let engine: NetnsDockerd;
  let h: Harness;
  let alice: Caller;
  let agent: ChildProcess | undefined;
  let pebbleRoots = "";
  let acme: AcmeLab;
  const stateDir = () => path.join(dir, "agent-state");
  const logs = () =>
    ["agent.log", "pebble.log"]
      .map((f) => path.join(dir, f))
      .concat([path.join(stateDir(), "router", "caddy.log"), path.join(stateDir(), "router", "caddy.out")])
      .filter((f) => fs.existsSync(f))
      .map((f) => `== ${path.basename(f)}\n${fs.readFileSync(f, "utf8").slice(-4000)}`)
      .join("\n");

  before(async () => {
    acme = acmeLab({
      dir,
      pebble: PEBBLE,
      pebbleManagement: PEBBLE_MANAGEMENT,
      dns: DNS,
      dnsManagement: DNS_MANAGEMENT,
    });
    step("engine");
    engine = await startNetnsDockerd({ prefix: PREFIX, bip: "10.241.2.1/24", hostLink: "berth-ra0" });
    const url = `http://${HOST_ADDRESS}:${BERTH_PORT}`;
    h = await startHarness({
      env: {
        BERTH_PUBLIC_URL: url,
        BERTH_RECONCILE_INTERVAL_MS: "1000",
        BERTH_ROUTER_INTERVAL_MS: "1000",
        BERTH_START_MIN_UP_MS: "500",
        BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
        BERTH_NODE_HEALTH_INTERVAL_MS: "1000",
        BERTH_ROUTER_ACME_DIRECTORY: acme.directory,
        BERTH_ROUTER_ACME_CA_ROOT: acme.caRootFile,
      },
      stepTimeoutMs: 60_000,
    });
    step("listen");
    await h.app.listen({ host: HOST_ADDRESS, port: BERTH_PORT });
    alice = await createUser(h, "alice");
    // The test's DNS answers every name with the node's address; pebble asks it, never outside DNS.
    const roots = acme.start(NODE_ADDRESS);
    step("download");
    const download = await fetch(`${url}/api/agent/v1/berth-agent.mjs`);
    assert.equal(download.status, 200);
    fs.writeFileSync(path.join(dir, "berth-agent.mjs"), Buffer.from(await download.arrayBuffer()));
    step("roots");
    pebbleRoots = await roots;
    const token = await call(h, alice, "POST", "/api/infra/v1/token/");
    assert.equal(token.status, 201, token.raw);
    step("agent");
    agent = engine.spawnInside(
      process.execPath,
      [
        path.join(dir, "berth-agent.mjs"),
        "--url",
        url,
        "--token",
        token.body.token,
        "--state-dir",
        stateDir(),
        "--docker-socket",
        engine.socketPath,
      ],
      { log: path.join(dir, "agent.log") },
    );
  });

  after(async () => {
    step("after");
    if (process.env.RT_DEBUG) console.error(logs());
    // Caddy outlives a killed agent (it is detached): stop the recorded process if the test did not.
    try {
      const record = JSON.parse(fs.readFileSync(path.join(stateDir(), "router", "router.json"), "utf8"));
      process.kill(record.caddy.pid, "SIGKILL");
    } catch {}
    if (agent && agent.exitCode === null) agent.kill("SIGKILL");
    acme?.stop();
    h?.reconciler.stop();
    h?.health.stop();
    step("close");
    await h?.close();
    step("engine stop");
    await engine?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test("a service on the agent node is served over HTTPS by the agent's Caddy, with an ACME certificate", {
    timeout: 90_000,
  }, async () => {
    const node = await waitFor(
      "the agent's node Deployed",
      async () => {
        const n = (await call(h, alice, "GET", "/api/infra/v1/node/")).body.objects[0];
        return n?.state === "Deployed" ? n : undefined;
      },
      30_000,
      200,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${logs()}`);
    });
    assert.equal(h.tunnels.session(node.uuid)?.features.has("router"), true, "the agent offers its router");
    const created = await call(h, alice, "POST", "/api/app/v1/service/", {
      image: engine.image,
      name: "web",
      run_command: "httpd -f -p 80 -h /var/www",
      container_ports: [{ protocol: "tcp", inner_port: 80 }],
      domains: [{ host: HOST }],
    });
    assert.equal(created.status, 201, created.raw);
    const uri = created.body.resource_uri;
    assert.equal((await call(h, alice, "POST", `${uri}start/`)).status, 202);
    const shown = await waitFor(
      "the certificate issued on the service",
      async () => {
        const v = (await call(h, alice, "GET", uri)).body;
        return v.state === "Running" && v.domains[0].certificate?.state === "issued" ? v : undefined;
      },
      60_000,
      300,
    ).catch(async (err: Error) => {
      throw new Error(`${err.message}\n${(await call(h, alice, "GET", uri)).raw}\n${logs()}`);
    });
    assert.match(shown.domains[0].certificate.issuer, /Pebble/i);
    assert.ok(Date.parse(shown.domains[0].certificate.expires) > Date.now());

    const answer = await get({
      host: NODE_ADDRESS,
      port: 443,
      servername: HOST,
      headers: { host: HOST },
      path: "/",
      tls: true,
      ca: pebbleRoots,
    });
    assert.equal(answer.status, 200);
    assert.match(answer.body, /hello from busybox/);
    assert.match(answer.issuer, /Pebble/i);
    const plain = await get({ host: NODE_ADDRESS, port: 80, headers: { host: HOST }, path: "/x" });
    assert.equal(plain.status, 308, "plain HTTP is redirected");

    const routes = await call(h, alice, "GET", `${uri}routes/`);
    assert.equal(routes.body.objects[0].upstreams.length, 1);
    await waitFor("the request counted", async () => {
      const r = await call(h, alice, "GET", `${uri}routes/`);
      return r.body.objects[0].requests_total >= 1 ? true : undefined;
    });
  });

  test("terminating the node stops the agent's Caddy and removes its files", {
    timeout: 60_000,
  }, async () => {
    const record = JSON.parse(fs.readFileSync(path.join(stateDir(), "router", "router.json"), "utf8"));
    const node = (await call(h, alice, "GET", "/api/infra/v1/node/")).body.objects[0];
    const del = await call(h, alice, "DELETE", node.resource_uri);
    assert.equal(del.status, 202, del.raw);
    await waitFor(
      "the agent to exit",
      async () => (agent?.exitCode !== null ? true : undefined),
      30_000,
      200,
    );
    assert.equal(fs.existsSync(`/proc/${record.caddy.pid}`), false, "Caddy is stopped");
    assert.equal(fs.existsSync(path.join(stateDir(), "router")), false);
  });
});
