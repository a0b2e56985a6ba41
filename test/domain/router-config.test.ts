// The router's rules as one pure function (domain/router-config.ts, domain/domains.ts): membership
// by state, health and drains; claims; overlapping domains; dockercloud/haproxy's variables.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseDomains, parseVirtualHost, virtualHostDomains } from "../../src/domain/domains.ts";
import {
  buildRoutes,
  type RouterContainer,
  type RouterService,
  routable,
} from "../../src/domain/router-config.ts";

const svc = (over: Partial<RouterService> & { uuid: string }): RouterService => ({
  namespace: "alice",
  name: over.uuid,
  state: "Running",
  created: 1,
  ...over,
  spec: {
    image_name: "web:latest",
    container_ports: [{ protocol: "tcp", inner_port: 8080, outer_port: null, published: false }],
    container_envvars: [],
    linked_to_service: [],
    domains: [],
    ...over.spec,
  },
});
const ctr = (over: Partial<RouterContainer> & { uuid: string }): RouterContainer => ({
  service_uuid: "web",
  name: over.uuid,
  state: "Running",
  desired: "running",
  phase: null,
  private_ip: `10.0.0.${over.uuid.length}`,
  generation: "g1",
  health: null,
  ...over,
});
const domain = (host: string, extra: object = {}) =>
  parseDomains([{ host, ...extra }], (f, p) => assert.fail(`${f}: ${p}`))[0]!;
const claims = (...hosts: string[]) => new Map(hosts.map((h) => [h, "alice"]));

describe("membership", () => {
  test("only running, wanted-running, unmoved, healthy (or unchecked), undrained containers receive requests", () => {
    const none = new Set<string>();
    assert.equal(routable(ctr({ uuid: "a" }), none), true, "no health check");
    assert.equal(routable(ctr({ uuid: "a", health: "healthy" }), none), true);
    assert.equal(routable(ctr({ uuid: "a", health: "starting" }), none), false, "check not passed yet");
    assert.equal(routable(ctr({ uuid: "a", health: "unhealthy" }), none), false);
    assert.equal(routable(ctr({ uuid: "a", state: "Starting" }), none), false);
    assert.equal(routable(ctr({ uuid: "a", desired: "stopped" }), none), false, "a stop was asked");
    assert.equal(routable(ctr({ uuid: "a", phase: "redeploying" }), none), false);
    assert.equal(routable(ctr({ uuid: "a", private_ip: "" }), none), false);
    assert.equal(routable(ctr({ uuid: "a" }), new Set(["a:g1"])), false, "being drained");
    assert.equal(
      routable(ctr({ uuid: "a", generation: "g2" }), new Set(["a:g1"])),
      true,
      "its redeployed successor",
    );
  });

  test("a route's upstreams are its service's routable containers on the domain's port", () => {
    const out = buildRoutes({
      services: [svc({ uuid: "web", spec: { domains: [domain("app.test")] } as RouterService["spec"] })],
      containers: [ctr({ uuid: "c1" }), ctr({ uuid: "c22", health: "unhealthy" }), ctr({ uuid: "c333" })],
      claims: claims("app.test"),
      draining: new Set(["c333:g1"]),
    });
    assert.deepEqual(
      out.routes.map((r) => [
        r.host,
        r.path,
        r.port,
        r.tls,
        r.redirect_https,
        r.upstreams.map((u) => u.address),
      ]),
      [["app.test", "/", 8080, "acme", true, ["10.0.0.2:8080"]]],
    );
  });
});

