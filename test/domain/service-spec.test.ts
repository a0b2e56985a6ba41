// Service definitions (spec "Create service", "Update service"; CONTRACT §6 details, §10 ports):
// defaults, every refusal naming its field (also under a stack's prefix), update rules, and the
// wire views of ports and references.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { ServiceCreateBody } from "../../src/contract/service.ts";
import { ApiError } from "../../src/domain/errors.ts";
import { DEFAULT_SPEC, type ServicePort, type ServiceSpec } from "../../src/domain/service.ts";
import type { SpecContext } from "../../src/domain/service-rules.ts";
import { definitionChanged, parseCreate, parseUpdate } from "../../src/domain/service-spec.ts";
import {
  containerFqdn,
  linkedFromService,
  portView,
  serviceFqdn,
  serviceUriFields,
} from "../../src/domain/service-views.ts";
import { ShellSyntaxError, splitShellWords } from "../../src/domain/shell-words.ts";

const DB_URI = "/api/app/v1/alice/service/uuid-db/";
const DATA_URI = "/api/app/v1/alice/service/uuid-data/";
const SERVICES: Record<string, { uuid: string; name: string }> = {
  [DB_URI]: { uuid: "uuid-db", name: "postgres" },
  [DATA_URI]: { uuid: "uuid-data", name: "data" },
};
const ctx: SpecContext = { resolveService: (ref) => SERVICES[ref] };

/** Runs `fn`, expecting a 400 invalid_field whose details name `field` (with `problem` when given). */
function assertRefused(fn: () => unknown, field: string, problem?: RegExp): ApiError {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof ApiError, `expected an ApiError, got ${String(error)}`);
    assert.equal(error.kind, "bad_request");
    assert.equal(error.code, "invalid_field");
    const detail = error.details?.find((d) => d.field === field);
    assert.ok(detail, `expected a problem with ${field}, got ${JSON.stringify(error.details)}`);
    if (problem) assert.match(detail.problem, problem);
    assert.ok(error.message.length > 0);
    return error;
  }
  assert.fail(`expected a refusal naming ${field}`);
}

/** Bodies a client could send, also ones the static type forbids (stacks pass untyped input). */
const create = (extra: Record<string, unknown>, prefix = "") =>
  parseCreate({ image: "nginx", ...extra } as ServiceCreateBody, ctx, prefix);

