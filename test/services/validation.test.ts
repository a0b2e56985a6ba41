// Service definitions through the API on simulated nodes: every create-body validation (400
// naming the field), numeric strings, the defaults a created service shows, the update rules,
// `synchronized` after a change, and names taken.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  call,
  containersOf,
  createService,
  deployCluster,
  finished,
  operate,
  runningService,
  type Sim,
  startSim,
  until,
  uuidOf,
} from "./sim.ts";

let s: Sim;
let db: { resource_uri: string };

before(async () => {
  s = await startSim();
  await deployCluster(s, { name: "pool", target_num_nodes: 1 });
  db = await createService(s, { image: "busybox:local", name: "db" });
});
after(() => s.close());

const SERVICES = "/api/app/v1/service/";
const B = { image: "busybox:local" };

async function countServices(): Promise<number> {
  return (await call(s.h, s.alice, "GET", SERVICES)).body.meta.total_count;
}

describe("create body validation", () => {
  // [what, body, field named in details]
  type Body = Record<string, unknown>;
  const cases: [string, Body | (() => Body), string][] = [
    ["image is required", { name: "x" }, "image"],
    ["image cannot be empty", { image: "" }, "image"],
    ["image cannot hold spaces", { image: "bad image" }, "image"],
    ["image must be a string", { image: { name: "busybox" } }, "image"],
    ["name must be a DNS label", { ...B, name: "Web_1" }, "name"],
    ["name cannot end with -", { ...B, name: "web-" }, "name"],
    ["name is at most 59 characters", { ...B, name: "a".repeat(60) }, "name"],
    ["nickname is at most 200 characters", { ...B, nickname: "n".repeat(201) }, "nickname"],
    [
      "target_num_containers must be an integer",
      { ...B, target_num_containers: "many" },
      "target_num_containers",
    ],
    ["target_num_containers is not negative", { ...B, target_num_containers: -1 }, "target_num_containers"],
    ["target_num_containers is at most 100", { ...B, target_num_containers: 101 }, "target_num_containers"],
    ["target_num_containers is whole", { ...B, target_num_containers: 1.5 }, "target_num_containers"],
    ["run_command must split like a shell", { ...B, run_command: 'echo "open' }, "run_command"],
    ["entrypoint must split like a shell", { ...B, entrypoint: "sh -c 'open" }, "entrypoint"],
    ["container_ports is a list", { ...B, container_ports: { inner_port: 80 } }, "container_ports"],
    [
      "port protocol is tcp or udp",
      { ...B, container_ports: [{ protocol: "sctp", inner_port: 80 }] },
      "container_ports[0].protocol",
    ],
    [
      "port protocol is required",
      { ...B, container_ports: [{ inner_port: 80 }] },
      "container_ports[0].protocol",
    ],
    [
      "inner_port is required",
      { ...B, container_ports: [{ protocol: "tcp" }] },
      "container_ports[0].inner_port",
    ],
    [
      "inner_port is at most 65535",
      { ...B, container_ports: [{ protocol: "tcp", inner_port: 70000 }] },
      "container_ports[0].inner_port",
    ],
    [
      "inner_port is listed once",
      {
        ...B,
        container_ports: [
          { protocol: "tcp", inner_port: 80 },
          { protocol: "tcp", inner_port: 80 },
        ],
      },
      "container_ports[1].inner_port",
    ],
    [
      "outer_port needs published",
      { ...B, container_ports: [{ protocol: "tcp", inner_port: 80, outer_port: 8080 }] },
      "container_ports[0].outer_port",
    ],
    [
      "outer_port is a port number",
      { ...B, container_ports: [{ protocol: "tcp", inner_port: 80, outer_port: 65536, published: true }] },
      "container_ports[0].outer_port",
    ],
    [
      "published is a boolean",
      { ...B, container_ports: [{ protocol: "tcp", inner_port: 80, published: "sure" }] },
      "container_ports[0].published",
    ],
    [
      "an env var key is a variable name",
      { ...B, container_envvars: [{ key: "1X", value: "a" }] },
      "container_envvars[0].key",
    ],
    [
      "an env var value is required",
      { ...B, container_envvars: [{ key: "A" }] },
      "container_envvars[0].value",
    ],
    [
      "an env var is set once",
      {
        ...B,
        container_envvars: [
          { key: "A", value: "1" },
          { key: "A", value: "2" },
        ],
      },
      "container_envvars[1].key",
    ],
    [
      "a link needs to_service",
      { ...B, linked_to_service: [{ name: "x" }] },
      "linked_to_service[0].to_service",
    ],
    [
      "a link names an existing service",
      { ...B, linked_to_service: [{ to_service: "/api/app/v1/alice/service/0000/" }] },
      "linked_to_service[0].to_service",
    ],
    [
      "a link name is a host name",
      () => ({ ...B, linked_to_service: [{ to_service: db.resource_uri, name: "bad name" }] }),
      "linked_to_service[0].name",
    ],
    [
      "two links cannot share a variable prefix",
      () => ({
        ...B,
        linked_to_service: [
          { to_service: db.resource_uri, name: "my-db" },
          { to_service: db.resource_uri, name: "my_db" },
        ],
      }),
      "linked_to_service[1].name",
    ],
    [
      "a binding needs container_path or volumes_from",
      { ...B, bindings: [{ host_path: "/srv" }] },
      "bindings[0].container_path",
    ],
    [
      "a container_path is absolute",
      { ...B, bindings: [{ container_path: "data" }] },
      "bindings[0].container_path",
    ],
    [
      "volumes_from names an existing service",
      { ...B, bindings: [{ volumes_from: "/api/app/v1/service/0000/" }] },
      "bindings[0].volumes_from",
    ],
    [
      "rewritable is a boolean",
      { ...B, bindings: [{ container_path: "/data", rewritable: "rw" }] },
      "bindings[0].rewritable",
    ],
    ["autorestart is an enumeration", { ...B, autorestart: "SOMETIMES" }, "autorestart"],
    ["autodestroy is an enumeration", { ...B, autodestroy: "NEVER" }, "autodestroy"],
    ["sequential_deployment is a boolean", { ...B, sequential_deployment: "yes" }, "sequential_deployment"],
    ["roles are global only", { ...B, roles: ["admin"] }, "roles[0]"],
    ["privileged is a boolean", { ...B, privileged: "maybe" }, "privileged"],
    ["deployment_strategy is an enumeration", { ...B, deployment_strategy: "RANDOM" }, "deployment_strategy"],
    ["tags have a name", { ...B, tags: [""] }, "tags[0]"],
    ["autoredeploy is a boolean", { ...B, autoredeploy: "often" }, "autoredeploy"],
    ["net is bridge or host", { ...B, net: "overlay" }, "net"],
    ["pid is none or host", { ...B, pid: "container" }, "pid"],
    ["working_dir is absolute", { ...B, working_dir: "srv" }, "working_dir"],
    ["cpu_shares is not negative", { ...B, cpu_shares: -1 }, "cpu_shares"],
    ["memory is an integer", { ...B, memory: "lots" }, "memory"],
    ["memory is at least 6 MB", { ...B, memory: 3 }, "memory"],
    ["memory_swap needs memory", { ...B, memory_swap: 128 }, "memory_swap"],
    ["memory_swap is at least memory", { ...B, memory: 128, memory_swap: 64 }, "memory_swap"],
    ["cpuset lists CPUs", { ...B, cpuset: "a-b" }, "cpuset"],
    ["dns servers are addresses", { ...B, dns: ["resolver"] }, "dns[0]"],
    ["dns_search items are domains", { ...B, dns_search: ["bad domain"] }, "dns_search[0]"],
    ["cap_add items are capabilities", { ...B, cap_add: ["NET ADMIN"] }, "cap_add[0]"],
    ["cap_drop items are capabilities", { ...B, cap_drop: ["MK-NOD"] }, "cap_drop[0]"],
    ["devices are host:container", { ...B, devices: ["fuse"] }, "devices[0]"],
    ["extra_hosts are host:ip", { ...B, extra_hosts: ["db"] }, "extra_hosts[0]"],
    [
      "labels may not claim io.berth.",
      { ...B, labels: { "io.berth.container": "x" } },
      "labels.io.berth.container",
    ],
    ["hostname is a host name", { ...B, hostname: "-bad-" }, "hostname"],
    ["domainname is a domain name", { ...B, domainname: "bad domain" }, "domainname"],
    ["mac_address is a MAC address", { ...B, mac_address: "zz" }, "mac_address"],
    [
      "mac_address does not go with net host",
      { ...B, net: "host", mac_address: "02:42:ac:11:00:02" },
      "mac_address",
    ],
    ["tty is a boolean", { ...B, tty: "on" }, "tty"],
    ["stdin_open is a boolean", { ...B, stdin_open: "on" }, "stdin_open"],
    ["read_only is a boolean", { ...B, read_only: "on" }, "read_only"],
    ["unknown fields are refused", { ...B, colour: "blue" }, "colour"],
  ];

  for (const [what, body, field] of cases) {
    test(`${what}: 400 naming ${field}`, async () => {
      const res = await call(s.h, s.alice, "POST", SERVICES, typeof body === "function" ? body() : body);
      assert.equal(res.status, 400, res.raw);
      assert.equal(res.body.code, "invalid_field", res.raw);
      assert.equal(typeof res.body.error, "string");
      const fields = (res.body.details as { field: string }[]).map((d) => d.field);
      assert.ok(fields.includes(field), `${field} in ${JSON.stringify(res.body.details)}`);
    });
  }

  test("a body with several problems names each of them, and nothing is created", async () => {
    const before = await countServices();
    const res = await call(s.h, s.alice, "POST", SERVICES, {
      ...B,
      name: "Bad Name",
      working_dir: "relative",
      container_envvars: [{ key: "9", value: "x" }],
    });
    assert.equal(res.status, 400, res.raw);
    const fields = (res.body.details as { field: string }[]).map((d) => d.field).sort();
    assert.deepEqual(fields, ["container_envvars[0].key", "name", "working_dir"]);
    assert.equal(await countServices(), before);
    // The refused call still leaves a Failed action with the reason in its log.
    const a = await finished(s, res);
    assert.equal(a.state, "Failed");
    assert.ok(
      a.log.some((l) => l.includes("name")),
      a.log.join("\n"),
    );
  });

  test("numeric strings are accepted for integers and stored as numbers", async () => {
    const svc = await createService(s, {
      ...B,
      name: "numeric",
      target_num_containers: "3",
      cpu_shares: "512",
      memory: "64",
      memory_swap: "128",
      container_ports: [{ protocol: "tcp", inner_port: "8080", outer_port: "9090", published: true }],
    });
    assert.equal(svc.target_num_containers, 3);
    assert.equal(svc.cpu_shares, 512);
    assert.equal(svc.memory, 64);
    assert.equal(svc.memory_swap, 128);
    assert.equal(svc.container_ports[0].inner_port, 8080);
    assert.equal(svc.container_ports[0].outer_port, 9090);
  });
});