describe("claims and overlaps", () => {
  test("a host name the namespace does not hold is not routed, and says why", () => {
    const out = buildRoutes({
      services: [svc({ uuid: "web", spec: { domains: [domain("theirs.test")] } as RouterService["spec"] })],
      containers: [ctr({ uuid: "c1" })],
      claims: new Map([["theirs.test", "bob"]]),
      draining: new Set(),
    });
    assert.equal(out.routes.length, 0);
    assert.deepEqual(out.problems, [
      { service: "web", host: "theirs.test", problem: "theirs.test belongs to another namespace" },
    ]);
  });

  test("the older service keeps a host and path two services ask for; routes are ordered weight, exact host, longest path", () => {
    const out = buildRoutes({
      services: [
        svc({ uuid: "new", created: 2, spec: { domains: [domain("app.test")] } as RouterService["spec"] }),
        svc({
          uuid: "old",
          created: 1,
          spec: {
            domains: [
              domain("app.test"),
              domain("app.test", { path: "/api/" }),
              domain("*.app.test", { weight: 1, tls: "uploaded" }),
            ],
          } as RouterService["spec"],
        }),
      ],
      containers: [],
      claims: claims("app.test", "*.app.test"),
      draining: new Set(),
    });
    assert.deepEqual(
      out.routes.map((r) => `${r.service} ${r.host}${r.path}`),
      ["old *.app.test/", "old app.test/api", "old app.test/"],
    );
    assert.equal(out.problems[0]?.problem, "app.test/ is served by another service");
  });
});

describe("dockercloud/haproxy's VIRTUAL_HOST", () => {
  test("entries: scheme, wildcard host, port, path prefix", () => {
    assert.deepEqual(parseVirtualHost("a.test, https://b.test/api/*, ws://*.c.test:8080, -bad-"), {
      hosts: [
        { scheme: "http", host: "a.test", port: null, path: "/" },
        { scheme: "https", host: "b.test", port: null, path: "/api" },
        { scheme: "ws", host: "*.c.test", port: 8080, path: "/" },
      ],
      bad: ["-bad-"],
    });
  });

  test("VIRTUAL_HOST_WEIGHT orders, EXCLUDE_PORTS picks the port, FORCE_SSL redirects, COOKIE is sticky", () => {
    const env = [
      { key: "VIRTUAL_HOST", value: "http://a.test, https://b.test/api*" },
      { key: "VIRTUAL_HOST_WEIGHT", value: "5" },
      { key: "EXCLUDE_PORTS", value: "9000" },
    ];
    const ports = [
      { protocol: "tcp", inner_port: 9000 },
      { protocol: "tcp", inner_port: 8080 },
    ];
    assert.deepEqual(virtualHostDomains(env, ports), [
      { host: "a.test", path: "/", port: 8080, tls: "off", redirect_https: false, sticky: false, weight: 5 },
      {
        host: "b.test",
        path: "/api",
        port: 8080,
        tls: "acme",
        redirect_https: false,
        sticky: false,
        weight: 5,
      },
    ]);
    const forced = virtualHostDomains(
      [...env, { key: "FORCE_SSL", value: "yes" }, { key: "COOKIE", value: "SRV insert indirect nocache" }],
      ports,
    );
    assert.ok(forced.every((d) => d.tls === "acme" && d.redirect_https && d.sticky));
    assert.deepEqual(
      virtualHostDomains(
        [
          { key: "VIRTUAL_HOST", value: "a.test" },
          { key: "EXCLUDE_PORTS", value: "9000,8080" },
        ],
        ports,
      ),
      [],
      "every port excluded",
    );
  });

  test("VIRTUAL_HOST routes only services a live load balancer links to", () => {
    const web = svc({
      uuid: "web",
      spec: { container_envvars: [{ key: "VIRTUAL_HOST", value: "a.test" }] } as RouterService["spec"],
    });
    const lb = svc({
      uuid: "lb",
      spec: {
        image_name: "dockercloud/haproxy:latest",
        linked_to_service: [{ to_service: "web", name: "web" }],
      } as RouterService["spec"],
    });
    const input = {
      containers: [ctr({ uuid: "c1" })],
      claims: claims("a.test"),
      draining: new Set<string>(),
    };
    assert.deepEqual(buildRoutes({ ...input, services: [web] }).routes, [], "no load balancer");
    const routes = buildRoutes({ ...input, services: [web, lb] }).routes;
    assert.deepEqual(
      routes.map((r) => [r.host, r.source, r.tls, r.upstreams.length]),
      [["a.test", "virtual_host", "off", 1]],
    );
    const gone = { ...lb, state: "Terminated" };
    assert.deepEqual(
      buildRoutes({ ...input, services: [web, gone] }).routes,
      [],
      "the load balancer was terminated",
    );
  });
});