describe("normalizeCreate: defaults", () => {
  test("an image alone gives the spec's defaults, the name from the image and the latest tag", () => {
    const out = parseCreate({ image: "nginx" }, ctx);
    assert.equal(out.name, "nginx");
    assert.equal(out.nickname, "nginx");
    assert.equal(out.target_num_containers, 1);
    assert.deepEqual(out.spec, { ...DEFAULT_SPEC, image_name: "nginx:latest" });
  });

  test("the default name drops registry, namespace and tag and is a valid DNS label", () => {
    assert.equal(create({ image: "registry.example.com:5000/team/My_App:1.2" }).name, "my-app");
    assert.equal(
      create({ image: "registry.example.com:5000/team/app:1.2" }).spec.image_name,
      "registry.example.com:5000/team/app:1.2",
    );
    const long = create({ image: `team/${"a".repeat(80)}` }).name;
    assert.equal(long.length, 59);
  });

  test("nickname defaults to the name; an explicit name and nickname are kept", () => {
    const out = create({ name: "web", nickname: "Front end" });
    assert.deepEqual([out.name, out.nickname], ["web", "Front end"]);
    assert.equal(create({ name: "web", nickname: "" }).nickname, "web");
  });

  test("EVERY_NODE ignores target_num_containers (the platform counts nodes)", () => {
    const out = create({ deployment_strategy: "EVERY_NODE", target_num_containers: 5 });
    assert.equal(out.target_num_containers, 0);
    assert.equal(out.spec.deployment_strategy, "EVERY_NODE");
  });

  test("ports: outer_port 0 means dynamic, published defaults to false", () => {
    const { spec } = create({
      container_ports: [
        { protocol: "tcp", inner_port: 80, outer_port: 0, published: true },
        { protocol: "udp", inner_port: 53 },
        { protocol: "tcp", inner_port: 443, outer_port: 8443, published: true },
      ],
    });
    assert.deepEqual(spec.container_ports, [
      { protocol: "tcp", inner_port: 80, outer_port: null, published: true },
      { protocol: "udp", inner_port: 53, outer_port: null, published: false },
      { protocol: "tcp", inner_port: 443, outer_port: 8443, published: true },
    ]);
  });

  test("links store the target's uuid and default their name to the target's name", () => {
    const { spec } = create({
      linked_to_service: [{ to_service: DB_URI }, { to_service: DATA_URI, name: "files" }],
    });
    assert.deepEqual(spec.linked_to_service, [
      { to_service: "uuid-db", name: "postgres" },
      { to_service: "uuid-data", name: "files" },
    ]);
  });

  test("bindings: rewritable defaults to true, an empty host_path is unset, volumes_from stores the uuid", () => {
    const { spec } = create({
      bindings: [
        { container_path: "/data" },
        { host_path: "", container_path: "/cache", rewritable: false },
        { host_path: "/srv/www", container_path: "/var/www" },
        { volumes_from: DATA_URI },
      ],
    });
    assert.deepEqual(spec.bindings, [
      { host_path: null, container_path: "/data", rewritable: true, volumes_from: null },
      { host_path: null, container_path: "/cache", rewritable: false, volumes_from: null },
      { host_path: "/srv/www", container_path: "/var/www", rewritable: true, volumes_from: null },
      { host_path: null, container_path: null, rewritable: true, volumes_from: "uuid-data" },
    ]);
  });

  test("the misspelled aliases secuirty_opt and cgroup_name are accepted", () => {
    const { spec } = create({ secuirty_opt: ["label:disable"], cgroup_name: "/berth" });
    assert.deepEqual(spec.security_opt, ["label:disable"]);
    assert.equal(spec.cgroup_parent, "/berth");
    assert.deepEqual(create({ security_opt: ["a"], secuirty_opt: ["a"] }).spec.security_opt, ["a"]);
  });

  test("tags are names, from objects or strings, without duplicates; roles are deduplicated", () => {
    const { spec } = create({ tags: [{ name: "web" }, "eu", "web"], roles: ["global", "global"] });
    assert.deepEqual(spec.tags, ["web", "eu"]);
    assert.deepEqual(spec.roles, ["global"]);
  });

  test("resource numbers: 0 means unset, memory_swap -1 means unlimited swap", () => {
    const { spec } = create({ memory: 0, cpu_shares: 0, memory_swap: -1 });
    assert.deepEqual([spec.memory, spec.cpu_shares, spec.memory_swap], [null, null, -1]);
    const set = create({ memory: 512, memory_swap: 1024, cpu_shares: 512, cpuset: "0-1,3" }).spec;
    assert.deepEqual([set.memory, set.memory_swap, set.cpu_shares, set.cpuset], [512, 1024, 512, "0-1,3"]);
  });

  test("every other settable field is kept as given", () => {
    const { spec } = create({
      run_command: 'sh -c "echo hi"',
      entrypoint: "/init",
      container_envvars: [{ key: "MODE", value: "prod" }],
      autorestart: "ALWAYS",
      autodestroy: "ON_SUCCESS",
      sequential_deployment: true,
      privileged: true,
      autoredeploy: true,
      net: "host",
      pid: "host",
      working_dir: "/app",
      user: "www-data",
      hostname: "front",
      domainname: "example.com",
      tty: true,
      stdin_open: true,
      dns: ["1.1.1.1", "2606:4700:4700::1111"],
      dns_search: ["example.com"],
      cap_add: ["NET_ADMIN"],
      cap_drop: ["MKNOD"],
      devices: ["/dev/fuse:/dev/fuse:rwm", "/dev/sda:/dev/xvda"],
      extra_hosts: ["db.example:10.0.0.5", "v6.example:fd00::1"],
      labels: { team: "web" },
      read_only: true,
    });
    assert.equal(spec.run_command, 'sh -c "echo hi"');
    assert.equal(spec.entrypoint, "/init");
    assert.deepEqual(spec.container_envvars, [{ key: "MODE", value: "prod" }]);
    assert.deepEqual(
      [spec.autorestart, spec.autodestroy, spec.sequential_deployment, spec.privileged, spec.autoredeploy],
      ["ALWAYS", "ON_SUCCESS", true, true, true],
    );
    assert.deepEqual([spec.net, spec.pid, spec.working_dir, spec.user], ["host", "host", "/app", "www-data"]);
    assert.deepEqual(
      [spec.hostname, spec.domainname, spec.tty, spec.stdin_open],
      ["front", "example.com", true, true],
    );
    assert.deepEqual(spec.dns, ["1.1.1.1", "2606:4700:4700::1111"]);
    assert.deepEqual(spec.devices, ["/dev/fuse:/dev/fuse:rwm", "/dev/sda:/dev/xvda"]);
    assert.deepEqual(spec.extra_hosts, ["db.example:10.0.0.5", "v6.example:fd00::1"]);
    assert.deepEqual(spec.labels, { team: "web" });
    assert.equal(spec.read_only, true);
  });

  test("an empty run_command or entrypoint means the image's own", () => {
    const { spec } = create({ run_command: "  ", entrypoint: "" });
    assert.deepEqual([spec.run_command, spec.entrypoint], [null, null]);
  });
});

