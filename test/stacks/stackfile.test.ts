// Stack files (CONTRACT §12): every key form of both dialects becomes the Create service body the
// service rules take, every refusal names the service and the field the user wrote, and export
// gives back stack-file keys that convert to the same definition.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { ServiceCreateBody } from "../../src/contract/service.ts";
import { ApiError, type FieldProblem } from "../../src/domain/errors.ts";
import { DEFAULT_SPEC, type ServiceSpec } from "../../src/domain/service.ts";
import { parseCreate } from "../../src/domain/service-spec.ts";
import { settledStackState, startOrder } from "../../src/domain/stack.ts";
import {
  type ConvertedService,
  convertService,
  convertServices,
  problemsError,
  stackBodyProblems,
  stackFileServices,
} from "../../src/domain/stackfile.ts";
import { exportService } from "../../src/domain/stackfile-export.ts";

/** Converts one item, expecting no problem. */
function convert(item: Record<string, unknown>): Record<string, unknown> {
  const problems: FieldProblem[] = [];
  const out = convertService({ name: "web", image: "busybox", ...item }, 0, problems);
  assert.deepEqual(problems, [], "no problem expected");
  return out.body;
}

/** Converts one item, expecting a problem on `field` (with `problem` when given); returns all problems. */
function refused(item: Record<string, unknown>, field: string, problem?: RegExp): FieldProblem[] {
  const problems: FieldProblem[] = [];
  convertService({ name: "web", image: "busybox", ...item }, 0, problems);
  const found = problems.find((p) => p.field === field);
  assert.ok(found, `expected a problem with ${field}, got ${JSON.stringify(problems)}`);
  if (problem) assert.match(found.problem, problem);
  return problems;
}

const SERVICES: Record<string, { uuid: string; name: string }> = {
  db: { uuid: "uuid-db", name: "db" },
  data: { uuid: "uuid-data", name: "data" },
  "cache.other": { uuid: "uuid-cache", name: "cache" },
};
const resolveService = (ref: string) => SERVICES[ref];
const specOf = (body: Record<string, unknown>): ServiceSpec =>
  parseCreate(body as ServiceCreateBody, { resolveService, serviceUuid: "uuid-web" }).spec;

