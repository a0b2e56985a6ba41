// The privilege policy of containers (issue 26): options that reach the node are refused for a
// namespace an administrator did not allow them, on every path that defines a service (REST create
// and update, stacks in both dialects, service keys), and an engine never receives them; allowed
// namespaces get them. Provider local is for allowed namespaces only. Through HTTP, as a tenant
// with an API key would send it, on simulated nodes with recording fake engines.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { DEFAULT_SPEC } from "../../src/domain/service.ts";
import { type Caller, call } from "../support/harness.ts";
import {
  deployCluster,
  engineContainer,
  finished,
  operate,
  type Sim,
  startSim,
  until,
  uuidOf,
} from "./sim.ts";

let s: Sim;
let alice: Caller;
let bob: Caller;

/** Every host-reaching option, as a Create service body sends it, and the field a refusal names. */
const OPTIONS: { name: string; body: Record<string, unknown>; field: string }[] = [
  { name: "privileged", body: { privileged: true }, field: "privileged" },
  { name: "host network", body: { net: "host" }, field: "net" },
  { name: "host PID namespace", body: { pid: "host" }, field: "pid" },
  {
    name: "a capability beyond the default set",
    body: { cap_add: ["CHOWN", "sys_admin"] },
    field: "cap_add[1]",
  },
  { name: "every capability", body: { cap_add: ["ALL"] }, field: "cap_add[0]" },
  { name: "a device", body: { devices: ["/dev/sda:/dev/sda"] }, field: "devices[0]" },
  { name: "a security option", body: { security_opt: ["seccomp=unconfined"] }, field: "security_opt[0]" },
  { name: "a cgroup parent", body: { cgroup_parent: "/" }, field: "cgroup_parent" },
  {
    name: "a bind mount of the host's root",
    body: { bindings: [{ container_path: "/data" }, { host_path: "/", container_path: "/host" }] },
    field: "bindings[1].host_path",
  },
  {
    name: "the engine's socket",
    body: { bindings: [{ host_path: "/var/run/docker.sock", container_path: "/var/run/docker.sock" }] },
    field: "bindings[0].host_path",
  },
];

/** The same options as stack-file keys, and the field a stack refusal names. */
const STACK_FILE_OPTIONS: { body: Record<string, unknown>; field: string }[] = [
  { body: { privileged: true }, field: "privileged" },
  { body: { network_mode: "host" }, field: "network_mode" },
  { body: { net: "host" }, field: "net" },
  { body: { pid: "host" }, field: "pid" },
  { body: { cap_add: ["NET_ADMIN"] }, field: "cap_add[0]" },
  { body: { devices: ["/dev/fuse:/dev/fuse"] }, field: "devices[0]" },
  { body: { security_opt: ["apparmor=unconfined"] }, field: "security_opt[0]" },
  { body: { cgroup_parent: "/" }, field: "cgroup_parent" },
  { body: { volumes: ["/data", "/:/host"] }, field: "volumes[1]" },
];

const ALL_ALLOWED = {
  privileged: true,
  host_network: true,
  host_pid: true,
  capabilities: "all",
  devices: true,
  security_opt: true,
  cgroup_parent: true,
  host_paths: ["/"],
};
const NOTHING = {
  privileged: false,
  host_network: false,
  host_pid: false,
  capabilities: [],
  devices: false,
  security_opt: false,
  cgroup_parent: false,
  host_paths: [],
  local_nodes: false,
};

let names = 0;
const fresh = (prefix: string) => `${prefix}${++names}`;

async function allow(ns: string, privileges: Record<string, unknown>) {
  const res = await call(s.h, s.h.admin, "PATCH", `/api/v1.1/namespaces/${ns}/`, { privileges });
  assert.equal(res.status, 200, res.raw);
  return res.body;
}

function assertRefused(
  res: {
    status: number;
    body: { code: string; error: string; details?: { field: string; problem: string }[] };
  },
  ns: string,
  fields: string[],
) {
  assert.equal(res.status, 403, JSON.stringify(res.body));
  assert.equal(res.body.code, "privilege_not_allowed");
  assert.deepEqual(
    res.body.details?.map((d) => d.field),
    fields,
  );
  assert.match(res.body.error, new RegExp(`^${fields[0]!.replace(/[[\].]/g, "\\$&")}: `));
  assert.match(res.body.error, new RegExp(`namespace ${ns} is not allowed`));
  assert.match(res.body.error, /an administrator can allow it/);
}

