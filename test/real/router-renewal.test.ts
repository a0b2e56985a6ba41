// Certificate renewal on a real Caddy (issue 30): pebble issues certificates valid for 40 s; Berth
// gives Caddy a renewal window of 3/4 of a certificate's lifetime and a check every second
// (BERTH_ROUTER_RENEWAL_WINDOW_RATIO, BERTH_ROUTER_RENEW_INTERVAL_MS), so Caddy renews each ~10 s
// after issue; the certificate served changes serial, and the service's certificate shows the new
// expiry (seconds after the old one: a new serial is a renewal), issued, with an update event.
//
// Needs root, dockerd, iproute2, iptables, busybox-static, caddy, pebble and openssl. Skipped
// locally without them; fails under CI=true. Lab range 10.242.0.0/16, bridge berth-rn0.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import tls from "node:tls";
import { findExecutable } from "../../src/drivers/local/host-tools.ts";
import { BUSYBOX_IMAGE } from "../../src/drivers/local/index.ts";
import { type AcmeLab, acmeLab } from "../support/acme-lab.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";
import { deployLocalCluster, localNodesUnavailable, tearDownLocalLab } from "../support/local-lab.ts";

const LAB_RANGE = "10.242.0.0/16";
const BRIDGE = "berth-rn0";
const HOST = "renew.test";

let unavailable = await localNodesUnavailable({ labRange: LAB_RANGE, bridgeName: BRIDGE });
for (const tool of ["caddy", "pebble", "pebble-challtestsrv", "openssl"]) {
  if (!unavailable && !findExecutable(tool)) unavailable = `${tool} is not installed`;
}
if (unavailable && process.env.CI === "true")
  test("router renewal prerequisites (required in CI)", () => assert.fail(unavailable));

/** The serial and expiry of the certificate the router serves for HOST. */
interface Served {
  serial: string;
  issued: number;
  expires: number;
}

function served(address: string): Promise<Served | undefined> {
  return new Promise((resolve) => {
    const socket = tls.connect({ host: address, port: 443, servername: HOST, rejectUnauthorized: false });
    socket.setTimeout(5000);
    const done = (v: Served | undefined) => {
      socket.destroy();
      resolve(v);
    };
    socket.once("secureConnect", () => {
      const cert = socket.getPeerCertificate();
      const ok = cert?.subjectaltname?.includes(`DNS:${HOST}`);
      done(
        ok
          ? {
              serial: cert.serialNumber,
              issued: Date.parse(cert.valid_from),
              expires: Date.parse(cert.valid_to),
            }
          : undefined,
      );
    });
    socket.once("timeout", () => done(undefined));
    socket.once("error", () => done(undefined));
  });
}

describe("certificate renewal on a real router", { skip: unavailable }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-renewal-"));
  let acme: AcmeLab;
  let h: Harness;
  let alice: Caller;
  let nodeUuids: string[] = [];
  let address = "";

  before(async () => {
    acme = acmeLab({
      dir,
      pebble: "10.242.0.1:14062",
      pebbleManagement: "127.0.0.1:15262",
      dns: "127.0.0.1:18262",
      dnsManagement: "127.0.0.1:18263",
      validitySeconds: 40,
    });
    h = await startHarness({
      env: {
        BERTH_LOCAL_LAB_RANGE: LAB_RANGE,
        BERTH_LOCAL_BRIDGE: BRIDGE,
        BERTH_RECONCILE_INTERVAL_MS: "1000",
        BERTH_ROUTER_INTERVAL_MS: "1000",
        BERTH_START_MIN_UP_MS: "1000",
        BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
        BERTH_ROUTER_ACME_DIRECTORY: acme.directory,
        BERTH_ROUTER_ACME_CA_ROOT: acme.caRootFile,
        BERTH_ROUTER_RENEW_INTERVAL_MS: "1000",
        BERTH_ROUTER_RENEWAL_WINDOW_RATIO: "0.75",
        ...(process.env.RT_DEBUG ? { BERTH_LOG_LEVEL: "error" } : {}),
      },
      stepTimeoutMs: 120_000,
    });
    alice = await createUser(h, "alice");
    nodeUuids = (await deployLocalCluster(h, alice, { name: "edge", targetNumNodes: 1 })).nodeUuids;
    address = (await h.store.nodes.findNode(nodeUuids[0]!))!.public_ip;
    await acme.start(address);
  });

  after(async () => {
    if (process.env.RT_DEBUG) {
      const routers = path.join(h.config.dataDir, "local-routers");
      for (const d of fs.existsSync(routers) ? fs.readdirSync(routers) : []) {
        const file = path.join(routers, d, "caddy.log");
        if (fs.existsSync(file)) console.error(`== caddy.log\n${fs.readFileSync(file, "utf8").slice(-6000)}`);
      }
    }
    await tearDownLocalLab(h, { nodeUuids });
    acme.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test("a short-lived certificate is renewed by the router before it expires, and the service shows the new expiry", async () => {
    const res = await call(h, alice, "POST", "/api/app/v1/service/", {
      image: BUSYBOX_IMAGE,
      name: "web",
      run_command: "httpd -f -p 80",
      target_num_containers: 1,
      container_ports: [{ protocol: "tcp", inner_port: 80 }],
      domains: [{ host: HOST }],
    });
    assert.equal(res.status, 201, res.raw);
    const uri: string = res.body.resource_uri;
    const start = await call(h, alice, "POST", `${uri}start/`);
    assert.equal(start.status, 202, start.raw);
    const certificate = async () => (await call(h, alice, "GET", uri)).body.domains[0].certificate;

    const first = await waitFor(
      "the first certificate issued",
      async () => {
        const c = await certificate();
        return c?.state === "issued" ? c : undefined;
      },
      120_000,
      200,
    );
    assert.match(first.issuer, /Pebble/i);
    const firstServed = await waitFor("the first certificate served", () => served(address), 30_000, 200);
    const lifetime = Date.parse(first.expires) - Date.now();
    assert.ok(lifetime <= 41_000, `pebble's certificateValidityPeriod is taken (${lifetime} ms left)`);
    const revision = await h.store.latestRevision();

    // Caddy renews it ~10 s after issue (a window of 3/4 of 40 s), long before its expiry.
    const renewed = await waitFor(
      "a renewed certificate served",
      async () => {
        const s = await served(address);
        return s && s.serial !== firstServed.serial ? s : undefined;
      },
      90_000,
      200,
    );
    assert.ok(renewed.expires > firstServed.expires, "the renewal expires later");
    assert.ok(
      renewed.issued < firstServed.expires,
      "the renewal was issued before the first certificate expired",
    );
    const shown = await waitFor(
      "the service showing the renewed certificate",
      async () => {
        const c = await certificate();
        return c?.state === "issued" && Date.parse(c.expires) > Date.parse(first.expires) ? c : undefined;
      },
      90_000,
      200,
    );
    assert.ok(
      Date.parse(shown.expires) >= renewed.expires,
      "Berth shows the renewal's expiry (or a later one's)",
    );
    const events = await h.store.changesSince(revision, 1000, ["service"]);
    assert.ok(
      events.some((e) => e.resource_uri === uri && e.action === "update"),
      "an update event of the service tells event subscribers",
    );
  });
});