describe("stack-file keys", () => {
  test("ports: container port, host:container, protocols, numbers; 0 as host port means unset", () => {
    const body = convert({ ports: ["80", "8080:81", "53/udp", "5353:54/UDP", 443, "0:8443"] });
    assert.deepEqual(body.container_ports, [
      { protocol: "tcp", inner_port: 80, outer_port: null, published: true },
      { protocol: "tcp", inner_port: 81, outer_port: 8080, published: true },
      { protocol: "udp", inner_port: 53, outer_port: null, published: true },
      { protocol: "udp", inner_port: 54, outer_port: 5353, published: true },
      { protocol: "tcp", inner_port: 443, outer_port: null, published: true },
      { protocol: "tcp", inner_port: 8443, outer_port: null, published: true },
    ]);
  });

  test("expose: unpublished ports with protocols, after the published ones", () => {
    const body = convert({ expose: ["8080", "53/udp", 9000], ports: ["80"] });
    assert.deepEqual(body.container_ports, [
      { protocol: "tcp", inner_port: 80, outer_port: null, published: true },
      { protocol: "tcp", inner_port: 8080, outer_port: null, published: false },
      { protocol: "udp", inner_port: 53, outer_port: null, published: false },
      { protocol: "tcp", inner_port: 9000, outer_port: null, published: false },
    ]);
    assert.deepEqual(specOf(body).container_ports[1], {
      protocol: "tcp",
      inner_port: 8080,
      outer_port: null,
      published: false,
    });
  });

  test("ports refusals: host address, ranges, bad numbers, protocols, duplicates, host ports in expose", () => {
    refused({ ports: ["127.0.0.1:8080:80"] }, "services.web.ports[0]", /one host address is not supported/);
    refused({ ports: ["[::1]:8080:80"] }, "services.web.ports[0]", /one host address/);
    refused({ ports: ["8000-8010:8000-8010"] }, "services.web.ports[0]", /ranges are not supported/);
    refused({ ports: ["80", "http"] }, "services.web.ports[1]", /such as "80", "8080:80" or "53\/udp"/);
    refused({ ports: ["70000"] }, "services.web.ports[0]", /70000 is not a port number/);
    refused({ ports: ["0"] }, "services.web.ports[0]", /0 is not a port number/);
    refused({ ports: ["99999:80"] }, "services.web.ports[0]", /99999 is not a port number/);
    refused({ ports: ["80/sctp"] }, "services.web.ports[0]", /sctp is not a protocol: use tcp or udp/);
    refused({ ports: ["80", "8080:80"] }, "services.web.ports[1]", /80\/tcp is already listed in ports\[0\]/);
    refused({ ports: ["80"], expose: ["80"] }, "services.web.expose[0]", /already listed in ports\[0\]/);
    refused({ expose: ["8080:80"] }, "services.web.expose[0]", /publish a port on the node with ports/);
    refused({ ports: [{ target: 80 }] }, "services.web.ports[0]", /must be a port/);
    refused({ ports: "80" }, "services.web.ports", /must be a list/);
  });

  test("environment as a list or a map; numbers and booleans become text; values may hold '='", () => {
    assert.deepEqual(convert({ environment: ["A=1", "B=x=y", "C="] }).container_envvars, [
      { key: "A", value: "1" },
      { key: "B", value: "x=y" },
      { key: "C", value: "" },
    ]);
    assert.deepEqual(convert({ environment: { A: "1", N: 5, T: true } }).container_envvars, [
      { key: "A", value: "1" },
      { key: "N", value: "5" },
      { key: "T", value: "true" },
    ]);
  });

  test("environment refusals", () => {
    refused({ environment: ["A=1", "B"] }, "services.web.environment[1]", /KEY=value.*caller's environment/);
    refused({ environment: { A: null } }, "services.web.environment.A", /caller's environment/);
    refused({ environment: ["1A=x"] }, "services.web.environment[0]", /1A is not a variable name/);
    refused({ environment: ["A=1", "A=2"] }, "services.web.environment[1]", /A is already set/);
    refused({ environment: "A=1" }, "services.web.environment", /list of "KEY=value" or an object/);
  });

  test("links: service, service:alias and service.stack, resolved by the stack afterwards", () => {
    const body = convert({ links: ["db", "data:store", "cache.other:cache", "cache.other"] });
    assert.deepEqual(body.linked_to_service, [
      { to_service: "db" },
      { to_service: "data", name: "store" },
      { to_service: "cache.other", name: "cache" },
      { to_service: "cache.other" },
    ]);
    const spec = specOf(convert({ links: ["db", "data:store", "cache.other:cache2"] }));
    assert.deepEqual(spec.linked_to_service, [
      { to_service: "uuid-db", name: "db" },
      { to_service: "uuid-data", name: "store" },
      { to_service: "uuid-cache", name: "cache2" },
    ]);
    refused({ links: ["db:a:b"] }, "services.web.links[0]", /"<service>:<alias>".*"<service>\.<stack>"/);
    refused({ links: [""] }, "services.web.links[0]");
    refused({ links: [{ to_service: "db" }] }, "services.web.links[0]");
  });

  test("volumes: container path, host:container, :ro and :rw; volumes_from with :ro", () => {
    const body = convert({
      volumes: ["/data", "/srv/www:/www", "/srv/conf:/conf:ro", "/cache:ro", "/logs:rw"],
      volumes_from: ["data", "db:ro"],
    });
    assert.deepEqual(body.bindings, [
      { host_path: null, container_path: "/data", rewritable: true },
      { host_path: "/srv/www", container_path: "/www", rewritable: true },
      { host_path: "/srv/conf", container_path: "/conf", rewritable: false },
      { host_path: null, container_path: "/cache", rewritable: false },
      { host_path: null, container_path: "/logs", rewritable: true },
      { volumes_from: "data", rewritable: true },
      { volumes_from: "db", rewritable: false },
    ]);
    const spec = specOf(body);
    assert.deepEqual(spec.bindings.at(-1), {
      host_path: null,
      container_path: null,
      rewritable: false,
      volumes_from: "uuid-db",
    });
  });

  test("network_mode is compose's spelling of net: bridge or host, nothing else", () => {
    const problems: FieldProblem[] = [];
    const item = convertService({ name: "web", image: "busybox", network_mode: "host" }, 0, problems);
    assert.deepEqual(problems, []);
    assert.equal(item.body.net, "host");
    assert.equal(item.fieldOf("net"), "network_mode");
    refused({ network_mode: "none" }, "services.web.network_mode", /must be bridge or host/);
    refused({ network_mode: "container:db" }, "services.web.network_mode", /must be bridge or host/);
    refused({ network_mode: "host", net: "host" }, "services.web.network_mode", /spelling of net/);
  });

  test("volumes refusals", () => {
    refused({ volumes: ["dbdata:/data"] }, "services.web.volumes[0]", /named volumes are not supported/);
    refused({ volumes: ["./data:/data"] }, "services.web.volumes[0]", /relative host paths/);
    refused({ volumes: ["/a:/b:/c:ro"] }, "services.web.volumes[0]", /<host path>:<container path>/);
    refused({ volumes: ["/a:/b:z"] }, "services.web.volumes[0]", /z is not a volume mode/);
    refused({ volumes: ["/a:data"] }, "services.web.volumes[0]", /container path must be absolute/);
    refused({ volumes: [{ type: "volume" }] }, "services.web.volumes[0]", /must be a string/);
    refused({ volumes_from: ["container:abc"] }, "services.web.volumes_from[0]", /name of a service/);
    refused({ volumes_from: ["data:z"] }, "services.web.volumes_from[0]", /name of a service/);
  });

  test("restart, autodestroy, command and entrypoint as text or lists", () => {
    assert.equal(convert({ restart: "no" }).autorestart, "OFF");
    assert.equal(convert({ restart: false }).autorestart, "OFF", "YAML reads `no` as false");
    assert.equal(convert({ restart: "on-failure" }).autorestart, "ON_FAILURE");
    assert.equal(convert({ restart: "always" }).autorestart, "ALWAYS");
    refused({ restart: "unless-stopped" }, "services.web.restart", /no, on-failure or always/);
    refused({ restart: "on-failure:3" }, "services.web.restart", /retry count is not supported/);
    assert.equal(convert({ autodestroy: "on-success" }).autodestroy, "ON_SUCCESS");
    assert.equal(convert({ autodestroy: "always" }).autodestroy, "ALWAYS");
    assert.equal(convert({ autodestroy: "ON_SUCCESS" }).autodestroy, "ON_SUCCESS");
    refused({ autodestroy: "sometimes" }, "services.web.autodestroy", /no, on-success or always/);
    assert.equal(convert({ command: "sleep 10" }).run_command, "sleep 10");
    const listed = convert({
      command: ["sh", "-c", "echo 'hi' && sleep 5"],
      entrypoint: ["/bin/tini", "--"],
    });
    assert.equal(listed.run_command, `sh -c 'echo '"'"'hi'"'"' && sleep 5'`);
    assert.deepEqual(specOf(listed).run_command, listed.run_command);
    assert.equal(listed.entrypoint, "/bin/tini --");
    refused({ command: ["sleep", 10] }, "services.web.command", /string or a list of strings/);
  });

  test("mem_limit and memswap_limit with units b, k, m, g; a plain number counts bytes", () => {
    assert.equal(convert({ mem_limit: "512m" }).memory, 512);
    assert.equal(convert({ mem_limit: "1g" }).memory, 1024);
    assert.equal(convert({ mem_limit: "2G" }).memory, 2048);
    assert.equal(convert({ mem_limit: "65536k" }).memory, 64);
    assert.equal(convert({ mem_limit: "67108864b" }).memory, 64);
    assert.equal(convert({ mem_limit: 67108864 }).memory, 64);
    assert.equal(convert({ mem_limit: "256mb" }).memory, 256);
    assert.equal(convert({ mem_limit: "256m", memswap_limit: "1g" }).memory_swap, 1024);
    assert.equal(convert({ mem_limit: "256m", memswap_limit: -1 }).memory_swap, -1);
    refused({ mem_limit: "512" }, "services.web.mem_limit", /whole number of megabytes/);
    refused({ mem_limit: "lots" }, "services.web.mem_limit", /such as 512m or 1g/);
    refused({ memswap_limit: "1t" }, "services.web.memswap_limit", /or -1 for unlimited swap/);
  });

  test("deployment_strategy in lower case, tags as strings, roles and the single-value keys", () => {
    const body = convert({
      deployment_strategy: "high_availability",
      tags: ["eu", { name: "ssd" }],
      roles: ["global"],
      target_num_containers: "3",
      autodestroy: "no",
      autoredeploy: true,
      sequential_deployment: true,
      privileged: true,
      net: "bridge",
      pid: "host",
      working_dir: "/srv",
      user: "nobody",
      hostname: "front",
      domainname: "example.test",
      mac_address: "02:42:ac:11:00:02",
      cpu_shares: "512",
      cpuset: "0-1",
      dns: "10.0.0.2",
      dns_search: ["example.test"],
      cap_add: ["NET_ADMIN"],
      cap_drop: ["MKNOD"],
      devices: ["/dev/fuse:/dev/fuse"],
      extra_hosts: { "db.example": "10.0.0.5" },
      labels: ["team=web", "public"],
      security_opt: ["no-new-privileges"],
      read_only: true,
      tty: true,
      stdin_open: true,
      nickname: "The front",
      cgroup_parent: "berth",
    });
    const n = parseCreate(body as ServiceCreateBody, { resolveService });
    assert.equal(n.target_num_containers, 3);
    assert.equal(n.nickname, "The front");
    assert.deepEqual(n.spec, {
      ...DEFAULT_SPEC,
      image_name: "busybox:latest",
      deployment_strategy: "HIGH_AVAILABILITY",
      tags: ["eu", "ssd"],
      roles: ["global"],
      autoredeploy: true,
      sequential_deployment: true,
      privileged: true,
      pid: "host",
      working_dir: "/srv",
      user: "nobody",
      hostname: "front",
      domainname: "example.test",
      mac_address: "02:42:ac:11:00:02",
      cpu_shares: 512,
      cpuset: "0-1",
      dns: ["10.0.0.2"],
      dns_search: ["example.test"],
      cap_add: ["NET_ADMIN"],
      cap_drop: ["MKNOD"],
      devices: ["/dev/fuse:/dev/fuse"],
      extra_hosts: ["db.example:10.0.0.5"],
      labels: { team: "web", public: "" },
      security_opt: ["no-new-privileges"],
      read_only: true,
      tty: true,
      stdin_open: true,
      cgroup_parent: "berth",
    });
    refused({ deployment_strategy: "random" }, "services.web.deployment_strategy", /emptiest_node/);
  });

  test("REST keys pass through, with numeric strings taken as integers (also inside ports)", () => {
    const body = convert({
      target_num_containers: "2",
      cpu_shares: "100",
      memory: "128",
      memory_swap: "256",
      container_ports: [{ protocol: "tcp", inner_port: "80", outer_port: "0", published: true }],
      container_envvars: [{ key: "A", value: "1" }],
      linked_to_service: [{ to_service: "db", name: "database" }],
      bindings: [{ host_path: "", container_path: "/data" }],
      autorestart: "ALWAYS",
      deployment_strategy: "EVERY_NODE",
      run_command: "sleep 1",
    });
    const n = parseCreate(body as ServiceCreateBody, { resolveService });
    assert.equal(n.spec.cpu_shares, 100);
    assert.equal(n.spec.memory, 128);
    assert.equal(n.spec.memory_swap, 256);
    assert.deepEqual(n.spec.container_ports, [
      { protocol: "tcp", inner_port: 80, outer_port: null, published: true },
    ]);
    assert.deepEqual(n.spec.bindings, [
      { host_path: null, container_path: "/data", rewritable: true, volumes_from: null },
    ]);
    assert.deepEqual(n.spec.linked_to_service, [{ to_service: "uuid-db", name: "database" }]);
    assert.equal(n.spec.autorestart, "ALWAYS");
    assert.equal(n.spec.deployment_strategy, "EVERY_NODE");
  });

  test("both dialects in one item, but not the same field twice", () => {
    const body = convert({ container_envvars: [{ key: "A", value: "1" }], ports: ["80"], links: ["db"] });
    assert.ok(Array.isArray(body.container_envvars) && Array.isArray(body.container_ports));
    refused(
      { environment: ["A=1"], container_envvars: [] },
      "services.web.environment",
      /spelling of container_envvars, which is given too/,
    );
    refused({ command: "a", run_command: "b" }, "services.web.command", /run_command/);
    refused({ mem_limit: "6m", memory: 6 }, "services.web.mem_limit", /memory/);
    refused({ volumes: ["/a"], bindings: [] }, "services.web.volumes", /bindings/);
    refused({ restart: "always", autorestart: "OFF" }, "services.web.restart", /autorestart/);
  });

  test("unsupported compose keys and unknown keys are refused naming the key", () => {
    refused({ build: "." }, "services.web.build", /is not supported: Berth runs images/);
    refused({ external_links: ["x"] }, "services.web.external_links", /<service>\.<stack>:<alias>/);
    refused({ env_file: ".env" }, "services.web.env_file", /cannot read your files/);
    refused({ version: "2" }, "services.web.version", /has no version/);
    refused({ services: {} }, "services.web.services", /is not supported/);
    refused({ depends_on: ["db"] }, "services.web.depends_on", /links decide the order/);
    refused({ container_name: "x" }, "services.web.container_name", /web-1/);
    refused({ imagee: "x" }, "services.web.imagee", /neither a stack-file key nor a key of Create service/);
  });

  test("items without a usable name are named by position; names may not repeat", () => {
    const problems: FieldProblem[] = [];
    const items = convertServices(
      [
        { image: "nginx" },
        { name: "Bad Name", image: "x", build: "." },
        "web",
        { name: "nginx", image: "y" },
        {},
      ],
      problems,
    );
    assert.equal(items[0]!.name, "nginx", "the name Create service would give");
    assert.deepEqual(
      problems.map((p) => p.field),
      ["services[1].build", "services[2]", "services[4].name", "services[3].name"],
    );
    assert.match(problems[3]!.problem, /nginx is already the name of services\[0\]/);
  });
});

describe("errors found by the service rules name the item's own fields", () => {
  const fieldOf = (item: Record<string, unknown>, restField: string) => {
    const out: ConvertedService = convertService({ name: "web", image: "busybox", ...item }, 0, []);
    return out.path + out.fieldOf(restField);
  };

  test("converted fields map back to the key and index the user wrote", () => {
    const item = {
      ports: ["80"],
      expose: ["53/udp"],
      environment: { A: "1", B: "2" },
      links: ["bad", "db"],
      volumes: ["/x"],
      volumes_from: ["data"],
      command: "x",
      restart: "always",
      mem_limit: "6m",
      memswap_limit: "12m",
    };
    assert.equal(fieldOf(item, "container_ports[1].inner_port"), "services.web.expose[0]");
    assert.equal(fieldOf(item, "container_envvars[1].key"), "services.web.environment.B");
    assert.equal(fieldOf(item, "linked_to_service[1].to_service"), "services.web.links[1]");
    assert.equal(fieldOf(item, "bindings[1].volumes_from"), "services.web.volumes_from[0]");
    assert.equal(fieldOf(item, "run_command"), "services.web.command");
    assert.equal(fieldOf(item, "memory"), "services.web.mem_limit");
    assert.equal(fieldOf(item, "memory_swap"), "services.web.memswap_limit");
    assert.equal(fieldOf(item, "autorestart"), "services.web.restart");
    assert.equal(
      fieldOf({ container_ports: [] }, "container_ports[0].outer_port"),
      "services.web.container_ports[0].outer_port",
    );
  });
});

describe("stack bodies and stack-file documents", () => {
  test("a compose file's top level is refused naming its keys", () => {
    const problems = stackBodyProblems({ name: "x", version: "3", services: { web: { image: "nginx" } } });
    assert.deepEqual(
      problems.map((p) => p.field),
      ["version", "services"],
    );
    assert.match(problems[1]!.problem, /top-level wrapper\) is not supported/);
    assert.deepEqual(stackBodyProblems({ name: "x", services: [] }), []);
  });

  test("a stack-file document lists its services by name", () => {
    assert.deepEqual(
      stackFileServices({ web: { image: "nginx", links: ["db"] }, db: { image: "postgres" } }),
      [
        { name: "web", image: "nginx", links: ["db"] },
        { name: "db", image: "postgres" },
      ],
    );
    for (const [doc, field] of [
      [{ version: "2", web: { image: "x" } }, "version"],
      [{ services: { web: { image: "x" } } }, "services"],
      [{ web: "nginx" }, "web"],
      [{ web: { name: "db", image: "x" } }, "web.name"],
    ] as const) {
      assert.throws(
        () => stackFileServices(doc),
        (err: unknown) => err instanceof ApiError && err.details?.[0]?.field === field,
      );
    }
  });

  test("problemsError says the first problem and counts the others", () => {
    const err = problemsError([
      { field: "services.web.ports[1]", problem: "is bad" },
      { field: "services.db.build", problem: "is not supported" },
    ]);
    assert.equal(err.message, "services.web.ports[1]: is bad (and 1 more problem)");
    assert.equal(err.code, "invalid_field");
    assert.equal(err.details?.length, 2);
  });
});

describe("export", () => {
  const refOf = (uuid: string) =>
    ({ "uuid-db": "db", "uuid-data": "data", "uuid-cache": "cache.other" })[uuid];

  test("defaults are left out", () => {
    assert.deepEqual(
      exportService({
        name: "web",
        nickname: "web",
        target_num_containers: 1,
        spec: { ...DEFAULT_SPEC, image_name: "nginx:latest" },
        refOf,
      }),
      { image: "nginx:latest" },
    );
  });

  test("every key converts back to the same definition", () => {
    const item = {
      image: "busybox:1.36",
      command: "sh -c 'sleep 1000'",
      entrypoint: "/bin/tini --",
      environment: { B: "2", A: "1" },
      ports: ["80", "8080:81", "53/udp"],
      expose: ["9000"],
      links: ["db", "data:store", "cache.other", "cache.other:c2"],
      volumes: ["/data", "/srv:/srv:ro", "/ro:ro"],
      volumes_from: ["data:ro"],
      target_num_containers: 3,
      deployment_strategy: "high_availability",
      tags: ["eu"],
      roles: ["global"],
      restart: "on-failure",
      autodestroy: "on-success",
      autoredeploy: true,
      sequential_deployment: true,
      mem_limit: "1g",
      memswap_limit: "1536m",
      cpu_shares: 512,
      cpuset: "0",
      privileged: true,
      read_only: true,
      net: "bridge",
      pid: "host",
      working_dir: "/srv",
      user: "nobody",
      hostname: "h",
      domainname: "example.test",
      mac_address: "02:42:ac:11:00:02",
      cgroup_parent: "berth",
      dns: ["10.0.0.2"],
      dns_search: ["example.test"],
      cap_add: ["NET_ADMIN"],
      cap_drop: ["MKNOD"],
      devices: ["/dev/fuse:/dev/fuse"],
      extra_hosts: ["db.example:10.0.0.5"],
      security_opt: ["no-new-privileges"],
      labels: { team: "web" },
      tty: true,
      stdin_open: true,
      nickname: "Front",
    };
    const body = convert(item);
    const n = parseCreate(body as ServiceCreateBody, { resolveService, serviceUuid: "uuid-web" });
    const exported = exportService({
      name: "web",
      nickname: n.nickname,
      target_num_containers: n.target_num_containers,
      spec: n.spec,
      refOf,
    });
    const { net: _bridgeIsTheDefault, ...expected } = item;
    assert.deepEqual(exported, expected);
    const again = parseCreate(convert(exported) as ServiceCreateBody, {
      resolveService,
      serviceUuid: "uuid-web",
    });
    assert.deepEqual(again, n);
  });
});

describe("stack states and start order", () => {
  test("a stack's state from its services' states", () => {
    assert.equal(settledStackState([]), "Not Running");
    assert.equal(settledStackState(["Not running", "Not running"]), "Not Running");
    assert.equal(settledStackState(["Running", "Running", "Terminated"]), "Running");
    assert.equal(settledStackState(["Running", "Not running"]), "Partly running");
    assert.equal(settledStackState(["Running", "Partly running"]), "Partly running");
    assert.equal(settledStackState(["Running", "Stopped"]), "Partly running");
    assert.equal(settledStackState(["Stopped", "Not running"]), "Stopped");
    assert.equal(settledStackState(["Stopped", "Stopping"]), "Stopping");
    assert.equal(settledStackState(["Running", "Starting"]), "Starting");
    assert.equal(settledStackState(["Redeploying", "Running"]), "Redeploying");
    assert.equal(settledStackState(["Terminating", "Terminating"]), "Terminating");
    assert.equal(settledStackState(["Terminated"]), "Not Running");
  });

  test("services start after the ones they depend on; a cycle is returned as a path", () => {
    assert.deepEqual(
      startOrder([
        { id: "web", after: ["app"] },
        { id: "app", after: ["db", "outside"] },
        { id: "db", after: [] },
        { id: "cache", after: [] },
      ]),
      { order: ["db", "app", "web", "cache"] },
    );
    assert.deepEqual(
      startOrder([
        { id: "a", after: ["b"] },
        { id: "b", after: ["c"] },
        { id: "c", after: ["a"] },
        { id: "d", after: [] },
      ]),
      { cycle: ["a", "b", "c", "a"] },
    );
    assert.deepEqual(startOrder([{ id: "a", after: ["a"] }]), { cycle: ["a", "a"] });
  });
});

describe("stop_signal and stop_grace_period in stack files (issue 27)", () => {
  test("stop_grace_period takes compose durations and numbers of seconds", () => {
    for (const [given, seconds] of [
      ["30s", 30],
      ["1m30s", 90],
      ["1h", 3600],
      ["2000ms", 2],
      ["0s", 0],
      ["45", 45],
      [12, 12],
      [null, null],
    ] as const) {
      assert.equal(convert({ stop_grace_period: given }).stop_grace_period, seconds, String(given));
    }
    assert.equal(specOf(convert({ stop_grace_period: "1m", stop_signal: "QUIT" })).stop_grace_period, 60);
    assert.equal(specOf(convert({ stop_signal: "QUIT" })).stop_signal, "SIGQUIT");
  });

  test("a duration that is not whole seconds, or not a duration, is refused naming the item's key", () => {
    refused({ stop_grace_period: "1.5s" }, "services.web.stop_grace_period", /whole number of seconds/);
    refused({ stop_grace_period: "500ms" }, "services.web.stop_grace_period", /whole number of seconds/);
    refused({ stop_grace_period: "soon" }, "services.web.stop_grace_period", /must be a duration such as/);
    refused({ stop_grace_period: "10 s" }, "services.web.stop_grace_period", /must be a duration such as/);
  });

  test("export writes them back as a compose duration and the signal's name, and reads back the same", () => {
    const spec = specOf(convert({ stop_grace_period: "1m30s", stop_signal: "int" }));
    const exported = exportService({
      name: "web",
      nickname: "web",
      target_num_containers: 1,
      spec,
      refOf: () => undefined,
    });
    assert.equal(exported.stop_grace_period, "1m30s");
    assert.equal(exported.stop_signal, "SIGINT");
    assert.deepEqual(specOf(convert({ ...exported })), spec);
    const hour = exportService({
      name: "web",
      nickname: "web",
      target_num_containers: 1,
      spec: { ...spec, stop_grace_period: 3661 },
      refOf: () => undefined,
    });
    assert.equal(hour.stop_grace_period, "1h1m1s");
  });
});
