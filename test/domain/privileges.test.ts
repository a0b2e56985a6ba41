// The classification of options that reach the node (domain/privileges.ts), and what a policy allows.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { buildContainerSpec } from "../../src/domain/container-spec.ts";
import {
  ALL_PRIVILEGES,
  allows,
  canonicalPrivileges,
  capabilityName,
  engineSpecReach,
  introduced,
  NO_PRIVILEGES,
  normalHostPath,
  refused,
  serviceReach,
  underPrefix,
} from "../../src/domain/privileges.ts";
import { DEFAULT_SPEC, type ServiceSpec } from "../../src/domain/service.ts";

const spec = (over: Partial<ServiceSpec> = {}): ServiceSpec => ({
  ...DEFAULT_SPEC,
  image_name: "x:latest",
  ...over,
});

const EVERYTHING = spec({
  privileged: true,
  net: "host",
  pid: "host",
  cap_add: ["CHOWN", "sys_admin", "CAP_NET_ADMIN", "all"],
  devices: ["/dev/sda:/dev/sda"],
  security_opt: ["seccomp=unconfined"],
  cgroup_parent: "/",
  bindings: [
    { host_path: null, container_path: "/data", rewritable: true, volumes_from: null },
    { host_path: "/srv/../", container_path: "/host", rewritable: true, volumes_from: null },
    { host_path: null, container_path: null, rewritable: true, volumes_from: "a-uuid" },
  ],
});

function engineSpec(s: ServiceSpec) {
  return buildContainerSpec({
    spec: s,
    service: { uuid: "s", name: "web", resource_uri: "/s/", namespace: "alice" },
    container: { uuid: "c0000000-0000", name: "web-1", number: 1, resource_uri: "/c/" },
    node: { uuid: "n", resource_uri: "/n/", external_fqdn: "n.example" },
    links: [],
    volumesFrom: ["other-engine-id"],
    platform: { restHost: "http://x", streamHost: "ws://x" },
  });
}

describe("options that reach the node", () => {
  test("a definition's: each field, named as Create service names it; defaults, volumes and volumes_from are not", () => {
    assert.deepEqual(
      serviceReach(EVERYTHING).map((r) => [r.field, r.grant, r.value]),
      [
        ["privileged", "privileged", "true"],
        ["net", "host_network", "host"],
        ["pid", "host_pid", "host"],
        ["cap_add[1]", "capability", "SYS_ADMIN"],
        ["cap_add[2]", "capability", "NET_ADMIN"],
        ["cap_add[3]", "capability", "ALL"],
        ["devices[0]", "devices", "/dev/sda:/dev/sda"],
        ["security_opt[0]", "security_opt", "seccomp=unconfined"],
        ["cgroup_parent", "cgroup_parent", "/"],
        ["bindings[1].host_path", "host_path", "/"],
      ],
    );
    assert.deepEqual(serviceReach(spec({ cap_add: ["NET_BIND_SERVICE", "kill"], cap_drop: ["ALL"] })), []);
  });

  test("an engine spec's: the same options, read from what the engine would receive", () => {
    assert.deepEqual(
      engineSpecReach(engineSpec(EVERYTHING)).map((r) => [r.field, r.grant, r.value]),
      serviceReach(EVERYTHING).map((r) => [r.field, r.grant, r.value]),
    );
    assert.deepEqual(engineSpecReach(engineSpec(spec({ bindings: EVERYTHING.bindings.slice(0, 1) }))), []);
    assert.deepEqual(
      engineSpecReach({ binds: ["shared:/data"], networkMode: "container:abc" }).map((r) => r.value),
      ["container:abc", "volume shared"],
    );
  });

  test("capability names are read as the engine reads them", () => {
    assert.equal(capabilityName("cap_sys_admin"), "SYS_ADMIN");
    assert.equal(capabilityName(" net_admin "), "NET_ADMIN");
  });

  test("host paths: .. and slashes resolved, prefixes matched segment by segment", () => {
    assert.equal(normalHostPath("/srv//data/../x/"), "/srv/x");
    assert.equal(normalHostPath("/srv/../../.."), "/");
    assert.ok(underPrefix("/srv/data", "/srv"));
    assert.ok(underPrefix("/srv", "/srv/"));
    assert.ok(!underPrefix("/srvx", "/srv"));
    assert.ok(!underPrefix("/srv/../etc", "/srv"));
    assert.ok(underPrefix("/anything", "/"));
  });
});

describe("policies", () => {
  test("nothing is allowed by default; everything by ALL_PRIVILEGES", () => {
    const reach = serviceReach(EVERYTHING);
    assert.equal(refused("alice", NO_PRIVILEGES, reach).length, reach.length);
    assert.deepEqual(refused("alice", ALL_PRIVILEGES, reach), []);
  });

  test('a capability list allows those it names, never ALL; "all" allows ALL', () => {
    const p = canonicalPrivileges({ capabilities: ["net_admin"] });
    assert.deepEqual(p.capabilities, ["NET_ADMIN"]);
    assert.ok(allows(p, { field: "cap_add[0]", grant: "capability", value: "NET_ADMIN" }));
    assert.ok(!allows(p, { field: "cap_add[0]", grant: "capability", value: "SYS_ADMIN" }));
    assert.ok(
      !allows(canonicalPrivileges({ capabilities: ["ALL"] }), {
        field: "c",
        grant: "capability",
        value: "ALL",
      }),
    );
    assert.ok(
      allows(canonicalPrivileges({ capabilities: "all" }), { field: "c", grant: "capability", value: "ALL" }),
    );
  });

  test("host paths allowed under a prefix only; a named volume never", () => {
    const p = canonicalPrivileges({ host_paths: ["/srv/data/"] });
    const at = (value: string) => ({ field: "b", grant: "host_path" as const, value });
    assert.ok(allows(p, at("/srv/data")));
    assert.ok(allows(p, at("/srv/data/x")));
    assert.ok(!allows(p, at("/srv/datax")));
    assert.ok(!allows(p, at("/srv")));
    assert.ok(!allows(ALL_PRIVILEGES, at("volume shared")));
  });

  test("an update is judged on what it introduces or changes", () => {
    const before = serviceReach(spec({ privileged: true, cap_add: ["NET_ADMIN"] }));
    const after = serviceReach(spec({ privileged: true, cap_add: ["NET_ADMIN", "SYS_TIME"], net: "host" }));
    assert.deepEqual(
      introduced(before, after).map((r) => r.field),
      ["net", "cap_add[1]"],
    );
  });

  test("a refusal names the field, the namespace and who can allow it", () => {
    const [p] = refused("acme", NO_PRIVILEGES, serviceReach(spec({ bindings: EVERYTHING.bindings })));
    assert.equal(p?.field, "bindings[1].host_path");
    assert.match(
      p?.problem ?? "",
      /^host path \/: namespace acme is not allowed bind mounts of host paths; an administrator can allow it/,
    );
  });
});
