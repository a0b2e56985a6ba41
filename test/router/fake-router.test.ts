// The router on simulated nodes (issue 30), through the API as tenants use it: a service's domains
// reach its namespace's routers (fake routers, the real interface), only routable containers get
// requests, host names belong to the first namespace that claims them, leaving containers are
// drained before their engines stop them, VIRTUAL_HOST under a load balancer, certificate errors
// and uploads on the service, request figures in the API and /metrics.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { FakeRouter } from "../../src/drivers/router/fake-router.ts";
import {
  call,
  containersOf,
  createService,
  deployCluster,
  operate,
  type Sim,
  startSim,
  until,
  uuidOf,
  waitFor,
} from "../services/sim.ts";
import { selfSignedCertificate } from "../support/certificates.ts";

let s: Sim & { users: Record<string, import("../support/harness.ts").Caller> };

before(async () => {
  s = await startSim({
    users: ["bob"],
    env: { BERTH_ROUTER_DRAIN_GRACE_MS: "0", BERTH_ROUTER_INTERVAL_MS: "200" },
  });
  await deployCluster(s, { name: "pool", target_num_nodes: 1 });
  await deployCluster(s, { name: "bobs", target_num_nodes: 1 }, s.users.bob);
});
after(() => s.close());

/** The fake router of alice's node. */
async function aliceRouter(): Promise<FakeRouter> {
  const [node] = await s.h.store.nodes.liveNodes({ namespace: "alice" });
  return waitFor("alice's router", async () => s.h.router.fakes.get(node!.uuid));
}

async function settled(): Promise<void> {
  await s.h.router.controller.settle();
}

async function web(name: string, body: Record<string, unknown> = {}) {
  const svc = await createService(s, {
    image: "busybox:local",
    name,
    run_command: "sleep 100000",
    container_ports: [{ protocol: "tcp", inner_port: 8080 }],
    ...body,
  });
  await operate(s, svc.resource_uri, "start");
  return until(s, svc.resource_uri, "Running");
}

describe("domains", () => {
  test("a service's domains are routed to its running containers on its namespace's routers", async () => {
    const svc = await web("shop", { target_num_containers: 2, domains: [{ host: "Shop.Test" }] });
    assert.deepEqual(svc.domains, [
      {
        host: "shop.test",
        path: "/",
        port: null,
        tls: "acme",
        redirect_https: true,
        sticky: false,
        weight: 0,
        certificate: svc.domains[0].certificate,
      },
    ]);
    await settled();
    const router = await aliceRouter();
    const route = router.current!.routes.find((r) => r.host === "shop.test")!;
    const ips = (await containersOf(s, svc)).map((c) => `${c.private_ip}:8080`).sort();
    assert.deepEqual(route.upstreams.map((u) => u.address).sort(), ips);
    assert.equal(router.request("shop.test", "/").status, 308, "plain HTTP is redirected");
    const seen = new Set([1, 2, 3, 4].map(() => router.request("shop.test", "/", { https: true }).container));
    assert.equal(seen.size, 2, "both containers get requests");
    // Bob's router serves none of alice's domains.
    const [bobNode] = await s.h.store.nodes.liveNodes({ namespace: "bob" });
    assert.equal(s.h.router.fakes.get(bobNode!.uuid)?.current?.routes.length ?? 0, 0);

    const wrong = await call(s.h, s.alice, "PATCH", svc.resource_uri, { domains: [{ host: "-x-" }] });
    assert.equal(wrong.status, 400, wrong.raw);
    assert.equal(wrong.body.details[0].field, "domains[0].host");
  });

  test("a PATCH of domains changes the routes without a redeploy", async () => {
    const svc = await web("blog", { domains: [{ host: "blog.test", tls: "off" }] });
    const patched = await call(s.h, s.alice, "PATCH", svc.resource_uri, {
      domains: [{ host: "blog.test", path: "/v2", tls: "off" }],
    });
    assert.equal(patched.status, 200, patched.raw);
    assert.equal(patched.body.synchronized, true, "domains are not the containers' business");
    await settled();
    const router = await aliceRouter();
    assert.equal(router.request("blog.test", "/").status, 404);
    assert.equal(router.request("blog.test", "/v2/post").status, 200);
  });
});