before(async () => {
  const sim = await startSim({ users: ["bob"] });
  s = sim;
  alice = sim.alice;
  bob = sim.users.bob!;
  // The policy cache trusts its entries for ten minutes: a change must drop it, not wait for it.
  s.h.policies.cacheTtlMs = 600_000;
  await deployCluster(s, { name: "pool", target_num_nodes: 1 });
});
after(async () => {
  await s?.close();
});

describe("a tenant's namespace allows nothing that reaches the node by default", () => {
  for (const o of OPTIONS) {
    test(`REST create with ${o.name} is refused, naming the field`, async () => {
      const res = await call(s.h, alice, "POST", "/api/app/v1/service/", {
        image: "busybox:local",
        name: fresh("svc"),
        ...o.body,
      });
      assertRefused(res, "alice", [o.field]);
      // Refused calls leave a Failed action too, and no service.
      const a = (await call(s.h, alice, "GET", res.headers["x-platform-action-uri"] as string)).body;
      assert.equal(a.state, "Failed");
    });
  }

  test("every option of one body is named in details", async () => {
    const res = await call(s.h, alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      privileged: true,
      net: "host",
      pid: "host",
      cap_add: ["ALL"],
      devices: ["/dev/sda:/dev/sda"],
      security_opt: ["seccomp=unconfined"],
      cgroup_parent: "/",
      bindings: [
        { host_path: "/", container_path: "/host" },
        { host_path: "/var/run/docker.sock", container_path: "/var/run/docker.sock" },
      ],
    });
    assertRefused(res, "alice", [
      "privileged",
      "net",
      "pid",
      "cap_add[0]",
      "devices[0]",
      "security_opt[0]",
      "cgroup_parent",
      "bindings[0].host_path",
      "bindings[1].host_path",
    ]);
    assert.equal((await call(s.h, alice, "GET", "/api/app/v1/service/")).body.meta.total_count, 0);
  });

  test("options that stay inside the container are accepted: default capabilities, volumes, links", async () => {
    const res = await call(s.h, alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: fresh("plain"),
      cap_add: ["NET_BIND_SERVICE", "cap_chown"],
      cap_drop: ["ALL"],
      bindings: [{ container_path: "/data" }],
      net: "bridge",
      pid: "none",
    });
    assert.equal(res.status, 201, res.raw);
  });

  test("REST update that introduces privileged, host network or host PID is refused", async () => {
    const svc = (
      await call(s.h, alice, "POST", "/api/app/v1/service/", { image: "busybox:local", name: fresh("upd") })
    ).body;
    for (const [body, field] of [
      [{ privileged: true }, "privileged"],
      [{ net: "host" }, "net"],
      [{ pid: "host" }, "pid"],
    ] as const) {
      const res = await call(s.h, alice, "PATCH", svc.resource_uri, body);
      assertRefused(res, "alice", [field]);
    }
    const again = (await call(s.h, alice, "GET", svc.resource_uri)).body;
    assert.equal(again.privileged, false);
    assert.equal(again.net, "bridge");
  });

  for (const dialect of ["REST keys", "stack-file keys"] as const) {
    test(`stack create with ${dialect} is refused for each option, and nothing is created`, async () => {
      const items =
        dialect === "REST keys" ? OPTIONS.map((o) => ({ body: o.body, field: o.field })) : STACK_FILE_OPTIONS;
      for (const o of items) {
        const name = fresh("st");
        const res = await call(s.h, alice, "POST", "/api/app/v1/stack/", {
          name,
          services: [
            { name: "db", image: "busybox:local" },
            { name: "web", image: "busybox:local", ...o.body },
          ],
        });
        assertRefused(res, "alice", [`services.web.${o.field}`]);
        const stacks = (await call(s.h, alice, "GET", `/api/app/v1/stack/?name=${name}`)).body;
        assert.equal(stacks.meta.total_count, 0);
      }
    });
  }

  test("stack update that adds a service with an option, or turns one on, is refused", async () => {
    const name = fresh("stu");
    const created = await call(s.h, alice, "POST", "/api/app/v1/stack/", {
      name,
      services: [{ name: `${name}-web`, image: "busybox:local" }],
    });
    assert.equal(created.status, 201, created.raw);
    const uri = created.body.resource_uri;
    const added = await call(s.h, alice, "PATCH", uri, {
      services: [
        { name: `${name}-web`, image: "busybox:local" },
        { name: `${name}-agent`, image: "busybox:local", volumes: ["/var/run/docker.sock:/sock"] },
      ],
    });
    assertRefused(added, "alice", [`services.${name}-agent.volumes[0]`]);
    const turned = await call(s.h, alice, "PATCH", uri, {
      services: [{ name: `${name}-web`, image: "busybox:local", privileged: true }],
    });
    assertRefused(turned, "alice", [`services.${name}-web.privileged`]);
    const exported = (await call(s.h, alice, "GET", `${uri}export/`)).body;
    assert.deepEqual(Object.keys(exported), [`${name}-web`]);
    assert.equal(exported[`${name}-web`].privileged, undefined);
  });

  test("a call with a container's service key (PLATFORM_AUTH) is refused the same", async () => {
    const svc = (
      await call(s.h, alice, "POST", "/api/app/v1/service/", {
        image: "busybox:local",
        name: fresh("global"),
        run_command: "sleep 100000",
        roles: ["global"],
      })
    ).body;
    await operate(s, svc.resource_uri, "start");
    const running = await until(s, svc.resource_uri, "Running");
    const { spec } = await engineContainer(s, running.containers[0]);
    const auth = spec.env?.PLATFORM_AUTH;
    assert.ok(auth, "a container of role global gets PLATFORM_AUTH");
    const res = await s.h.app.inject({
      method: "POST",
      url: "/api/app/v1/alice/service/",
      headers: { authorization: auth },
      payload: {
        image: "busybox:local",
        name: fresh("escape"),
        privileged: true,
        bindings: [{ host_path: "/", container_path: "/host" }],
      },
    });
    assertRefused({ status: res.statusCode, body: res.json() }, "alice", [
      "privileged",
      "bindings[0].host_path",
    ]);
  });

  test("a cluster on provider local is refused, naming region", async () => {
    const res = await call(s.h, alice, "POST", "/api/infra/v1/nodecluster/", {
      name: "onhost",
      region: "/api/infra/v1/region/local/host/",
      node_type: "/api/infra/v1/nodetype/local/standard/",
    });
    assertRefused(res, "alice", ["region"]);
  });

  test("an engine on the Berth host attached into a namespace not allowed local nodes is refused", async () => {
    // Administrators attach engines, but into an organization's namespace the namespace's policy holds.
    assert.equal((await call(s.h, s.h.admin, "POST", "/api/v1.1/orgs/", { name: "ops" })).status, 201);
    for (const engine_url of [
      "unix:///var/run/docker.sock",
      "tcp://127.0.0.1:2375",
      "tcp://localhost:2375",
    ]) {
      const res = await call(s.h, s.h.admin, "POST", "/api/infra/v1/ops/node/", { engine_url });
      assertRefused(res, "ops", ["engine_url"]);
    }
  });
});