/** [what, body fields, field named, problem] */
const REFUSALS: [string, Record<string, unknown>, string, RegExp?][] = [
  ["an upper-case name", { name: "Web" }, "name", /DNS label/],
  ["a name starting with '-'", { name: "-web" }, "name"],
  ["a name too long for container host names", { name: "a".repeat(60) }, "name", /59/],
  ["an empty image", { image: "" }, "image"],
  ["an image with spaces", { image: "my image" }, "image"],
  ["more than 100 containers", { target_num_containers: 101 }, "target_num_containers", /0 and 100/],
  ["a negative number of containers", { target_num_containers: -1 }, "target_num_containers"],
  ["a fractional number of containers", { target_num_containers: 1.5 }, "target_num_containers"],
  [
    "a binding without container_path",
    { bindings: [{ host_path: "/srv" }] },
    "bindings[0].container_path",
    /required unless volumes_from/,
  ],
  [
    "a binding with a relative path",
    { bindings: [{ container_path: "data" }] },
    "bindings[0].container_path",
    /absolute/,
  ],
  ["a binding of /", { bindings: [{ container_path: "/" }] }, "bindings[0].container_path"],
  [
    "a host path with ':'",
    { bindings: [{ host_path: "/a:b", container_path: "/x" }] },
    "bindings[0].host_path",
  ],
  [
    "volumes_from of an unknown service",
    { bindings: [{ volumes_from: "/api/app/v1/alice/service/nope/" }] },
    "bindings[0].volumes_from",
    /^no such service in this namespace$/,
  ],
  [
    "volumes_from with a container_path",
    { bindings: [{ container_path: "/x", volumes_from: DATA_URI }] },
    "bindings[0].volumes_from",
  ],
  [
    "the same container path twice",
    { bindings: [{ container_path: "/data" }, { container_path: "/data/" }] },
    "bindings[1].container_path",
    /bindings\[0\]/,
  ],
  [
    "the same volumes_from twice",
    { bindings: [{ volumes_from: DATA_URI }, { volumes_from: DATA_URI }] },
    "bindings[1].volumes_from",
  ],
  [
    "a link to an unknown service",
    { linked_to_service: [{ to_service: "/api/app/v1/alice/service/nope/" }] },
    "linked_to_service[0].to_service",
    /^no such service in this namespace$/,
  ],
  [
    "two links with one name",
    {
      linked_to_service: [
        { to_service: DB_URI, name: "db" },
        { to_service: DATA_URI, name: "db" },
      ],
    },
    "linked_to_service[1].name",
    /already used/,
  ],
  [
    "link names equal once upper-cased",
    {
      linked_to_service: [
        { to_service: DB_URI, name: "my-db" },
        { to_service: DATA_URI, name: "MY_DB" },
      ],
    },
    "linked_to_service[1].name",
  ],
  [
    "a link name that is not a host name",
    { linked_to_service: [{ to_service: DB_URI, name: "my db" }] },
    "linked_to_service[0].name",
  ],
  [
    "the same inner port and protocol twice",
    {
      container_ports: [
        { protocol: "tcp", inner_port: 80 },
        { protocol: "tcp", inner_port: 80 },
      ],
    },
    "container_ports[1].inner_port",
    /80\/tcp/,
  ],
  [
    "an outer port on an unpublished port",
    { container_ports: [{ protocol: "tcp", inner_port: 80, outer_port: 8080 }] },
    "container_ports[0].outer_port",
    /published/,
  ],
  [
    "an outer port published twice",
    {
      container_ports: [
        { protocol: "tcp", inner_port: 80, outer_port: 8080, published: true },
        { protocol: "tcp", inner_port: 81, outer_port: 8080, published: true },
      ],
    },
    "container_ports[1].outer_port",
  ],
  [
    "inner port 0",
    { container_ports: [{ protocol: "tcp", inner_port: 0 }] },
    "container_ports[0].inner_port",
    /1 and 65535/,
  ],
  [
    "inner port 70000",
    { container_ports: [{ protocol: "tcp", inner_port: 70000 }] },
    "container_ports[0].inner_port",
  ],
  [
    "outer port 70000",
    { container_ports: [{ protocol: "tcp", inner_port: 80, outer_port: 70000, published: true }] },
    "container_ports[0].outer_port",
  ],
  [
    "protocol sctp",
    { container_ports: [{ protocol: "sctp", inner_port: 80 }] },
    "container_ports[0].protocol",
    /tcp, udp/,
  ],
  ["a role other than global", { roles: ["admin"] }, "roles[0]", /global/],
  [
    "an env key starting with a digit",
    { container_envvars: [{ key: "1X", value: "" }] },
    "container_envvars[0].key",
  ],
  ["an env key with '-'", { container_envvars: [{ key: "A-B", value: "" }] }, "container_envvars[0].key"],
  [
    "the same env key twice",
    {
      container_envvars: [
        { key: "A", value: "1" },
        { key: "A", value: "2" },
      ],
    },
    "container_envvars[1].key",
  ],
  ["a non-string env value", { container_envvars: [{ key: "A", value: 1 }] }, "container_envvars[0].value"],
  ["negative memory", { memory: -5 }, "memory"],
  ["memory below the engine's minimum", { memory: 3 }, "memory", /at least 6/],
  ["negative memory_swap other than -1", { memory: 64, memory_swap: -2 }, "memory_swap"],
  ["memory_swap without memory", { memory_swap: 100 }, "memory_swap", /needs memory/],
  ["memory_swap below memory", { memory: 512, memory_swap: 256 }, "memory_swap"],
  ["negative cpu_shares", { cpu_shares: -1 }, "cpu_shares"],
  ["a cpuset that is not a CPU list", { cpuset: "a-b" }, "cpuset"],
  [
    "a device without a container path",
    { devices: ["/dev/fuse"] },
    "devices[0]",
    /<host device>:<container device>/,
  ],
  ["a device with bad permissions", { devices: ["/dev/a:/dev/b:xyz"] }, "devices[0]"],
  ["an extra host without an ip", { extra_hosts: ["db"] }, "extra_hosts[0]", /<host name>:<ip>/],
  ["an extra host with a name for an ip", { extra_hosts: ["db:server"] }, "extra_hosts[0]"],
  ["a DNS server that is not an address", { dns: ["dns.example"] }, "dns[0]"],
  ["a capability with spaces", { cap_add: ["NET ADMIN"] }, "cap_add[0]"],
  ["a relative working_dir", { working_dir: "app" }, "working_dir", /absolute/],
  ["a run_command with an open quote", { run_command: 'echo "hi' }, "run_command", /unterminated/],
  ["an entrypoint ending in a backslash", { entrypoint: "run \\" }, "entrypoint"],
  ["a label in Berth's namespace", { labels: { "io.berth.node": "x" } }, "labels.io.berth.node", /reserved/],
  ["a MAC address that is not one", { mac_address: "02:42" }, "mac_address"],
  ["a MAC address on the host network", { net: "host", mac_address: "02:42:ac:11:00:02" }, "mac_address"],
  ["an invalid host name", { hostname: "front_end" }, "hostname"],
  ["an unknown autorestart", { autorestart: "SOMETIMES" }, "autorestart", /OFF, ON_FAILURE, ALWAYS/],
  ["an unknown deployment strategy", { deployment_strategy: "RANDOM" }, "deployment_strategy"],
  ["an unknown net", { net: "overlay" }, "net"],
  ["a non-boolean privileged", { privileged: "yes" }, "privileged"],
  [
    "security_opt and secuirty_opt that disagree",
    { security_opt: ["a"], secuirty_opt: ["b"] },
    "secuirty_opt",
  ],
  ["cgroup_parent and cgroup_name that disagree", { cgroup_parent: "/a", cgroup_name: "/b" }, "cgroup_name"],
  ["a tag without a name", { tags: [{ name: "" }] }, "tags[0].name", /cannot be empty/],
  ["a blank tag", { tags: ["  "] }, "tags[0]", /blank/],
  ["ports that are not a list", { container_ports: "80" }, "container_ports", /list/],
];