describe("stack files", () => {
  test("a stack file's service takes `domains:`, claimed like the API's, and its export gives them back", async () => {
    const res = await call(s.h, s.alice, "POST", "/api/app/v1/stack/", {
      name: "site",
      services: [
        {
          name: "front",
          image: "busybox:local",
          domains: [{ host: "stack.test", path: "/app", tls: "off" }],
        },
      ],
    });
    assert.equal(res.status, 201, res.raw);
    const exported = await call(s.h, s.alice, "GET", `${res.body.resource_uri}export/`);
    assert.deepEqual(exported.body.front.domains, [
      {
        host: "stack.test",
        path: "/app",
        port: null,
        tls: "off",
        redirect_https: false,
        sticky: false,
        weight: 0,
      },
    ]);
    const bob = await call(s.h, s.users.bob, "POST", "/api/app/v1/stack/", {
      name: "theirs",
      services: [{ name: "front", image: "busybox:local", domains: [{ host: "stack.test" }] }],
    });
    assert.equal(bob.status, 409, bob.raw);
    assert.equal(bob.body.code, "host_name_taken");
  });
});

describe("host names belong to the first namespace that claims them", () => {
  test("another tenant's claim is refused with 409 and a sentence saying what to do", async () => {
    await createService(s, { image: "busybox:local", name: "mine", domains: [{ host: "claimed.test" }] });
    const res = await call(s.h, s.users.bob, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      domains: [{ host: "claimed.test" }],
    });
    assert.equal(res.status, 409, res.raw);
    assert.equal(res.body.code, "host_name_taken");
    assert.match(res.body.error, /claimed\.test belongs to another namespace: choose another host name/);
    const count = await call(s.h, s.users.bob, "GET", "/api/app/v1/service/");
    assert.equal(count.body.meta.total_count, 0, "nothing half-written");
    const update = await call(s.h, s.users.bob, "POST", "/api/app/v1/service/", { image: "busybox:local" });
    const patch = await call(s.h, s.users.bob, "PATCH", update.body.resource_uri, {
      domains: [{ host: "claimed.test" }],
    });
    assert.equal(patch.status, 409, patch.raw);
  });

  test("a name its holder no longer serves moves; a reserved one does not; only administrators reserve", async () => {
    const old = await createService(s, {
      image: "busybox:local",
      name: "old",
      domains: [{ host: "moves.test" }],
    });
    await operate(s, old.resource_uri, "terminate");
    const taken = await call(s.h, s.users.bob, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "taker",
      domains: [{ host: "moves.test" }],
    });
    assert.equal(taken.status, 201, taken.raw);

    const refused = await call(s.h, s.alice, "POST", "/api/v1.1/hostnames/", {
      host: "vip.test",
      namespace: "alice",
    });
    assert.equal(refused.status, 403, refused.raw);
    const reserved = await call(s.h, s.h.admin, "POST", "/api/v1.1/hostnames/", {
      host: "vip.test",
      namespace: "bob",
    });
    assert.equal(reserved.status, 201, reserved.raw);
    assert.deepEqual([reserved.body.namespace, reserved.body.reserved], ["bob", true]);
    const alice = await call(s.h, s.alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      domains: [{ host: "vip.test" }],
    });
    assert.equal(alice.status, 409, alice.raw);
    assert.match(alice.body.error, /reserved by an administrator for another namespace/);
    const bob = await call(s.h, s.users.bob, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "vip",
      domains: [{ host: "vip.test" }],
    });
    assert.equal(bob.status, 201, bob.raw);
    const list = await call(s.h, s.h.admin, "GET", "/api/v1.1/hostnames/?namespace=bob");
    assert.deepEqual(list.body.objects.map((c: { host: string }) => c.host).sort(), [
      "moves.test",
      "vip.test",
    ]);
  });
});

