// Stacks through the API on simulated nodes (fake engines): create in both dialects at once,
// start in link order, the state table, export → update round trips, one action per operation
// whose log shows every service, relations, change-feed entries and terminate.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { stackFileServices } from "../../src/domain/stackfile.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";

let h: Harness;
let alice: Caller;
let nodes: string[];

const AWS = {
  region: "/api/infra/v1/region/aws/us-east-1/",
  node_type: "/api/infra/v1/nodetype/aws/t2.micro/",
};

before(async () => {
  h = await startHarness({
    env: { BERTH_RECONCILE_INTERVAL_MS: "200", BERTH_CONTAINER_STOP_TIMEOUT_S: "1" },
  });
  alice = await createUser(h, "alice");
  const c = (
    await call(h, alice, "POST", "/api/infra/v1/nodecluster/", { name: "pool", ...AWS, target_num_nodes: 2 })
  ).body;
  await call(h, alice, "POST", `${c.resource_uri}deploy/`);
  const done = await waitFor("cluster", async () => {
    const r = (await call(h, alice, "GET", c.resource_uri)).body;
    return r.state === "Deployed" ? r : undefined;
  });
  nodes = done.nodes;
});
after(() => h.close());

async function get(uri: string) {
  const r = await call(h, alice, "GET", uri);
  assert.equal(r.status, 200, r.raw);
  return r.body;
}

async function until(uri: string, state: string, timeoutMs = 15_000) {
  return waitFor(
    `${uri} ${state}`,
    async () => {
      const r = await get(uri);
      return r.state === state ? r : undefined;
    },
    timeoutMs,
  );
}

interface ActionWithLog {
  uuid: string;
  state: string;
  action: string;
  object: string;
  log: string[];
}

/** Waits for the action of a response to end; returns it with its log lines. */
async function actionOf(res: { headers: Record<string, unknown> }): Promise<ActionWithLog> {
  const uri = res.headers["x-platform-action-uri"] as string;
  const a = await waitFor(
    `action ${uri}`,
    async () => {
      const r = await get(uri);
      return ["Success", "Failed", "Canceled"].includes(r.state) ? r : undefined;
    },
    20_000,
  );
  const log = (await h.store.actions.actionLogTail(a.uuid, 1000)).map((l) => l.line);
  return { ...a, log };
}

/** The services of a stack by name, as the API shows them. */
async function servicesOf(stack: { services: string[] }) {
  const out: Record<string, Record<string, unknown> & { containers: string[]; resource_uri: string }> = {};
  for (const uri of stack.services) {
    const s = await get(uri);
    out[s.name] = s;
  }
  return out;
}

const SLEEP = "sleep 100000";

/** A three-tier stack written in both dialects at once; `front` links forward to `app`. */
const SHOP = {
  name: "shop",
  nickname: "The shop",
  services: [
    {
      name: "front",
      image: "busybox:local",
      run_command: SLEEP,
      container_ports: [{ protocol: "tcp", inner_port: 80, published: true }],
      links: ["app:backend"],
    },
    {
      name: "app",
      image: "busybox:local",
      command: SLEEP,
      target_num_containers: "2",
      expose: ["8080"],
      environment: { TIER: "app" },
      links: ["db"],
      deployment_strategy: "high_availability",
    },
    {
      name: "db",
      image: "busybox:local",
      command: ["sleep", "100000"],
      volumes: ["/data"],
      expose: [5432],
      container_envvars: [{ key: "ROLE", value: "db" }],
      mem_limit: "64m",
      tags: [],
    },
  ],
};