describe("normalizeCreate: every refusal names its field", () => {
  for (const [what, body, field, problem] of REFUSALS) {
    test(`${what} → ${field}`, () => {
      assertRefused(() => create(body), field, problem);
    });
    test(`${what} → services.web.${field} under a stack's prefix`, () => {
      assertRefused(() => create(body, "services.web."), `services.web.${field}`, problem);
    });
  }

  test("a service may not link to or mount itself", () => {
    const self: SpecContext = { ...ctx, serviceUuid: "uuid-db" };
    assertRefused(
      () => parseCreate({ image: "x", linked_to_service: [{ to_service: DB_URI }] }, self),
      "linked_to_service[0].to_service",
      /itself/,
    );
    assertRefused(
      () => parseCreate({ image: "x", bindings: [{ volumes_from: DB_URI }] }, self),
      "bindings[0].volumes_from",
    );
  });

  test("all problems of a body are reported at once: every problem its schema finds, or every rule it breaks", () => {
    const schema = assertRefused(() => create({ name: 7, memory: -1, net: "overlay" }), "name");
    assert.deepEqual(
      schema.details?.map((d) => d.field),
      ["name", "net", "memory"],
    );
    const error = assertRefused(() => create({ name: "Bad", memory: 3 }), "name");
    assert.deepEqual(
      error.details?.map((d) => d.field),
      ["name", "memory"],
    );
    assert.match(error.message, /^name: .*\(and 1 more problem\)$/);
  });

  test("a body that is not an object names the stack item", () => {
    assertRefused(
      () => parseCreate("nginx" as unknown as ServiceCreateBody, ctx, "services.web."),
      "services.web",
    );
    assertRefused(() => parseCreate(null as unknown as ServiceCreateBody, ctx), "body");
  });
});