describe("drain before leave", () => {
  /** Records, at each engine stop or removal, whether the alice router still sent requests to that engine container. */
  async function watchStops(): Promise<{ stillRouted: string[]; stops: number; undo(): void }> {
    const router = await aliceRouter();
    const out = { stillRouted: [] as string[], stops: 0, undo: () => {} };
    const undos: (() => void)[] = [];
    for (const engine of s.engines.values()) {
      const stop = engine.stopContainer.bind(engine);
      const remove = engine.removeContainer.bind(engine);
      const check = async (id: string) => {
        const rows = await s.h.store.services.liveContainers({ namespace: "alice" });
        const row = rows.find((c) => c.engine_id === id);
        out.stops += 1;
        const routed = router.current?.routes.some((r) => r.upstreams.some((u) => u.container === row?.uuid));
        if (row && routed && row.engine_id === id) out.stillRouted.push(row.name);
      };
      engine.stopContainer = async (id, o) => {
        await check(id);
        return stop(id, o);
      };
      engine.removeContainer = async (id, o) => {
        await check(id);
        return remove(id, o);
      };
      undos.push(() => {
        engine.stopContainer = stop;
        engine.removeContainer = remove;
      });
    }
    out.undo = () => {
      for (const u of undos) u();
    };
    return out;
  }

  test("stop, scale down and redeploy take each container out of the routes before its engine stops it", async () => {
    const svc = await web("api", { target_num_containers: 3, domains: [{ host: "api.test", tls: "off" }] });
    await settled();
    const watch = await watchStops();
    try {
      const scaled = await call(s.h, s.alice, "PATCH", svc.resource_uri, { target_num_containers: 2 });
      assert.equal(scaled.status, 200, scaled.raw);
      await operate(s, svc.resource_uri, "scale");
      await operate(s, svc.resource_uri, "redeploy");
      await settled();
      const router = await aliceRouter();
      assert.equal(
        router.current!.routes.find((r) => r.host === "api.test")!.upstreams.length,
        2,
        "both redeployed containers are routed again",
      );
      await operate(s, svc.resource_uri, "stop");
      assert.ok(watch.stops >= 5, `engine stops and removals seen: ${watch.stops}`);
      assert.deepEqual(watch.stillRouted, [], "no engine container stopped while routed");
    } finally {
      watch.undo();
    }
    await settled();
    const router = await aliceRouter();
    assert.equal(router.request("api.test", "/").status, 502, "a stopped service has no upstream");
  });
});

describe("dockercloud/haproxy's variables", () => {
  test("VIRTUAL_HOST of a service linked from a load balancer is routed, with EXCLUDE_PORTS, VIRTUAL_HOST_WEIGHT and FORCE_SSL", async () => {
    const app = await web("legacy", {
      container_ports: [
        { protocol: "tcp", inner_port: 9000 },
        { protocol: "tcp", inner_port: 8080 },
      ],
      container_envvars: [
        { key: "VIRTUAL_HOST", value: "legacy.test, https://secure.legacy.test" },
        { key: "EXCLUDE_PORTS", value: "9000" },
        { key: "VIRTUAL_HOST_WEIGHT", value: "3" },
        { key: "FORCE_SSL", value: "true" },
      ],
    });
    await settled();
    const router = await aliceRouter();
    assert.equal(router.match("legacy.test", "/"), undefined, "no load balancer links to it yet");
    await createService(s, {
      image: "dockercloud/haproxy",
      name: "lb",
      linked_to_service: [{ to_service: app.resource_uri, name: "legacy" }],
    });
    await settled();
    const route = router.match("legacy.test", "/")!;
    assert.deepEqual(
      [route.source, route.port, route.weight, route.tls, route.redirect_https],
      ["virtual_host", 8080, 3, "acme", true],
    );
    assert.ok(router.match("secure.legacy.test", "/"));
    const routes = await call(s.h, s.alice, "GET", `${app.resource_uri}routes/`);
    assert.deepEqual(routes.body.objects.map((r: { host: string }) => r.host).sort(), [
      "legacy.test",
      "secure.legacy.test",
    ]);
    // The variables' host names are claimed like domains.
    const bob = await call(s.h, s.users.bob, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      container_envvars: [{ key: "VIRTUAL_HOST", value: "legacy.test" }],
    });
    assert.equal(bob.status, 409, bob.raw);
  });
});