describe("defaults of a created service", () => {
  test("every optional field shows its default", async () => {
    const svc = await createService(s, { image: "busybox" });
    const expected: Record<string, unknown> = {
      image_name: "busybox:latest",
      name: "busybox",
      nickname: "busybox",
      state: "Not running",
      synchronized: true,
      target_num_containers: 1,
      current_num_containers: 0,
      running_num_containers: 0,
      stopped_num_containers: 0,
      containers: [],
      stack: null,
      run_command: "",
      entrypoint: "",
      container_ports: [],
      container_envvars: [],
      linked_to_service: [],
      linked_from_service: [],
      bindings: [],
      autorestart: "OFF",
      autodestroy: "OFF",
      sequential_deployment: false,
      roles: [],
      privileged: false,
      deployment_strategy: "EMPTIEST_NODE",
      tags: [],
      autoredeploy: false,
      net: "bridge",
      pid: "none",
      working_dir: "/",
      labels: {},
      user: "",
      hostname: "",
      domainname: "",
      mac_address: "",
      cgroup_parent: "",
      tty: false,
      stdin_open: false,
      dns: [],
      dns_search: [],
      cap_add: [],
      cap_drop: [],
      devices: [],
      extra_hosts: [],
      security_opt: [],
      cpu_shares: null,
      cpuset: "",
      memory: null,
      memory_swap: null,
      read_only: false,
      link_variables: {},
      deployed_datetime: null,
      started_datetime: null,
      stopped_datetime: null,
      destroyed_datetime: null,
    };
    for (const [field, value] of Object.entries(expected)) assert.deepEqual(svc[field], value, field);
    assert.equal(svc.resource_uri, `/api/app/v1/alice/service/${svc.uuid}/`);
    assert.ok(svc.calculated_envvars.some((e: { key: string }) => e.key === "PLATFORM_SERVICE_API_URI"));
  });

  test("the default name comes from the image without registry, namespace or tag", async () => {
    const svc = await createService(s, { image: "registry.example.com:5000/team/My_App:1.2" });
    assert.equal(svc.name, "my-app");
    assert.equal(svc.image_name, "registry.example.com:5000/team/My_App:1.2");
  });

  test("EVERY_NODE ignores target_num_containers", async () => {
    const svc = await createService(s, {
      ...B,
      name: "everywhere",
      deployment_strategy: "EVERY_NODE",
      target_num_containers: 5,
    });
    assert.equal(svc.target_num_containers, 0);
  });
});