describe("applyUpdate", () => {
  const current: ServiceSpec = parseCreate(
    {
      image: "nginx:1.25",
      tags: ["web"],
      memory: 256,
      memory_swap: 512,
      container_envvars: [{ key: "A", value: "1" }],
    },
    ctx,
  ).spec;
  const update = (body: Record<string, unknown>, spec = current, prefix = "") =>
    parseUpdate(spec, "web", body, ctx, prefix);

  test("an image without a tag means latest, and containers must be redeployed", () => {
    const out = update({ image: "nginx" });
    assert.equal(out.spec.image_name, "nginx:latest");
    assert.equal(out.changed, true);
  });

  test("tags replace the list and do not touch containers", () => {
    const out = update({ tags: ["eu", { name: "ssd" }] });
    assert.deepEqual(out.spec.tags, ["eu", "ssd"]);
    assert.equal(out.changed, false);
  });

  test("lists replace the current ones", () => {
    const out = update({ container_envvars: [{ key: "B", value: "2" }] });
    assert.deepEqual(out.spec.container_envvars, [{ key: "B", value: "2" }]);
    assert.equal(out.changed, true);
  });

  test("a service cannot be updated to EVERY_NODE, nor from it", () => {
    assertRefused(
      () => update({ deployment_strategy: "EVERY_NODE" }),
      "deployment_strategy",
      /to or from EVERY_NODE/,
    );
    const everyNode = { ...current, deployment_strategy: "EVERY_NODE" as const };
    assertRefused(() => update({ deployment_strategy: "EMPTIEST_NODE" }, everyNode), "deployment_strategy");
    assert.equal(
      update({ deployment_strategy: "EVERY_NODE" }, everyNode).spec.deployment_strategy,
      "EVERY_NODE",
    );
    const ha = update({ deployment_strategy: "HIGH_AVAILABILITY" });
    assert.equal(ha.spec.deployment_strategy, "HIGH_AVAILABILITY");
    assert.equal(ha.changed, false);
  });

  test("an EVERY_NODE service cannot be scaled; others can, within 0..100", () => {
    const everyNode = { ...current, deployment_strategy: "EVERY_NODE" as const };
    assertRefused(
      () => update({ target_num_containers: 3 }, everyNode),
      "target_num_containers",
      /cannot be scaled/,
    );
    assert.equal(update({ target_num_containers: 3 }).target_num_containers, 3);
    assertRefused(() => update({ target_num_containers: 101 }), "target_num_containers");
    assert.equal(update({ target_num_containers: 3 }).changed, false);
  });

  test("nickname: given, or the service name when empty; absent when not sent", () => {
    assert.equal(update({ nickname: "Front" }).nickname, "Front");
    assert.equal(update({ nickname: "" }).nickname, "web");
    assert.equal("nickname" in update({ privileged: true }), false);
  });

  test("only what containers see counts as a change", () => {
    assert.equal(update({ autoredeploy: true }).changed, false);
    assert.equal(update({ autorestart: "ALWAYS" }).changed, true);
    assert.equal(update({ roles: ["global"] }).changed, true);
    assert.equal(update({ image: "nginx:1.25", memory: 256 }).changed, false);
  });

  test("memory below the current memory_swap is refused on memory (the field that was sent)", () => {
    assertRefused(() => update({ memory: 1024 }), "memory", /memory_swap|memory plus swap/);
  });

  test("refusals carry the prefix and the current definition is left untouched", () => {
    const before = structuredClone(current);
    assertRefused(
      () => update({ container_ports: [{ protocol: "tcp", inner_port: 0 }] }, current, "services.web."),
      "services.web.container_ports[0].inner_port",
    );
    update({ container_envvars: [], tags: [] });
    assert.deepEqual(current, before);
  });

  test("links in an update resolve like at create", () => {
    assertRefused(
      () => update({ linked_to_service: [{ to_service: "/nope/" }] }),
      "linked_to_service[0].to_service",
      /^no such service in this namespace$/,
    );
    assert.deepEqual(
      update({ linked_to_service: [{ to_service: DB_URI, name: "db" }] }).spec.linked_to_service,
      [{ to_service: "uuid-db", name: "db" }],
    );
  });

  test("definitionChanged ignores key order of labels", () => {
    const a = { ...current, labels: { x: "1", y: "2" } };
    const b = { ...current, labels: { y: "2", x: "1" } };
    assert.equal(definitionChanged(a, b), false);
    assert.equal(definitionChanged(a, { ...b, labels: { x: "1" } }), true);
  });
});

