// Historical clients against the wire (CONTRACT §1, §4, §8, §9), with the exact requests they send:
// the CLI's `node ls` (docker_version), the Python SDK's `redeploy(reuse_volumes=True)` (`True` in
// the query), the Go SDK's stream paths without `/api` and with `user`/`token` in the query, and its
// `Node.Events` stream. On simulated nodes, through inject() and a real WebSocket client.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  drain,
  type Frame,
  inState,
  listen,
  openStream,
  refusal,
  runningService,
  simulatedCluster,
} from "../streams/support.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";

let h: Harness;
let base: string;
let alice: Caller;
let bob: Caller;
let service: Frame;
let container: string;

before(async () => {
  h = await startHarness({
    env: { BERTH_RECONCILE_INTERVAL_MS: "200", BERTH_CONTAINER_STOP_TIMEOUT_S: "1" },
  });
  base = await listen(h);
  alice = await createUser(h, "alice");
  bob = await createUser(h, "bob");
  await simulatedCluster(h, alice, 2);
  service = await runningService(h, alice, {
    name: "shell",
    run_command: "sh -c 'echo hello; sleep 100000'",
  });
  container = service.containers[0];
});
after(() => h.close());

const uuidOf = (uri: string) => uri.split("/").filter(Boolean).at(-1)!;
/** `?user=…&token=…`: how the Go SDK authenticates its streams (no Authorization header). */
const creds = (who: Caller) => `user=${who.username}&token=${who.key}`;
const output = (frames: Frame[]) =>
  frames
    .filter((f) => f.type === "exec" && f.streamType === "stdout")
    .map((f) => f.output)
    .join("");

/** Fields of the spec's resource tables (spec "Resources and their fields"). */
const SPEC_FIELDS: Record<string, string[]> = {
  node: [
    "uuid",
    "resource_uri",
    "state",
    "availability_zone",
    "node_cluster",
    "node_type",
    "region",
    "external_fqdn",
    "nickname",
    "engine_execdriver",
    "engine_graphdriver",
    "engine_version",
    "cpu",
    "disk",
    "memory",
    "current_num_containers",
    "last_seen",
    "public_ip",
    "tunnel",
    "deployed_datetime",
    "destroyed_datetime",
    "tags",
  ],
  nodecluster: [
    "uuid",
    "resource_uri",
    "name",
    "nickname",
    "state",
    "node_type",
    "region",
    "disk",
    "nodes",
    "target_num_nodes",
    "current_num_nodes",
    "deployed_datetime",
    "destroyed_datetime",
    "tags",
    "provider_options",
  ],
  stack: [
    "uuid",
    "resource_uri",
    "name",
    "nickname",
    "state",
    "synchronized",
    "services",
    "deployed_datetime",
    "destroyed_datetime",
  ],
  action: [
    "resource_uri",
    "uuid",
    "object",
    "action",
    "method",
    "path",
    "user",
    "user_agent",
    "start_date",
    "end_date",
    "state",
    "ip",
    "location",
    "is_user_action",
    "can_be_canceled",
    "can_be_retried",
  ],
  service: [
    "uuid",
    "resource_uri",
    "image_name",
    "name",
    "nickname",
    "public_dns",
    "state",
    "net",
    "pid",
    "synchronized",
    "deployed_datetime",
    "started_datetime",
    "stopped_datetime",
    "destroyed_datetime",
    "target_num_containers",
    "current_num_containers",
    "running_num_containers",
    "stopped_num_containers",
    "stack",
    "containers",
    "container_ports",
    "container_envvars",
    "labels",
    "working_dir",
    "user",
    "hostname",
    "domainname",
    "mac_address",
    "cgroup_name",
    "cgroup_parent",
    "tty",
    "stdin_open",
    "dns",
    "dns_search",
    "cap_add",
    "cap_drop",
    "devices",
    "extra_hosts",
    "security_opt",
    "secuirty_opt",
    "entrypoint",
    "run_command",
    "sequential_deployment",
    "cpu_shares",
    "cpuset",
    "memory",
    "memory_swap",
    "linked_from_service",
    "linked_to_service",
    "bindings",
    "autorestart",
    "autodestroy",
    "roles",
    "link_variables",
    "privileged",
    "read_only",
    "deployment_strategy",
    "tags",
    "autoredeploy",
  ],
  container: [
    "uuid",
    "resource_uri",
    "image_name",
    "name",
    "public_dns",
    "state",
    "synchronized",
    "deployed_datetime",
    "started_datetime",
    "stopped_datetime",
    "destroyed_datetime",
    "container_ports",
    "container_envvars",
    "labels",
    "working_dir",
    "user",
    "hostname",
    "domainname",
    "mac_address",
    "cgroup_name",
    "cgroup_parent",
    "tty",
    "stdin_open",
    "dns",
    "dns_search",
    "cap_add",
    "cap_drop",
    "devices",
    "extra_hosts",
    "security_opt",
    "entrypoint",
    "run_command",
    "cpu_shares",
    "cpuset",
    "memory",
    "memory_swap",
    "autorestart",
    "autodestroy",
    "roles",
    "link_variables",
    "privileged",
    "read_only",
    "net",
    "pid",
    "node",
    "service",
    "exit_code",
    "exit_code_msg",
    "private_ip",
    "bindings",
    "linked_to_container",
  ],
};