describe("an administrator allows a namespace", () => {
  test("GET shows the policy to members and admins, 404 to others; PATCH is for admins only", async () => {
    const mine = await call(s.h, alice, "GET", "/api/v1.1/namespaces/alice/");
    assert.equal(mine.status, 200, mine.raw);
    // The namespace's quotas (limits, usage) are fields of their own (test/api/quotas.test.ts).
    const { limits: _limits, quotas: _quotas, ...settings } = mine.body;
    assert.deepEqual(settings, {
      name: "alice",
      kind: "user",
      resource_uri: "/api/v1.1/namespaces/alice/",
      administrator: false,
      privileges: NOTHING,
    });
    const asAdmin = await call(s.h, s.h.admin, "GET", "/api/v1.1/namespaces/alice/");
    assert.equal(asAdmin.status, 200);
    const adminOwn = await call(s.h, s.h.admin, "GET", "/api/v1.1/namespaces/admin/");
    assert.equal(adminOwn.body.administrator, true);
    assert.equal(adminOwn.body.privileges.privileged, true);
    const missing = await call(s.h, bob, "GET", "/api/v1.1/namespaces/nobody/");
    const foreign = await call(s.h, bob, "GET", "/api/v1.1/namespaces/alice/");
    assert.equal(foreign.status, 404);
    assert.deepEqual(foreign.body, missing.body);
    const patch = await call(s.h, alice, "PATCH", "/api/v1.1/namespaces/alice/", {
      privileges: { privileged: true },
    });
    assert.equal(patch.status, 403);
    assert.equal(patch.body.code, "admin_only");
    assert.equal(
      (await call(s.h, alice, "GET", "/api/v1.1/namespaces/alice/")).body.privileges.privileged,
      false,
    );
  });

  test("PATCH refuses unknown keys and relative host paths, and 404s an unknown namespace", async () => {
    for (const [body, field] of [
      [{ privileges: { root: true } }, "privileges.root"],
      [{ privileges: { host_paths: ["srv/data"] } }, "privileges.host_paths[0]"],
      [{ limitz: {} }, "limitz"],
      [{ privileges: { capabilities: "some" } }, "privileges.capabilities"],
    ] as const) {
      const res = await call(s.h, s.h.admin, "PATCH", "/api/v1.1/namespaces/alice/", body);
      assert.equal(res.status, 400, res.raw);
      assert.equal(res.body.details?.[0]?.field, field, res.raw);
    }
    const res = await call(s.h, s.h.admin, "PATCH", "/api/v1.1/namespaces/nobody/", { privileges: {} });
    assert.equal(res.status, 404);
  });

  test("after the PATCH the same options are accepted, run, and reach the engine; the PATCH is an action", async () => {
    const patched = await allow("alice", ALL_ALLOWED);
    assert.deepEqual(patched.privileges, { ...ALL_ALLOWED, local_nodes: false });
    const actions = (await call(s.h, alice, "GET", "/api/audit/v1/action/?order_by=-start_date&limit=5")).body
      .objects;
    const recorded = actions.find((a: { action: string }) => a.action === "Namespace Update");
    assert.ok(recorded, JSON.stringify(actions));
    assert.equal(recorded.object, "/api/v1.1/namespaces/alice/");
    assert.equal(recorded.state, "Success");
    assert.equal(recorded.user, "admin");

    const created = await call(s.h, alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: fresh("root"),
      run_command: "sleep 100000",
      privileged: true,
      pid: "host",
      cap_add: ["SYS_ADMIN"],
      devices: ["/dev/fuse:/dev/fuse"],
      security_opt: ["seccomp=unconfined"],
      cgroup_parent: "/berth",
      bindings: [{ host_path: "/srv/shared", container_path: "/shared" }],
    });
    assert.equal(created.status, 201, created.raw);
    await operate(s, created.body.resource_uri, "start");
    const running = await until(s, created.body.resource_uri, "Running");
    const { spec } = await engineContainer(s, running.containers[0]);
    assert.equal(spec.privileged, true);
    assert.equal(spec.pidMode, "host");
    assert.deepEqual(spec.capAdd, ["SYS_ADMIN"]);
    assert.deepEqual(spec.devices, [{ pathOnHost: "/dev/fuse", pathInContainer: "/dev/fuse" }]);
    assert.deepEqual(spec.securityOpt, ["seccomp=unconfined"]);
    assert.equal(spec.cgroupParent, "/berth");
    assert.deepEqual(spec.binds, ["/srv/shared:/shared"]);

    const hostNet = await call(s.h, alice, "POST", "/api/app/v1/stack/", {
      name: fresh("hn"),
      services: [
        { name: fresh("hnweb"), image: "busybox:local", network_mode: "host", volumes: ["/:/host:ro"] },
      ],
    });
    assert.equal(hostNet.status, 201, hostNet.raw);
  });

  test("an unrelated update keeps a value the policy no longer allows; changing it is refused", async () => {
    const svc = (
      await call(s.h, alice, "POST", "/api/app/v1/service/", {
        image: "busybox:local",
        name: fresh("kept"),
        privileged: true,
      })
    ).body;
    await allow("alice", { privileged: false });
    const scaled = await call(s.h, alice, "PATCH", svc.resource_uri, {
      target_num_containers: 2,
      privileged: true,
    });
    assert.equal(scaled.status, 200, scaled.raw);
    assert.equal(scaled.body.privileged, true);
    const off = await call(s.h, alice, "PATCH", svc.resource_uri, { privileged: false });
    assert.equal(off.status, 200, off.raw);
    const on = await call(s.h, alice, "PATCH", svc.resource_uri, { privileged: true });
    assertRefused(on, "alice", ["privileged"]);
    await allow("alice", NOTHING);
  });

  test("host paths: only under an allowed prefix, segment by segment, with .. resolved", async () => {
    await allow("alice", { host_paths: ["/srv/data", "/opt/app/"] });
    for (const host_path of ["/srv/data", "/srv/data/x", "/srv//data/y/", "/opt/app/cache"]) {
      const res = await call(s.h, alice, "POST", "/api/app/v1/service/", {
        image: "busybox:local",
        name: fresh("hp"),
        bindings: [{ host_path, container_path: "/d" }],
      });
      assert.equal(res.status, 201, `${host_path}: ${res.raw}`);
    }
    for (const host_path of [
      "/srv/datax",
      "/srv",
      "/srv/data/../etc",
      "/srv/data/../../",
      "/opt/application",
    ]) {
      const res = await call(s.h, alice, "POST", "/api/app/v1/service/", {
        image: "busybox:local",
        name: fresh("hp"),
        bindings: [{ host_path, container_path: "/d" }],
      });
      assertRefused(res, "alice", ["bindings[0].host_path"]);
    }
    const stack = await call(s.h, alice, "POST", "/api/app/v1/stack/", {
      name: fresh("hps"),
      services: [{ name: fresh("hpw"), image: "busybox:local", volumes: ["/srv/data/a:/a", "/etc:/etc:ro"] }],
    });
    assert.equal(stack.status, 403);
    assert.deepEqual(
      stack.body.details.map((d: { field: string }) => d.field.replace(/^services\.[^.]+\./, "")),
      ["volumes[1]"],
    );
    await allow("alice", NOTHING);
  });

  test("a cluster on provider local is accepted once the namespace is allowed local nodes", async () => {
    await allow("alice", { local_nodes: true });
    const res = await call(s.h, alice, "POST", "/api/infra/v1/nodecluster/", {
      name: "onhost",
      region: "/api/infra/v1/region/local/host/",
      node_type: "/api/infra/v1/nodetype/local/standard/",
    });
    assert.equal(res.status, 201, res.raw);
    await allow("alice", NOTHING);
    // Once the allowance is taken back, the cluster gets no node: neither a deploy nor a scale up.
    assertRefused(await call(s.h, alice, "POST", `${res.body.resource_uri}deploy/`), "alice", ["region"]);
    assertRefused(await call(s.h, alice, "PATCH", res.body.resource_uri, { target_num_nodes: 3 }), "alice", [
      "region",
    ]);
  });

  test("an organization gets its own policy, whoever acts in it", async () => {
    assert.equal((await call(s.h, alice, "POST", "/api/v1.1/orgs/", { name: "acme" })).status, 201);
    const body = { image: "busybox:local", name: fresh("org"), net: "host" };
    assertRefused(await call(s.h, alice, "POST", "/api/app/v1/acme/service/", body), "acme", ["net"]);
    // Alice's own allowance does not follow her into the organization.
    await allow("alice", { host_network: true });
    assertRefused(await call(s.h, alice, "POST", "/api/app/v1/acme/service/", body), "acme", ["net"]);
    await allow("acme", { host_network: true });
    assert.equal((await call(s.h, alice, "POST", "/api/app/v1/acme/service/", body)).status, 201);
    const org = await call(s.h, alice, "GET", "/api/v1.1/namespaces/acme/");
    assert.equal(org.body.kind, "org");
    assert.equal(org.body.privileges.host_network, true);
    await allow("alice", NOTHING);
  });
});