describe("port views and endpoint URIs", () => {
  const port = (inner: number, extra: Partial<ServicePort> = {}): ServicePort => ({
    protocol: "tcp",
    inner_port: inner,
    outer_port: null,
    published: true,
    ...extra,
  });
  const host = "3fa4b2c1.alice.node.berth.internal";

  test("port 80 is http on the node's FQDN, with the host port the engine reports", () => {
    assert.deepEqual(
      portView(port(80), { serviceName: "web", endpointHost: host, reportedOuterPort: 32768 }),
      {
        protocol: "tcp",
        inner_port: 80,
        outer_port: 32768,
        port_name: "web",
        endpoint_uri: `http://${host}:32768/`,
        published: true,
        uri_protocol: "http",
      },
    );
  });

  test("the documented web ports are http, 443 and 8443 https, others tcp, udp udp", () => {
    for (const inner of [80, 3000, 5000, 8000, 8008, 8080, 8888]) {
      assert.equal(
        portView(port(inner, { outer_port: 9000 }), { serviceName: "web", endpointHost: host }).endpoint_uri,
        `http://${host}:9000/`,
      );
    }
    for (const inner of [443, 8443]) {
      assert.equal(
        portView(port(inner, { outer_port: 9443 }), { serviceName: "web", endpointHost: host }).uri_protocol,
        "https",
      );
    }
    const pg = portView(port(5432, { outer_port: 5432 }), { serviceName: "db", endpointHost: host });
    assert.equal(pg.endpoint_uri, `tcp://${host}:5432`);
    const dns = portView(port(53, { protocol: "udp", outer_port: 53 }), {
      serviceName: "dns",
      endpointHost: host,
    });
    assert.equal(dns.endpoint_uri, `udp://${host}:53`);
    assert.equal(dns.uri_protocol, "udp");
  });

  test("unpublished ports, unknown host ports and missing hosts have no endpoint", () => {
    const hidden = portView(port(5432, { published: false }), {
      serviceName: "db",
      endpointHost: host,
      reportedOuterPort: 1,
    });
    assert.deepEqual([hidden.outer_port, hidden.endpoint_uri, hidden.published], [null, null, false]);
    assert.equal(portView(port(80), { serviceName: "web", endpointHost: host }).endpoint_uri, null);
    assert.equal(
      portView(port(80, { outer_port: 8080 }), { serviceName: "web", endpointHost: "" }).endpoint_uri,
      null,
    );
    assert.equal(
      portView(port(80, { outer_port: 8080 }), { serviceName: "web", endpointHost: host }).outer_port,
      8080,
    );
  });

  test("FQDNs: service and container names under the namespace", () => {
    assert.equal(serviceFqdn("web", "alice"), "web.alice.svc.berth.internal");
    assert.equal(containerFqdn("web-1", "alice"), "web-1.alice.cont.berth.internal");
  });
});