describe("stacks on simulated nodes", () => {
  let stack: { resource_uri: string; uuid: string; services: string[]; state: string };

  test("create takes both dialects in one list, links by name (also forward), and starts nothing", async () => {
    const res = await call(h, alice, "POST", "/api/app/v1/stack/", SHOP);
    assert.equal(res.status, 201, res.raw);
    stack = res.body;
    assert.equal(res.body.name, "shop");
    assert.equal(res.body.nickname, "The shop");
    assert.equal(res.body.state, "Not Running");
    assert.equal(res.body.synchronized, true);
    assert.equal(res.body.deployed_datetime, null);
    assert.equal(res.body.destroyed_datetime, null);
    assert.match(res.body.resource_uri, /^\/api\/app\/v1\/alice\/stack\/[0-9a-f-]{36}\/$/);
    assert.equal(res.body.services.length, 3);
    const s = await servicesOf(res.body);
    for (const svc of Object.values(s)) {
      assert.equal(svc.stack, stack.resource_uri);
      assert.equal(svc.state, "Not running");
    }
    assert.deepEqual(s.front!.linked_to_service, [
      { name: "backend", from_service: s.front!.resource_uri, to_service: s.app!.resource_uri },
    ]);
    assert.deepEqual(s.app!.linked_to_service, [
      { name: "db", from_service: s.app!.resource_uri, to_service: s.db!.resource_uri },
    ]);
    assert.equal(s.app!.target_num_containers, 2);
    assert.equal(s.app!.deployment_strategy, "HIGH_AVAILABILITY");
    assert.equal(s.db!.memory, 64);
    assert.equal(s.db!.run_command, "sleep 100000");
    assert.deepEqual(s.db!.bindings, [
      { host_path: null, container_path: "/data", rewritable: true, volumes_from: null },
    ]);
    assert.deepEqual(
      (s.app!.container_ports as { inner_port: number; published: boolean }[]).map((p) => [
        p.inner_port,
        p.published,
      ]),
      [[8080, false]],
    );
    const listed = await get("/api/app/v1/alice/stack/?name=shop");
    assert.equal(listed.meta.total_count, 1);
    assert.equal(listed.objects[0].uuid, stack.uuid);
    assert.equal(
      (await get(`/api/app/v1/stack/?uuid__startswith=${stack.uuid.slice(0, 8)}`)).meta.total_count,
      1,
    );
    assert.equal((await get(`/api/app/v1/service/?stack__name=shop`)).meta.total_count, 3);
    const action = await get(res.headers["x-platform-action-uri"] as string);
    assert.equal(action.action, "Stack Create");
    assert.equal(action.object, stack.resource_uri);
  });

  test("a bad service means nothing is created; every problem names its service and field", async () => {
    const before = (await get("/api/app/v1/service/")).meta.total_count;
    const res = await call(h, alice, "POST", "/api/app/v1/stack/", {
      name: "broken",
      services: [
        { name: "good", image: "busybox:local" },
        { name: "web", image: "busybox:local", ports: ["80", "http"], build: "." },
        {
          name: "worker",
          image: "busybox:local",
          links: ["nowhere"],
          container_envvars: [{ key: "1X", value: "x" }],
        },
      ],
    });
    assert.equal(res.status, 400, res.raw);
    assert.equal(res.body.code, "invalid_field");
    assert.match(res.body.error, /^services\.web\.build: is not supported: .* \(and 3 more problems\)$/);
    const fields = res.body.details.map((d: { field: string }) => d.field);
    assert.ok(fields.includes("services.web.ports[1]"), fields.join(", "));
    assert.ok(fields.includes("services.web.build"), fields.join(", "));
    assert.ok(fields.includes("services.worker.links[0]"), fields.join(", "));
    assert.ok(fields.includes("services.worker.container_envvars[0].key"), fields.join(", "));
    assert.equal((await get("/api/app/v1/service/")).meta.total_count, before, "no service was created");
    assert.equal((await get("/api/app/v1/stack/?name=broken")).meta.total_count, 0, "nor the stack");

    const wrapper = await call(h, alice, "POST", "/api/app/v1/stack/", {
      name: "compose",
      version: "3",
      services: { web: { image: "nginx" } },
    });
    assert.equal(wrapper.status, 400);
    assert.deepEqual(
      wrapper.body.details.map((d: { field: string }) => d.field),
      ["version", "services"],
    );
    const taken = await call(h, alice, "POST", "/api/app/v1/stack/", {
      name: "other",
      services: [{ name: "db", image: "busybox:local" }],
    });
    assert.equal(taken.status, 409, taken.raw);
    assert.equal(taken.body.code, "name_taken");
    assert.equal((await call(h, alice, "POST", "/api/app/v1/stack/", { name: "shop" })).status, 409);
    assert.equal((await call(h, alice, "POST", "/api/app/v1/stack/", { name: "Bad.Name" })).status, 400);
    assert.equal((await get("/api/app/v1/service/")).meta.total_count, before);
  });

  test("a cycle in links is a 400 at create", async () => {
    const res = await call(h, alice, "POST", "/api/app/v1/stack/", {
      name: "loop",
      services: [
        { name: "a", image: "busybox:local", links: ["b"] },
        { name: "b", image: "busybox:local", links: ["c"] },
        { name: "c", image: "busybox:local", linked_to_service: [{ to_service: "a" }] },
      ],
    });
    assert.equal(res.status, 400, res.raw);
    assert.equal(res.body.details[0].field, "services.a.links");
    assert.match(res.body.error, /links form a cycle \(a → b → c → a\)/);
    assert.equal((await get("/api/app/v1/stack/?name=loop")).meta.total_count, 0);
  });

  test("a Not Running stack refuses stop and redeploy, naming its state and where they are allowed", async () => {
    const stop = await call(h, alice, "POST", `${stack.resource_uri}stop/`);
    assert.equal(stop.status, 409);
    assert.equal(stop.body.error, "stack shop is Not Running; stop is allowed in Running, Partly running");
    const redeploy = await call(h, alice, "POST", `${stack.resource_uri}redeploy/`);
    assert.equal(redeploy.status, 409);
    assert.match(redeploy.body.error, /redeploy is allowed in Running, Partly running, Stopped/);
  });

  test("start is one action: services start in link order and every one ends Running", async () => {
    const res = await call(h, alice, "POST", `${stack.resource_uri}start/`);
    assert.equal(res.status, 202, res.raw);
    assert.equal(res.body.state, "Starting");
    const a = await actionOf(res);
    assert.equal(a.state, "Success", a.log.join("\n"));
    assert.equal(a.action, "Stack Start");
    assert.equal(a.object, stack.resource_uri);
    const at = (line: string) => {
      const i = a.log.findIndex((l) => l.startsWith(line));
      assert.ok(i >= 0, `log has "${line}":\n${a.log.join("\n")}`);
      return i;
    };
    assert.ok(at("Starting service db (1 of 3)") < at("Service db is Running"));
    assert.ok(at("Service db is Running") < at("Starting service app (2 of 3)"));
    assert.ok(at("Started app-1") < at("Service app is Running"));
    assert.ok(at("Service app is Running") < at("Starting service front (3 of 3)"));
    assert.ok(at("Started front-1") < at("Service front is Running"));

    const running = await until(stack.resource_uri, "Running");
    assert.notEqual(running.deployed_datetime, null);
    assert.equal(running.synchronized, true);
    const s = await servicesOf(running);
    assert.equal(s.app!.running_num_containers, 2);
    for (const svc of Object.values(s)) {
      assert.equal(svc.state, "Running");
      for (const uri of svc.containers) assert.equal((await get(uri)).state, "Running");
    }
    // Link variables of the front's container name the app's containers by the alias.
    const front = await get(s.front!.containers[0]!);
    const env = Object.fromEntries(
      (front.calculated_envvars as { key: string; value: string }[]).map((e) => [e.key, e.value]),
    );
    assert.match(env.BACKEND_PORT_8080_TCP ?? "", /^tcp:\/\/[\d.]+:8080$/);
    assert.equal(env.BACKEND_ENV_TIER, "app");

    const refused = await call(h, alice, "POST", `${stack.resource_uri}start/`);
    assert.equal(refused.status, 409);
    assert.equal(
      refused.body.error,
      "stack shop is Running; start is allowed in Not Running, Stopped, Partly running",
    );
  });

  test("include_related of the stack covers its services and all their containers", async () => {
    const s = await servicesOf(await get(stack.resource_uri));
    const related = await h.relations.related(h.store, stack.resource_uri);
    for (const svc of Object.values(s)) {
      assert.ok(related.includes(svc.resource_uri));
      for (const c of svc.containers) assert.ok(related.includes(c), `${c} is related`);
    }
    assert.ok(related.includes(stack.resource_uri));
    const actions = await get(
      `/api/audit/v1/action/?object=${encodeURIComponent(stack.resource_uri)}&include_related=true`,
    );
    assert.ok(actions.objects.some((a: { action: string }) => a.action === "Stack Start"));
  });

  test("export → update with the result changes nothing", async () => {
    const exported = await get(`${stack.resource_uri}export/`);
    assert.deepEqual(Object.keys(exported).sort(), ["app", "db", "front"]);
    assert.deepEqual(exported.front, {
      image: "busybox:local",
      command: SLEEP,
      ports: ["80"],
      links: ["app:backend"],
    });
    assert.deepEqual(exported.app, {
      image: "busybox:local",
      command: SLEEP,
      environment: { TIER: "app" },
      expose: ["8080"],
      links: ["db"],
      target_num_containers: 2,
      deployment_strategy: "high_availability",
    });
    assert.deepEqual(exported.db, {
      image: "busybox:local",
      command: SLEEP,
      environment: { ROLE: "db" },
      expose: ["5432"],
      volumes: ["/data"],
      mem_limit: "64m",
    });
    const rows = async () =>
      Object.fromEntries(
        (await h.store.services.servicesOfStack(stack.uuid)).map((r) => [
          r.name,
          [r.spec_version, r.version],
        ]),
      );
    const beforeRows = await rows();
    const res = await call(h, alice, "PATCH", stack.resource_uri, { services: stackFileServices(exported) });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.synchronized, true);
    assert.equal(res.body.state, "Running");
    assert.deepEqual(await rows(), beforeRows, "no service was written");
    assert.deepEqual(await get(`${stack.resource_uri}export/`), exported);
    const action = await get(res.headers["x-platform-action-uri"] as string);
    assert.equal(action.action, "Stack Update");
    assert.equal(action.state, "Success");
  });

  test("an update may not change what Update service does not take, and may not close a cycle", async () => {
    const exported = await get(`${stack.resource_uri}export/`);
    const changed = await call(h, alice, "PATCH", stack.resource_uri, {
      services: stackFileServices({ db: { ...exported.db, volumes: ["/other"] } }),
    });
    assert.equal(changed.status, 400, changed.raw);
    assert.equal(changed.body.details[0].field, "services.db.volumes");
    assert.match(changed.body.details[0].problem, /cannot be changed by updating the stack/);
    const cycle = await call(h, alice, "PATCH", stack.resource_uri, {
      services: [{ name: "db", links: ["front"] }],
    });
    assert.equal(cycle.status, 400, cycle.raw);
    assert.match(cycle.body.error, /cycle \(db → front → app → db\)/);
    const unknown = await call(h, alice, "PATCH", stack.resource_uri, {
      services: [{ name: "db", build: "." }],
    });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.body.details[0].field, "services.db.build");
  });

  test("editing one service's environment marks only it unsynchronized; redeploy brings it back", async () => {
    const exported = await get(`${stack.resource_uri}export/`);
    exported.app.environment.TIER = "app2";
    const res = await call(h, alice, "PATCH", stack.resource_uri, { services: stackFileServices(exported) });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.synchronized, false);
    const s = await servicesOf(res.body);
    assert.equal(s.app!.synchronized, false);
    assert.equal(s.front!.synchronized, true);
    assert.equal(s.db!.synchronized, true);

    const redeploy = await call(h, alice, "POST", `${stack.resource_uri}redeploy/`);
    assert.equal(redeploy.status, 202, redeploy.raw);
    assert.equal(redeploy.body.state, "Redeploying");
    const a = await actionOf(redeploy);
    assert.equal(a.state, "Success", a.log.join("\n"));
    assert.ok(a.log.some((l) => l.startsWith("Redeploying service app")));
    const back = await until(stack.resource_uri, "Running");
    assert.equal(back.synchronized, true);
    const app = (await servicesOf(back)).app!;
    assert.equal(app.synchronized, true);
    const c = await get(app.containers[0]!);
    assert.ok(
      (c.calculated_envvars as { key: string; value: string }[]).some(
        (e) => e.key === "TIER" && e.value === "app2",
      ),
    );
  });

  test("an update adds a service; the stack is Partly running and start starts only the new one", async () => {
    const res = await call(h, alice, "PATCH", stack.resource_uri, {
      services: [
        { name: "cache", image: "busybox:local", command: SLEEP, links: ["db:store"], expose: ["6379"] },
      ],
    });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.services.length, 4);
    assert.equal(res.body.state, "Partly running");
    const start = await call(h, alice, "POST", `${stack.resource_uri}start/`);
    assert.equal(start.status, 202, start.raw);
    const a = await actionOf(start);
    assert.equal(a.state, "Success", a.log.join("\n"));
    assert.deepEqual(
      a.log.filter((l) => / service \w+ \(\d of \d\)$/.test(l)),
      ["Starting service cache (4 of 4)"],
    );
    const running = await until(stack.resource_uri, "Running");
    assert.equal((await servicesOf(running)).cache!.state, "Running");
  });

  test("stop is one action, clients first; the stack follows a service started by hand", async () => {
    const stop = await call(h, alice, "POST", `${stack.resource_uri}stop/`);
    assert.equal(stop.status, 202, stop.raw);
    assert.equal(stop.body.state, "Stopping");
    const a = await actionOf(stop);
    assert.equal(a.state, "Success", a.log.join("\n"));
    const order = a.log.filter((l) => l.startsWith("Stopping service")).map((l) => l.split(" ")[2]);
    assert.ok(order.indexOf("front") < order.indexOf("app") && order.indexOf("app") < order.indexOf("db"));
    const stopped = await until(stack.resource_uri, "Stopped");
    const db = (await servicesOf(stopped)).db!;
    assert.equal(db.state, "Stopped");

    // A service started on its own: the stack's state follows, with a change-feed entry.
    const from = await h.store.latestRevision();
    const one = await call(h, alice, "POST", `${db.resource_uri}start/`);
    assert.equal(one.status, 202);
    await actionOf(one);
    await until(stack.resource_uri, "Partly running");
    const feed = await h.store.changesSince(from, 1000);
    assert.ok(
      feed.some(
        (c) => c.type === "stack" && c.resource_uri === stack.resource_uri && c.state === "Partly running",
      ),
      "a stack entry in the change feed",
    );
  });

  test("terminate removes every service and container and leaves the stack Terminated", async () => {
    const del = await call(h, alice, "DELETE", stack.resource_uri);
    assert.equal(del.status, 202, del.raw);
    assert.equal(del.body.state, "Terminating");
    const a = await actionOf(del);
    assert.equal(a.state, "Success", a.log.join("\n"));
    assert.equal(a.action, "Stack Terminate");
    const gone = await until(stack.resource_uri, "Terminated");
    assert.notEqual(gone.destroyed_datetime, null);
    assert.equal(gone.services.length, 4, "a terminated stack still lists its services");
    for (const uri of gone.services) {
      const s = await get(uri);
      assert.equal(s.state, "Terminated");
      assert.deepEqual(s.containers, []);
    }
    for (const uuid of nodes.map((n) => n.split("/").at(-2)!)) {
      const node = (await h.store.nodes.findNode(uuid))!;
      const left = await h.engines
        .forNode(node)
        .listContainers({ all: true, labels: { "io.berth.namespace": "alice" } });
      assert.deepEqual(left, [], "no engine container is left");
    }
    const feed = await h.store.changesSince(0, 100_000);
    const states = feed.filter((c) => c.type === "stack" && c.resource_uri === stack.resource_uri);
    assert.equal(states[0]?.action, "create");
    assert.equal(states.at(-1)?.action, "delete");
    assert.equal(states.at(-1)?.state, "Terminated");
    for (const s of ["Starting", "Running", "Redeploying", "Stopping", "Stopped", "Terminating"]) {
      assert.ok(
        states.some((c) => c.state === s),
        `a change-feed entry for ${s}`,
      );
    }
    assert.equal((await call(h, alice, "PATCH", stack.resource_uri, { services: [] })).status, 409);
    assert.equal((await call(h, alice, "DELETE", stack.resource_uri)).status, 409);
    // The names are free again.
    const again = await call(h, alice, "POST", "/api/app/v1/stack/", {
      name: "shop",
      services: SHOP.services,
    });
    assert.equal(again.status, 201, again.raw);
  });

  test("a service of role global gets its key with the stack, and loses it when the stack is terminated", async () => {
    const user = (await h.store.identity.findUserByName("alice"))!;
    const serviceKeys = async () =>
      (await h.store.identity.listApiKeys(user.id)).filter((k) => k.service_uuid !== null);
    const res = await call(h, alice, "POST", "/api/app/v1/stack/", {
      name: "ops",
      services: [{ name: "agent", image: "busybox:local", roles: ["global"] }],
    });
    assert.equal(res.status, 201, res.raw);
    const [agent] = res.body.services as string[];
    assert.deepEqual(
      (await serviceKeys()).map((k) => k.service_uuid),
      [agent!.split("/").at(-2)],
      "the key is written with the service",
    );
    const del = await call(h, alice, "DELETE", res.body.resource_uri);
    assert.equal(del.status, 202, del.raw);
    assert.equal((await actionOf(del)).state, "Success");
    assert.equal((await until(res.body.resource_uri, "Terminated")).state, "Terminated");
    assert.deepEqual(await serviceKeys(), [], "terminate revokes it");
  });

  test("another namespace's stack is a 404", async () => {
    const bob = await createUser(h, "bob");
    const res = await call(h, bob, "GET", stack.resource_uri);
    assert.equal(res.status, 404);
    assert.equal((await call(h, bob, "GET", `/api/app/v1/stack/${stack.uuid}/export/`)).status, 404);
  });
});
