// Rules of services' domains within one namespace (issue 30), through the API on simulated nodes:
// a host name and path one service serves is refused to another service of the namespace (a
// router could send its requests to one of them only), and an uploaded certificate goes when the
// last domain of its host name goes.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { RouterStore } from "../../src/store/router.ts";
import { call, createService, deployCluster, type Sim, startSim, waitFor } from "../services/sim.ts";
import { selfSignedCertificate } from "../support/certificates.ts";

let s: Sim;

before(async () => {
  s = await startSim({ env: { BERTH_ROUTER_DRAIN_GRACE_MS: "0", BERTH_ROUTER_INTERVAL_MS: "200" } });
  await deployCluster(s, { name: "pool", target_num_nodes: 1 });
});
after(() => s.close());

const body = (name: string, domains: unknown[]) => ({
  image: "busybox:local",
  name,
  run_command: "sleep 100000",
  container_ports: [{ protocol: "tcp", inner_port: 8080 }],
  domains,
});

describe("domains within a namespace", () => {
  test("a host name and path another service of the namespace serves is refused, naming that service", async () => {
    const shop = await createService(
      s,
      body("shop", [{ host: "shop.test" }, { host: "shop.test", path: "/api" }]),
    );
    const again = await call(
      s.h,
      s.alice,
      "POST",
      "/api/app/v1/service/",
      body("copy", [{ host: "shop.test" }]),
    );
    assert.equal(again.status, 409, again.raw);
    assert.equal(again.body.code, "domain_taken");
    assert.match(again.body.error, /shop\.test is served by the service "shop"/);
    assert.ok(again.body.error.includes(shop.resource_uri), again.body.error);
    assert.equal(again.body.details[0].field, "domains");

    // Another path of the same host is another route: accepted.
    const docs = await call(
      s.h,
      s.alice,
      "POST",
      "/api/app/v1/service/",
      body("docs", [{ host: "shop.test", path: "/docs" }]),
    );
    assert.equal(docs.status, 201, docs.raw);
    // A PATCH adding a pair the other serves is refused and changes nothing.
    const patch = await call(s.h, s.alice, "PATCH", docs.body.resource_uri, {
      domains: [
        { host: "shop.test", path: "/docs" },
        { host: "shop.test", path: "/api/" },
      ],
    });
    assert.equal(patch.status, 409, patch.raw);
    assert.match(patch.body.error, /shop\.test\/api is served by the service "shop"/);
    const kept = (await call(s.h, s.alice, "GET", docs.body.resource_uri)).body;
    assert.deepEqual(
      kept.domains.map((d: { path: string }) => d.path),
      ["/docs"],
      "the refused change wrote nothing",
    );
    // Once the first service lets it go, the other may take it.
    const freed = await call(s.h, s.alice, "PATCH", shop.resource_uri, { domains: [{ host: "shop.test" }] });
    assert.equal(freed.status, 200, freed.raw);
    const taken = await call(s.h, s.alice, "PATCH", docs.body.resource_uri, {
      domains: [{ host: "shop.test", path: "/api" }],
    });
    assert.equal(taken.status, 200, taken.raw);
  });

  test("an uploaded certificate is removed when the last domain of its host name goes", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-cert-"));
    try {
      const { certificate, key } = selfSignedCertificate({
        commonName: "mine.test",
        subjectAltName: "DNS:mine.test",
        days: 30,
        keyFile: path.join(dir, "key.pem"),
        certFile: path.join(dir, "cert.pem"),
      });
      const svc = await createService(s, body("mine", [{ host: "mine.test", tls: "uploaded" }]));
      const put = await call(s.h, s.alice, "PUT", `${svc.resource_uri}certificate/`, {
        host: "mine.test",
        certificate,
        key,
      });
      assert.equal(put.status, 200, put.raw);
      const rows = () => new RouterStore(s.h.store).certificatesOf(["mine.test"]);
      assert.equal((await rows()).length, 1);

      const gone = await call(s.h, s.alice, "PATCH", svc.resource_uri, { domains: [] });
      assert.equal(gone.status, 200, gone.raw);
      await waitFor(
        "the uploaded certificate removed",
        async () => (await rows()).length === 0 || undefined,
        5000,
      );
      const del = await call(s.h, s.alice, "DELETE", `${svc.resource_uri}certificate/mine.test/`);
      assert.equal(del.status, 404, "nothing left to remove");
      // The domain back: no certificate until one is uploaded again (the sealed key did not linger).
      const back = await call(s.h, s.alice, "PATCH", svc.resource_uri, {
        domains: [{ host: "mine.test", tls: "uploaded" }],
      });
      assert.equal(back.status, 200, back.raw);
      const view = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
      assert.notEqual(view.domains[0].certificate?.state, "uploaded");
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("wildcard host names", () => {
  test("a wildcard that would need an ACME certificate is refused saying why; one under VIRTUAL_HOST shows the error", async () => {
    const refused = await call(
      s.h,
      s.alice,
      "POST",
      "/api/app/v1/service/",
      body("wild", [{ host: "*.wild.test" }]),
    );
    assert.equal(refused.status, 400, refused.raw);
    assert.equal(refused.body.details[0].field, "domains[0].tls");
    assert.match(refused.body.details[0].problem, /DNS-01/);
    const plain = await createService(s, body("wild", [{ host: "*.wild.test", tls: "off" }]));
    assert.equal(plain.domains[0].tls, "off");

    // Historical VIRTUAL_HOST under a load balancer: https://*.… is routed, and its certificate
    // is an error on the host and the route at once, never pending (no ACME order is placed).
    const app = await createService(s, {
      ...body("legacy-wild", []),
      container_envvars: [{ key: "VIRTUAL_HOST", value: "https://*.lb.test" }],
    });
    await createService(s, {
      image: "dockercloud/haproxy",
      name: "lb",
      linked_to_service: [{ to_service: app.resource_uri, name: "legacy" }],
    });
    const routes = await waitFor("the wildcard's route", async () => {
      const r = await call(s.h, s.alice, "GET", `${app.resource_uri}routes/`);
      return r.body.objects.length > 0 ? r.body.objects : undefined;
    });
    assert.equal(routes[0].host, "*.lb.test");
    assert.match(routes[0].problem, /only against a DNS-01 challenge/);
    const cert = await waitFor("the wildcard's certificate error", async () => {
      const [c] = await new RouterStore(s.h.store).certificatesOf(["*.lb.test"]);
      return c?.state === "error" ? c : undefined;
    });
    assert.match(String(cert.error), /Upload a certificate for it \(tls: uploaded\), or set tls to off/);
  });
});