describe("references as resource URIs", () => {
  const spec = parseCreate(
    {
      image: "web",
      linked_to_service: [{ to_service: DB_URI, name: "db" }],
      bindings: [{ container_path: "/data" }, { volumes_from: DATA_URI, rewritable: false }],
    },
    ctx,
  ).spec;
  const own = "/api/app/v1/alice/service/uuid-web/";
  const known: Record<string, { resource_uri: string; name: string }> = {
    "uuid-db": { resource_uri: DB_URI, name: "postgres" },
    "uuid-data": { resource_uri: DATA_URI, name: "data" },
  };

  test("links become Related service objects and volumes_from a URI", () => {
    assert.deepEqual(serviceUriFields(spec, { resourceUri: own, lookup: (uuid) => known[uuid] }), {
      linked_to_service: [{ name: "db", from_service: own, to_service: DB_URI }],
      bindings: [
        { host_path: null, container_path: "/data", rewritable: true, volumes_from: null },
        { host_path: null, container_path: null, rewritable: false, volumes_from: DATA_URI },
      ],
    });
  });

  test("references to services the lookup no longer knows are left out", () => {
    const out = serviceUriFields(spec, { resourceUri: own, lookup: () => undefined });
    assert.deepEqual(out.linked_to_service, []);
    assert.equal(out.bindings.length, 1);
  });

  test("linked_from_service lists the links of other services that point here", () => {
    assert.deepEqual(
      linkedFromService({
        serviceUuid: "uuid-db",
        resourceUri: DB_URI,
        others: [{ resource_uri: own, spec }],
      }),
      [{ name: "db", from_service: own, to_service: DB_URI }],
    );
  });
});