describe("certificates", () => {
  test("a host name whose ACME order fails shows the error on the service, with an event", async () => {
    const router = await aliceRouter();
    router.failingOrders.set(
      "broken.test",
      "urn:ietf:params:acme:error:rejectedIdentifier: policy forbids issuing for name",
    );
    const before = await s.h.store.latestRevision();
    const svc = await web("broken", { domains: [{ host: "broken.test" }] });
    const shown = await waitFor("the certificate error", async () => {
      await settled();
      const v = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
      return v.domains[0].certificate?.state === "error" ? v : undefined;
    });
    assert.match(shown.domains[0].certificate.error, /rejectedIdentifier/);
    const events = await s.h.store.changesSince(before, 1000, ["service"]);
    assert.ok(
      events.some((e) => e.resource_uri === svc.resource_uri && e.action === "update"),
      "an update event of the service tells event subscribers",
    );
    const list = await call(s.h, s.alice, "GET", "/api/app/v1/service/?name=broken");
    assert.equal(list.body.objects[0].domains[0].certificate.state, "error", "lists show it too");
  });

  test("an uploaded certificate is checked, sealed at rest and given to the routers", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-cert-"));
    try {
      const { certificate, key } = selfSignedCertificate({
        commonName: "own.test",
        subjectAltName: "DNS:own.test",
        days: 30,
        keyFile: path.join(dir, "key.pem"),
        certFile: path.join(dir, "cert.pem"),
      });
      const svc = await web("own", { domains: [{ host: "own.test", tls: "uploaded" }] });
      const wrongHost = await call(s.h, s.alice, "PUT", `${svc.resource_uri}certificate/`, {
        host: "shop.test",
        certificate,
        key,
      });
      assert.equal(wrongHost.status, 400, wrongHost.raw);
      const garbage = await call(s.h, s.alice, "PUT", `${svc.resource_uri}certificate/`, {
        host: "own.test",
        certificate: "x",
        key,
      });
      assert.equal(garbage.status, 400, garbage.raw);
      assert.equal(garbage.body.details[0].field, "certificate");
      const put = await call(s.h, s.alice, "PUT", `${svc.resource_uri}certificate/`, {
        host: "own.test",
        certificate,
        key,
      });
      assert.equal(put.status, 200, put.raw);
      assert.equal(put.body.state, "uploaded");
      const row = (await s.h.store.db
        .selectFrom("router_certificates")
        .selectAll()
        .where("host", "=", "own.test")
        .executeTakeFirst())!;
      assert.ok(
        !row.sealed_cert!.includes("BEGIN") && !row.sealed_key!.includes("PRIVATE"),
        "sealed at rest",
      );
      await settled();
      const router = await aliceRouter();
      assert.equal(router.current!.certificates.find((c) => c.host === "own.test")?.keyPem, key);
      const view = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
      assert.equal(view.domains[0].certificate.state, "uploaded");
      const other = await call(
        s.h,
        s.users.bob,
        "PUT",
        `/api/app/v1/alice/service/${uuidOf(svc.resource_uri)}/certificate/`,
        { host: "own.test", certificate, key },
      );
      assert.equal(other.status, 404, other.raw);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("request figures", () => {
  test("per-route requests, errors and latency in the API and on /metrics", async () => {
    const svc = await web("stats", { domains: [{ host: "stats.test", tls: "off" }] });
    await settled();
    const router = await aliceRouter();
    for (let i = 0; i < 10; i++) router.request("stats.test", "/", { latencyS: 0.02 });
    const res = await call(s.h, s.alice, "GET", `${svc.resource_uri}routes/`);
    assert.equal(res.status, 200, res.raw);
    const [r] = res.body.objects;
    assert.equal(r.requests_total, 10);
    assert.equal(r.latency_p99_ms, 25);
    assert.equal(r.error_rate, 0);
    const metrics = await s.h.app.inject({ method: "GET", url: "/metrics" });
    assert.match(metrics.body, /berth_route_requests_total\{[^}]*host="stats\.test"[^}]*\} 10/);
  });
});

describe("certificates due for renewal", () => {
  test("a certificate the router renewed is shown with its new expiry, with an event, even seconds after the old one", async () => {
    const router = await aliceRouter();
    const svc = await web("renewed", { domains: [{ host: "renewed.test" }] });
    const first = await waitFor("the certificate issued", async () => {
      const v = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
      return v.domains[0].certificate?.state === "issued" ? v.domains[0].certificate : undefined;
    });
    const before = await s.h.store.latestRevision();
    // A renewal 20 s after the first issue: a new serial, an expiry 20 s later (closer than two nodes' own copies).
    router.renew("renewed.test", Date.parse(first.expires) - router.lifetimeMs + 20_000);
    const shown = await waitFor("the renewed certificate shown", async () => {
      await settled();
      const v = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
      return v.domains[0].certificate?.expires !== first.expires ? v.domains[0].certificate : undefined;
    });
    assert.equal(shown.state, "issued");
    assert.equal(Date.parse(shown.expires) - Date.parse(first.expires), 20_000);
    const events = await s.h.store.changesSince(before, 1000, ["service"]);
    assert.ok(
      events.some((e) => e.resource_uri === svc.resource_uri && e.action === "update"),
      "an update event of the service tells event subscribers of the renewal",
    );
  });

  test("a certificate the router has not renewed in time shows as expiring, and a certificate_expiring alert fires on its service", async () => {
    const router = await aliceRouter();
    // What a router whose renewals keep failing reports: the certificate it holds, 10 days from its end.
    router.lifetimeMs = 10 * 86_400_000;
    try {
      const svc = await web("renew", { domains: [{ host: "renew.test" }] });
      const shown = await waitFor("the certificate shown expiring", async () => {
        const v = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
        return v.domains[0].certificate?.state === "expiring" ? v.domains[0].certificate : undefined;
      });
      assert.match(shown.error, /the router has not renewed it/);
      assert.ok(Date.parse(shown.expires) - Date.now() < 11 * 86_400_000);
      const rule = await call(s.h, s.alice, "POST", "/api/app/v1/alert/", {
        name: "certificates",
        kind: "certificate_expiring",
        params: { days: 14 },
        channels: [{ type: "email", to: "alice@example.test" }],
      });
      assert.equal(rule.status, 201, rule.raw);
      await s.h.alertNotifier.evaluate();
      const incidents = (await call(s.h, s.alice, "GET", `${rule.body.resource_uri}incidents/`)).body.objects;
      // (The fake router's shorter lifetime is every host's of alice's: her other services' too.)
      const mine = incidents.find((i: { subject: string }) => i.subject === svc.resource_uri);
      assert.ok(mine, JSON.stringify(incidents));
      assert.match(mine.summary, /the certificate of renew\.test \(expiring\) expires at /);

      // Renewed (a certificate good for 90 days again): issued, and the incident resolves.
      router.lifetimeMs = 90 * 86_400_000;
      await waitFor("the certificate shown issued again", async () => {
        const v = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
        return v.domains[0].certificate?.state === "issued" ? true : undefined;
      });
      // Alice's other hosts come back to 90 days at their own router check: every incident of the
      // rule resolves once each has (an evaluation before that still sees one of them expiring).
      const after = await waitFor("every incident resolved", async () => {
        await settled();
        await s.h.alertNotifier.evaluate();
        const all = (await call(s.h, s.alice, "GET", `${rule.body.resource_uri}incidents/`)).body.objects;
        return all.every((i: { state: string }) => i.state === "resolved") ? all : undefined;
      });
      assert.ok(after.some((i: { subject: string }) => i.subject === svc.resource_uri));
    } finally {
      router.lifetimeMs = 90 * 86_400_000;
    }
  });
});