describe("an engine never receives an option the namespace is not allowed now", () => {
  test("a privileged service stored before the policy fails at start with the reason; the engine never gets it", async () => {
    const ns = "alice";
    const svcUuid = randomUUID();
    const spec = {
      ...DEFAULT_SPEC,
      image_name: "busybox:local",
      privileged: true,
      bindings: [{ host_path: "/", container_path: "/host", rewritable: true, volumes_from: null }],
      run_command: "sleep 100000",
    };
    const now = Date.now();
    await s.h.store.services.insertService({
      uuid: svcUuid,
      namespace: ns,
      name: fresh("legacy"),
      nickname: "legacy",
      state: "Not running",
      stack_uuid: null,
      target_num_containers: 1,
      spec: JSON.stringify(spec),
      spec_version: 1,
      auth_secret: null,
      deployed_at: null,
      started_at: null,
      stopped_at: null,
      destroyed_at: null,
      created: now,
    });
    const uri = `/api/app/v1/${ns}/service/${svcUuid}/`;
    const createdBefore = [...s.engines.values()].reduce((n, e) => n + e.created.length, 0);
    const res = await call(s.h, alice, "POST", `${uri}start/`);
    assert.equal(res.status, 202, res.raw);
    const a = await finished(s, res);
    assert.equal(a.state, "Failed", a.log.join("\n"));
    const log = a.log.join("\n");
    assert.match(log, /was not created/);
    assert.match(log, /privileged: namespace alice is not allowed privileged containers/);
    assert.match(log, /bindings\[0\]\.host_path: host path \/: namespace alice is not allowed bind mounts/);
    const createdAfter = [...s.engines.values()].reduce((n, e) => n + e.created.length, 0);
    assert.equal(createdAfter, createdBefore, "no engine container was created");
    for (const e of s.engines.values()) {
      assert.ok(
        e.created.every((c) => c.spec.labels?.["io.berth.service"] !== svcUuid),
        "the engine never received the privileged container",
      );
    }
    const svc = (await call(s.h, alice, "GET", uri)).body;
    assert.notEqual(svc.state, "Running");
    assert.equal(uuidOf(uri), svcUuid);
  });
});