describe("shell-style splitting of run_command and entrypoint", () => {
  const cases: [string, string[]][] = [
    ['sh -c "echo hi"', ["sh", "-c", "echo hi"]],
    ["  nginx   -g  'daemon off;'  ", ["nginx", "-g", "daemon off;"]],
    ["echo 'it'\\''s'", ["echo", "it's"]],
    ['echo "a \\"quoted\\" \\\\ word" \\$HOME', ["echo", 'a "quoted" \\ word', "$HOME"]],
    ['printf "%s" ""', ["printf", "%s", ""]],
    ["a\\ b c", ["a b", "c"]],
    ["echo \"$HOME\" '$HOME'", ["echo", "$HOME", "$HOME"]],
    ["one\ttwo\nthree", ["one", "two", "three"]],
    ["a\\\nb", ["ab"]],
    ['x"y z"w', ["xy zw"]],
    ["", []],
  ];
  for (const [input, words] of cases) {
    test(`${JSON.stringify(input)} → ${JSON.stringify(words)}`, () => {
      assert.deepEqual(splitShellWords(input), words);
    });
  }

  test("unterminated quotes and a trailing backslash are errors", () => {
    assert.throws(() => splitShellWords('echo "hi'), ShellSyntaxError);
    assert.throws(() => splitShellWords("echo 'hi"), ShellSyntaxError);
    assert.throws(() => splitShellWords("echo \\"), ShellSyntaxError);
  });
});

describe("stop_signal and stop_grace_period (issue 27)", () => {
  test("a signal is stored by its name, whichever way it was written; empty means the image's", () => {
    for (const [given, stored] of [
      ["SIGTERM", "SIGTERM"],
      ["term", "SIGTERM"],
      ["sigquit", "SIGQUIT"],
      ["2", "SIGINT"],
      [" USR1 ", "SIGUSR1"],
      ["", null],
      [null, null],
    ] as const) {
      assert.equal(create({ stop_signal: given }).spec.stop_signal, stored, String(given));
    }
    assert.equal(create({}).spec.stop_signal, null);
  });

  test("an unknown signal, SIGSTOP, or a number past 31 is refused naming stop_signal", () => {
    for (const signal of ["SIGFOO", "SIGSTOP", "STOP", "0", "32", "SIGRTMIN+1"]) {
      assertRefused(() => create({ stop_signal: signal }), "stop_signal", /must be a signal name/);
    }
    assertRefused(() => create({ stop_signal: "x".repeat(17) }), "stop_signal");
    assertRefused(() => create({ stop_signal: "BAD" }, "services.web."), "services.web.stop_signal");
  });

  test("the grace period is whole seconds from 0 to 3600; null is the platform's default", () => {
    assert.equal(create({ stop_grace_period: 0 }).spec.stop_grace_period, 0);
    assert.equal(create({ stop_grace_period: 3600 }).spec.stop_grace_period, 3600);
    assert.equal(create({ stop_grace_period: null }).spec.stop_grace_period, null);
    for (const period of [-1, 3601, 1.5, "soon"]) {
      assertRefused(() => create({ stop_grace_period: period }), "stop_grace_period");
    }
  });

  test("an update sets or clears them; the containers then differ from the definition", () => {
    const current = create({}).spec;
    const updated = parseUpdate(current, "nginx", { stop_signal: "INT", stop_grace_period: 30 }, ctx);
    assert.deepEqual([updated.spec.stop_signal, updated.spec.stop_grace_period], ["SIGINT", 30]);
    assert.equal(updated.changed, true);
    assert.equal(parseUpdate(updated.spec, "nginx", { stop_signal: "SIGINT" }, ctx).changed, false);
    const cleared = parseUpdate(updated.spec, "nginx", { stop_signal: "", stop_grace_period: null }, ctx);
    assert.deepEqual([cleared.spec.stop_signal, cleared.spec.stop_grace_period], [null, null]);
    assertRefused(() => parseUpdate(current, "nginx", { stop_signal: "SIGSTOP" }, ctx), "stop_signal");
  });

  test("a definition stored before these fields existed is unchanged by setting them to null", () => {
    const { stop_signal: _s, stop_grace_period: _g, ...old } = create({}).spec;
    const updated = parseUpdate(
      old as ServiceSpec,
      "nginx",
      { stop_signal: null, stop_grace_period: null },
      ctx,
    );
    assert.equal(updated.changed, false);
  });
});