function missing(kind: string, obj: Record<string, unknown>): string[] {
  return SPEC_FIELDS[kind]!.filter((f) => !(f in obj));
}

describe("objects carry every field historical clients read", () => {
  test("nodes carry docker_version equal to engine_version (the CLI's node ls), in lists and alone", async () => {
    const list = await call(h, alice, "GET", "/api/infra/v1/node/");
    assert.equal(list.status, 200);
    assert.equal(list.body.objects.length, 2);
    for (const node of list.body.objects) {
      assert.equal(typeof node.docker_version, "string");
      assert.notEqual(node.docker_version, "");
      assert.equal(node.docker_version, node.engine_version);
      assert.equal(node.docker_execdriver, node.engine_execdriver);
      assert.equal(node.docker_graphdriver, node.engine_graphdriver);
      const one = await call(h, alice, "GET", node.resource_uri);
      assert.equal(one.body.docker_version, node.engine_version);
      assert.deepEqual(missing("node", one.body), []);
    }
  });

  test("containers carry the Go SDK's exit_code_message next to exit_code_msg", async () => {
    const c = (await call(h, alice, "GET", container)).body;
    assert.ok("exit_code_message" in c);
    assert.equal(c.exit_code_message, c.exit_code_msg);
    const listed = (await call(h, alice, "GET", `/api/app/v1/container/?service=${service.resource_uri}`))
      .body;
    assert.equal(listed.objects[0].exit_code_message, listed.objects[0].exit_code_msg);
  });

  test("node clusters, nodes, stacks, services, containers, actions and registries have every field of the spec's tables", async () => {
    const cluster = (await call(h, alice, "GET", "/api/infra/v1/nodecluster/")).body.objects[0];
    assert.deepEqual(missing("nodecluster", cluster), []);
    const stack = await call(h, alice, "POST", "/api/app/v1/stack/", { name: "fields" });
    assert.equal(stack.status, 201, stack.raw);
    assert.deepEqual(missing("stack", stack.body), []);
    assert.deepEqual(missing("service", (await call(h, alice, "GET", service.resource_uri)).body), []);
    assert.deepEqual(missing("container", (await call(h, alice, "GET", container)).body), []);
    const actions = (await call(h, alice, "GET", "/api/audit/v1/action/")).body.objects;
    assert.ok(actions.length > 0);
    for (const a of actions) assert.deepEqual(missing("action", a), []);
    const registries = await call(h, alice, "GET", "/api/repo/v1/registry/");
    assert.equal(registries.status, 200);
    for (const r of registries.body.objects) {
      for (const f of [
        "resource_uri",
        "name",
        "host",
        "is_native_registry",
        "is_ssl",
        "port",
        "is_tutum_registry",
      ])
        assert.ok(f in r, `registry ${f}`);
    }
  });
});