describe("names", () => {
  test("a name taken by a live service of the namespace is 409", async () => {
    const res = await call(s.h, s.alice, "POST", SERVICES, { ...B, name: "db" });
    assert.equal(res.status, 409, res.raw);
    assert.equal(res.body.code, "name_taken");
    assert.match(res.body.error, /db/);
  });

  test("the name of a terminated service can be used again", async () => {
    const svc = await createService(s, { ...B, name: "phoenix" });
    await operate(s, svc.resource_uri, "terminate");
    await until(s, svc.resource_uri, "Terminated");
    const again = await call(s.h, s.alice, "POST", SERVICES, { ...B, name: "phoenix" });
    assert.equal(again.status, 201, again.raw);
    assert.notEqual(again.body.uuid, svc.uuid);
  });
});

describe("update rules", () => {
  test("an image without a tag means latest", async () => {
    const svc = await createService(s, { ...B, name: "img" });
    const res = await call(s.h, s.alice, "PATCH", svc.resource_uri, { image: "nginx" });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.image_name, "nginx:latest");
    const tagged = await call(s.h, s.alice, "PATCH", svc.resource_uri, {
      image: "registry.example:5000/nginx",
    });
    assert.equal(tagged.body.image_name, "registry.example:5000/nginx:latest");
  });

  test("tags, ports, variables and links replace the current lists", async () => {
    const svc = await createService(s, {
      ...B,
      name: "lists",
      tags: [{ name: "a" }, { name: "b" }],
      container_envvars: [{ key: "A", value: "1" }],
      container_ports: [{ protocol: "tcp", inner_port: 80 }],
      linked_to_service: [{ to_service: db.resource_uri }],
    });
    assert.deepEqual(svc.linked_to_service, [
      { name: "db", from_service: svc.resource_uri, to_service: db.resource_uri },
    ]);
    const res = await call(s.h, s.alice, "PATCH", svc.resource_uri, {
      tags: ["c"],
      container_envvars: [{ key: "B", value: "2" }],
      container_ports: [{ protocol: "udp", inner_port: 53 }],
      linked_to_service: [],
    });
    assert.equal(res.status, 200, res.raw);
    assert.deepEqual(res.body.tags, [{ name: "c" }]);
    assert.deepEqual(res.body.container_envvars, [{ key: "B", value: "2" }]);
    assert.deepEqual(
      res.body.container_ports.map((p: { protocol: string; inner_port: number }) => [
        p.protocol,
        p.inner_port,
      ]),
      [["udp", 53]],
    );
    assert.deepEqual(res.body.linked_to_service, []);
  });

  test("no change to or from EVERY_NODE, and an EVERY_NODE service has no target to set", async () => {
    const svc = await createService(s, { ...B, name: "movable", deployment_strategy: "HIGH_AVAILABILITY" });
    const to = await call(s.h, s.alice, "PATCH", svc.resource_uri, { deployment_strategy: "EVERY_NODE" });
    assert.equal(to.status, 400, to.raw);
    assert.equal(to.body.details[0].field, "deployment_strategy");
    const between = await call(s.h, s.alice, "PATCH", svc.resource_uri, {
      deployment_strategy: "EMPTIEST_NODE",
    });
    assert.equal(between.status, 200, between.raw);
    assert.equal(between.body.deployment_strategy, "EMPTIEST_NODE");

    const every = (await call(s.h, s.alice, "GET", `${SERVICES}?name=everywhere`)).body.objects[0];
    const from = await call(s.h, s.alice, "PATCH", every.resource_uri, {
      deployment_strategy: "EMPTIEST_NODE",
    });
    assert.equal(from.status, 400, from.raw);
    assert.equal(from.body.details[0].field, "deployment_strategy");
    const scale = await call(s.h, s.alice, "PATCH", every.resource_uri, { target_num_containers: 2 });
    assert.equal(scale.status, 400, scale.raw);
    assert.equal(scale.body.details[0].field, "target_num_containers");
    assert.equal(
      (await call(s.h, s.alice, "GET", every.resource_uri)).body.deployment_strategy,
      "EVERY_NODE",
    );
  });

  test("fields an update cannot change, and bad values, are 400 naming them; nothing changes", async () => {
    const svc = await createService(s, { ...B, name: "fixed", target_num_containers: 2 });
    for (const [body, field] of [
      [{ name: "renamed" }, "name"],
      [{ bindings: [] }, "bindings"],
      [{ target_num_containers: "x" }, "target_num_containers"],
      [{ image: "" }, "image"],
      [{ linked_to_service: [{ to_service: svc.resource_uri }] }, "linked_to_service[0].to_service"],
      [{ memory: 2 }, "memory"],
    ] as [Record<string, unknown>, string][]) {
      const res = await call(s.h, s.alice, "PATCH", svc.resource_uri, body);
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.raw}`);
      assert.ok(
        (res.body.details as { field: string }[]).some((d) => d.field === field),
        `${field} in ${res.raw}`,
      );
    }
    const now = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
    assert.equal(now.name, "fixed");
    assert.equal(now.target_num_containers, 2);
    assert.equal(now.image_name, "busybox:local");
    const numeric = await call(s.h, s.alice, "PATCH", svc.resource_uri, { target_num_containers: "4" });
    assert.equal(numeric.status, 200, numeric.raw);
    assert.equal(numeric.body.target_num_containers, 4);
  });

  test("a changed definition makes the service and its containers unsynchronized until redeployed", async () => {
    const svc = await runningService(s, { name: "sync", target_num_containers: 2 });
    assert.equal(svc.synchronized, true);

    // Fields that only steer placement do not change what the containers run.
    const steer = await call(s.h, s.alice, "PATCH", svc.resource_uri, {
      autoredeploy: true,
      nickname: "Sync",
    });
    assert.equal(steer.status, 200, steer.raw);
    assert.equal(steer.body.synchronized, true);
    assert.equal(steer.body.nickname, "Sync");

    const res = await call(s.h, s.alice, "PATCH", svc.resource_uri, { run_command: "sleep 200000" });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.synchronized, false);
    assert.equal(res.body.run_command, "sleep 200000");
    for (const c of await containersOf(s, res.body)) {
      assert.equal(c.synchronized, false, c.name);
      assert.equal(c.run_command, "sleep 100000", "a container shows the definition it runs");
    }
    await operate(s, svc.resource_uri, "redeploy");
    const after = await until(s, svc.resource_uri, "Running");
    assert.equal(after.synchronized, true);
    for (const c of await containersOf(s, after)) {
      assert.equal(c.synchronized, true, c.name);
      assert.equal(c.run_command, "sleep 200000");
      assert.equal(c.state, "Running");
    }
    assert.equal(uuidOf(after.resource_uri), svc.uuid);
  });
});