describe("boolean query parameters as clients send them", () => {
  test("POST …/service/<uuid>/redeploy/?reuse_volumes=True (Python's str(True)) is accepted", async () => {
    const r = await h.app.inject({
      method: "POST",
      url: `${service.resource_uri}redeploy/?reuse_volumes=True`,
      headers: { authorization: alice.auth, accept: "application/json", "content-type": "application/json" },
    });
    assert.equal(r.statusCode, 202, r.body);
    const action = r.headers["x-platform-action-uri"] as string;
    await waitFor("the redeploy", async () => (await call(h, alice, "GET", action)).body.state === "Success");
    await inState(h, alice, service.resource_uri, "Running");
    container = (await call(h, alice, "GET", service.resource_uri)).body.containers[0];
  });

  test("every spelling of true and false is read as such; anything else is a 400 naming the parameter", async () => {
    for (const value of ["true", "False", "TRUE", "1", "0", "yes", "No", "YES"]) {
      const r = await call(h, alice, "GET", `/api/repo/v1/registry/?is_native_registry=${value}`);
      assert.equal(r.status, 200, `is_native_registry=${value}: ${r.raw}`);
    }
    for (const value of ["maybe", "2", "", "on"]) {
      const r = await call(h, alice, "GET", `/api/repo/v1/registry/?is_native_registry=${value}`);
      assert.equal(r.status, 400, `is_native_registry=${value}`);
      assert.equal(r.body.code, "invalid_field");
      assert.match(r.body.error, /is_native_registry/);
      assert.deepEqual(
        r.body.details.map((d: Frame) => d.field),
        ["is_native_registry"],
      );
    }
    const bad = await call(h, alice, "POST", `${service.resource_uri}redeploy/?reuse_volumes=sure`);
    assert.equal(bad.status, 400);
    assert.match(bad.body.error, /reuse_volumes/);
  });

  test("include_related=True and =no filter actions as true and false do", async () => {
    const uri = service.resource_uri;
    const withRelated = await call(
      h,
      alice,
      "GET",
      `/api/audit/v1/action/?object=${uri}&include_related=True`,
    );
    const canonicalTrue = await call(
      h,
      alice,
      "GET",
      `/api/audit/v1/action/?object=${uri}&include_related=true`,
    );
    assert.equal(withRelated.status, 200, withRelated.raw);
    assert.equal(withRelated.body.meta.total_count, canonicalTrue.body.meta.total_count);
    const without = await call(h, alice, "GET", `/api/audit/v1/action/?object=${uri}&include_related=no`);
    const canonicalFalse = await call(
      h,
      alice,
      "GET",
      `/api/audit/v1/action/?object=${uri}&include_related=false`,
    );
    assert.equal(without.status, 200, without.raw);
    assert.equal(without.body.meta.total_count, canonicalFalse.body.meta.total_count);
  });

  test("follow=False on a log stream sends the tail and closes; follow=maybe is a 400 on the upgrade", async () => {
    const { frames, closed } = await drain(`${base}${container}logs/?follow=False`, alice.auth);
    assert.equal(closed.code, 1000);
    assert.ok(
      frames.some((f) => f.type === "log" && f.log === "hello\n"),
      JSON.stringify(frames),
    );
    const r = await refusal(`${base}${container}logs/?follow=maybe`, alice.auth);
    assert.equal(r.status, 400);
    assert.match(r.body.error, /follow/);
  });
});

describe("stream paths without the /api prefix, with credentials in the query", () => {
  test("exec at /app/v1/container/<uuid>/exec/?user=…&token=…&command=… (the Go SDK's dial)", async () => {
    const path = container.replace(/^\/api/, "");
    assert.match(path, /^\/app\/v1\/alice\/container\//);
    for (const p of [path, path.replace("/alice/", "/")]) {
      const s = await openStream(`${base}${p}exec/?${creds(alice)}&command=${encodeURIComponent("echo hi")}`);
      const closed = await s.closed;
      assert.equal(output(s.frames), "hi\n");
      assert.equal(closed.reason, "exit_code=0");
    }
  });

  test("the prefix-less paths refuse as the others do: 401 without credentials, 404 for another user's container", async () => {
    const path = `${container.replace(/^\/api/, "")}exec/?command=id`;
    const none = await refusal(`${base}${path}`);
    assert.equal(none.status, 401);
    assert.equal(none.headers["www-authenticate"], 'Basic realm="berth"');
    const wrongKey = await refusal(`${base}${path}&user=alice&token=nope`);
    assert.equal(wrongKey.status, 401);
    assert.equal((await refusal(`${base}${path}&${creds(bob)}`)).status, 404);
    assert.equal(
      (await refusal(`${base}/app/v1/container/${uuidOf(container)}/exec/?${creds(bob)}`)).status,
      404,
    );
  });

  test("action logs at /audit/v1/action/<uuid>/logs/, container and service logs at /app/v1/…/logs/", async () => {
    const actions = (await call(h, alice, "GET", `/api/audit/v1/action/?object=${service.resource_uri}`)).body
      .objects;
    const start = actions.find((a: Frame) => a.action === "Service Start");
    assert.ok(start, "the start action");
    const alog = await drain(`${base}/audit/v1/action/${start.uuid}/logs/?${creds(alice)}`, "");
    assert.equal(alog.closed.code, 1000);
    assert.ok(alog.frames.length > 0 && alog.frames.every((f) => f.type === "log"));

    const clog = await drain(
      `${base}${container.replace(/^\/api/, "")}logs/?follow=false&${creds(alice)}`,
      "",
    );
    assert.ok(clog.frames.some((f) => f.log === "hello\n"));
    const slog = await drain(
      `${base}/app/v1/service/${uuidOf(service.resource_uri)}/logs/?follow=false&${creds(alice)}`,
      "",
    );
    assert.ok(slog.frames.some((f) => f.log === "hello\n" && f.source === "shell-1"));
  });

  test("events at /audit/v1/[ns/]events/ and /v1/events, with query credentials", async () => {
    const streams = await Promise.all(
      ["/audit/v1/events/", "/audit/v1/alice/events/", "/v1/events"].map((p) =>
        openStream(`${base}${p}?${creds(alice)}`),
      ),
    );
    const r = await call(h, alice, "PATCH", service.resource_uri, { nickname: "renamed" });
    assert.equal(r.status, 200, r.raw);
    for (const s of streams) {
      await s.until("the service update", (fs) =>
        fs.some((f) => f.type === "service" && f.resource_uri === service.resource_uri),
      );
      s.close();
    }
    assert.equal((await refusal(`${base}/audit/v1/events/`)).status, 401);
    assert.equal((await refusal(`${base}/audit/v1/alice/events/?${creds(bob)}`)).status, 404);
  });
});

describe("one node's events (the Go SDK's Node.Events)", () => {
  test("the node's stream carries its containers' events and not those of containers elsewhere", async () => {
    const nodes = (await call(h, alice, "GET", "/api/infra/v1/node/")).body.objects as Frame[];
    const onNode = (await call(h, alice, "GET", container)).body.node as string;
    const other = nodes.find((n) => n.resource_uri !== onNode)!;
    const nodePath = onNode.replace(/^\/api/, "");
    const viaApi = await openStream(`${base}${onNode}events/`, { auth: alice.auth });
    const viaStreamHost = await openStream(`${base}${nodePath}events/?${creds(alice)}`);
    const otherNode = await openStream(
      `${base}/infra/v1/node/${uuidOf(other.resource_uri)}/events/?${creds(alice)}`,
    );

    const stop = await call(h, alice, "POST", `${container}stop/`);
    assert.equal(stop.status, 202, stop.raw);
    await inState(h, alice, container, "Stopped");
    for (const s of [viaApi, viaStreamHost]) {
      const frames = await s.until("the container's stop", (fs) =>
        fs.some((f) => f.resource_uri === container && f.state === "Stopped"),
      );
      for (const f of frames) {
        assert.ok(
          f.resource_uri === onNode || f.parents.includes(onNode),
          `${f.type} ${f.resource_uri} is about the node`,
        );
      }
    }
    // The stop action's events (parents: the container) are not the node's; the other node saw nothing of this container.
    assert.ok(!otherNode.frames.some((f) => f.resource_uri === container));
    for (const s of [viaApi, viaStreamHost, otherNode]) s.close();
    const start = await call(h, alice, "POST", `${container}start/`);
    assert.equal(start.status, 202, start.raw);
    await inState(h, alice, container, "Running");
  });

  test("another user's node is a 404 on the upgrade, no credentials a 401", async () => {
    const node = (await call(h, alice, "GET", container)).body.node as string;
    assert.equal((await refusal(`${base}${node}events/`, bob.auth)).status, 404);
    assert.equal((await refusal(`${base}${node.replace(/^\/api/, "")}events/`)).status, 401);
    assert.equal((await refusal(`${base}${node}events/`)).status, 401);
  });
});

describe("operation names of the Go SDK", () => {
  test("POST …/node/<uuid>/docker-upgrade/ (Node.Upgrade) is the engine upgrade", async () => {
    const node = (await call(h, alice, "GET", "/api/infra/v1/node/")).body.objects[0] as Frame;
    const r = await call(h, alice, "POST", `/api/infra/v1/node/${node.uuid}/docker-upgrade/`);
    assert.equal(r.status, 202, r.raw);
    assert.equal(r.body.state, "Upgrading");
    const action = (await call(h, alice, "GET", r.headers["x-platform-action-uri"] as string)).body;
    assert.equal(action.action, "Node Engine Upgrade");
    await inState(h, alice, node.resource_uri, "Deployed");
  });
});
