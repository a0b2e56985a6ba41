// Links as the HAProxy load balancer and the SDKs rely on them, on simulated nodes:
// - links added to (or removed from) a running service reach its containers at once: their
//   `linked_to_container` (with endpoints) follows the service's links and the targets' live
//   containers, an `update` event is emitted for each of them, and their link host entries are
//   rewritten in place; the variables need a redeploy, and `synchronized` says so;
// - `calculated_envvars` is exactly what the engine container was created with, and a service
//   started before the services it links to waits for them inside its action (or fails, saying why).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  call,
  containersOf,
  createService,
  deployCluster,
  engineContainer,
  envOf,
  finished,
  operate,
  runningService,
  type Sim,
  startSim,
  until,
  waitFor,
} from "../services/sim.ts";
import { type Frame, listen, openStream, type StreamClient } from "../streams/support.ts";

let s: Sim;
let base: string;

before(async () => {
  // Long enough for a linked service started 300 ms later to get its container on a loaded machine
  // (2 s was not, on PostgreSQL at load 15); the test of a wait that runs out pays it once.
  s = await startSim({ env: { BERTH_LINK_WAIT_S: "8" } });
  base = await listen(s.h);
  await deployCluster(s, { name: "pool", target_num_nodes: 2 });
});
after(() => s.close());

type Env = { key: string; value: string; origin: string }[];
const port = (inner_port: number) => [{ protocol: "tcp", inner_port }];

/** The link host entries (`host:ip`) the container's engine container holds now. */
async function hostsOf(containerUri: string): Promise<string[]> {
  const { engine, id } = await engineContainer(s, containerUri);
  return engine.hostEntries(id);
}

describe("links added to a running service reach its containers without a redeploy", () => {
  let web: Frame;
  let api: Frame;
  let lb: Frame;
  let lbContainer: string;
  let events: StreamClient;

  before(async () => {
    web = await runningService(s, { name: "web", container_ports: port(80) });
    api = await runningService(s, { name: "api", container_ports: port(8080) });
    lb = await runningService(s, {
      name: "lb",
      linked_to_service: [{ to_service: web.resource_uri, name: "web" }],
    });
    lbContainer = lb.containers[0];
    events = await openStream(`${base}/api/audit/v1/events/?type=container`, { auth: s.alice.auth });
  });
  after(() => events.close());

  test("PATCH linked_to_service: the running container lists the new target's containers with endpoints at once", async () => {
    const before = (await call(s.h, s.alice, "GET", lbContainer)).body;
    assert.deepEqual(
      before.linked_to_container.map((l: Frame) => l.to_container),
      web.containers,
    );
    const since = events.frames.length;
    const patched = await call(s.h, s.alice, "PATCH", lb.resource_uri, {
      linked_to_service: [
        { to_service: web.resource_uri, name: "web" },
        { to_service: api.resource_uri, name: "api" },
      ],
    });
    assert.equal(patched.status, 200, patched.raw);
    assert.equal(patched.body.linked_to_service.length, 2);

    const [apiC] = await containersOf(s, api);
    const now = (await call(s.h, s.alice, "GET", lbContainer)).body;
    const toApi = now.linked_to_container.find((l: Frame) => l.to_container === api.containers[0]);
    assert.ok(toApi, JSON.stringify(now.linked_to_container));
    assert.deepEqual(toApi, {
      name: "API_1",
      from_container: lbContainer,
      to_container: apiC.resource_uri,
      endpoints: { "8080/tcp": `tcp://${apiC.private_ip}:8080` },
    });
    assert.equal(now.linked_to_container.length, 2);
    await events.until("an update of the load balancer's container", (fs) =>
      fs.slice(since).some((f) => f.resource_uri === lbContainer && f.action === "update"),
    );
  });

  test("the link host names follow inside the running container; its variables need a redeploy, and synchronized says so", async () => {
    const [apiC] = await containersOf(s, api);
    await waitFor("the api host entries in lb-1", async () => {
      const hosts = await hostsOf(lbContainer);
      return hosts.includes(`api:${apiC.private_ip}`) && hosts.includes(`api-1:${apiC.private_ip}`);
    });
    const c = (await call(s.h, s.alice, "GET", lbContainer)).body;
    assert.equal(c.synchronized, false, "its environment lacks the api link's variables");
    assert.ok(
      !envOf(c.calculated_envvars).API_PORT_8080_TCP,
      "calculated_envvars is what it was created with",
    );
    assert.equal((await call(s.h, s.alice, "GET", lb.resource_uri)).body.synchronized, false);
  });

  test("the targets' containers as they change: a scaled target's new container is listed, with an event and a host entry", async () => {
    const since = events.frames.length;
    assert.equal(
      (await call(s.h, s.alice, "PATCH", api.resource_uri, { target_num_containers: 2 })).status,
      200,
    );
    await operate(s, api.resource_uri, "scale");
    const apiNow = (await call(s.h, s.alice, "GET", api.resource_uri)).body;
    const [, api2] = await containersOf(s, apiNow);
    assert.equal(api2.name, "api-2");
    const c = (await call(s.h, s.alice, "GET", lbContainer)).body;
    assert.ok(
      c.linked_to_container.some(
        (l: Frame) =>
          l.to_container === api2.resource_uri && l.endpoints["8080/tcp"] === `tcp://${api2.private_ip}:8080`,
      ),
      JSON.stringify(c.linked_to_container),
    );
    await events.until("an update of lb-1 when api-2 came up", (fs) =>
      fs.slice(since).some((f) => f.resource_uri === lbContainer && f.action === "update"),
    );
    await waitFor("api-2's host entry in lb-1", async () =>
      (await hostsOf(lbContainer)).includes(`api-2:${api2.private_ip}`),
    );
  });

  test("a redeploy gives the container the links' variables: calculated_envvars and synchronized follow", async () => {
    await operate(s, lb.resource_uri, "redeploy");
    const svc = await until(s, lb.resource_uri, "Running");
    assert.equal(svc.synchronized, true);
    const [c] = await containersOf(s, svc);
    const env = envOf(c.calculated_envvars);
    const [api1, api2] = await containersOf(s, (await call(s.h, s.alice, "GET", api.resource_uri)).body);
    assert.equal(env.API_1_PORT_8080_TCP, `tcp://${api1.private_ip}:8080`);
    assert.equal(env.API_2_PORT_8080_TCP, `tcp://${api2.private_ip}:8080`);
    assert.equal(c.synchronized, true);
  });

  test("a link removed from a running service leaves its containers at once, host entries too", async () => {
    const [apiC] = await containersOf(s, (await call(s.h, s.alice, "GET", api.resource_uri)).body);
    const since = events.frames.length;
    const patched = await call(s.h, s.alice, "PATCH", lb.resource_uri, {
      linked_to_service: [{ to_service: web.resource_uri, name: "web" }],
    });
    assert.equal(patched.status, 200, patched.raw);
    const c = (
      await call(s.h, s.alice, "GET", (await call(s.h, s.alice, "GET", lb.resource_uri)).body.containers[0])
    ).body;
    assert.deepEqual(
      c.linked_to_container.map((l: Frame) => l.to_container),
      web.containers,
    );
    await events.until("an update of the load balancer's container", (fs) =>
      fs.slice(since).some((f) => f.resource_uri === c.resource_uri && f.action === "update"),
    );
    await waitFor("the api entries gone from lb's hosts", async () => {
      const hosts = await hostsOf(c.resource_uri);
      return (
        !hosts.some((h) => h.startsWith("api")) &&
        hosts.includes(`web-1:${(await containersOf(s, web))[0].private_ip}`) &&
        hosts
      );
    });
    assert.ok(apiC.private_ip);
  });
});

describe("calculated_envvars tells the truth; a start waits for the services it links to", () => {
  test("two linked services started back to back, client first: the client waits, then holds the link variables its engine container really has", async () => {
    const db = await createService(s, {
      image: "busybox:local",
      run_command: "sleep 100000",
      name: "db",
      container_ports: port(5432),
      container_envvars: [{ key: "PASSWORD", value: "s3cret" }],
    });
    const app = await createService(s, {
      image: "busybox:local",
      run_command: "sleep 100000",
      name: "app",
      linked_to_service: [{ to_service: db.resource_uri, name: "database" }],
      container_envvars: [{ key: "MODE", value: "prod" }],
    });
    const startApp = await call(s.h, s.alice, "POST", `${app.resource_uri}start/`);
    assert.equal(startApp.status, 202, startApp.raw);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const startDb = await call(s.h, s.alice, "POST", `${db.resource_uri}start/`);
    assert.equal(startDb.status, 202, startDb.raw);

    const a = await finished(s, startApp);
    assert.equal(a.state, "Success", a.log.join("\n"));
    assert.ok(
      a.log.some((l) => l.includes("Waiting for linked service(s) db to have a running container")),
      a.log.join("\n"),
    );
    const [dbC] = await containersOf(s, await until(s, db.resource_uri, "Running"));
    const [appC] = await containersOf(s, await until(s, app.resource_uri, "Running"));
    const env = envOf(appC.calculated_envvars);
    assert.equal(env.DATABASE_PORT_5432_TCP, `tcp://${dbC.private_ip}:5432`);
    assert.equal(env.DATABASE_ENV_PASSWORD, "s3cret");
    assert.equal(env.DATABASE_NAME, "/app-1/database");

    // Exactly the engine's environment of the container, with origins.
    const { view, spec } = await engineContainer(s, appC.resource_uri);
    assert.deepEqual(
      Object.fromEntries((appC.calculated_envvars as Env).map((v) => [v.key, v.value])),
      view.env,
    );
    const origin = Object.fromEntries((appC.calculated_envvars as Env).map((v) => [v.key, v.origin]));
    assert.equal(origin.MODE, "user");
    assert.equal(origin.DATABASE_PORT_5432_TCP, "platform");
    assert.equal(origin.PLATFORM_CONTAINER_API_URI, "platform");
    assert.ok(spec.extraHosts?.includes(`database:${dbC.private_ip}`));
    assert.equal(appC.synchronized, true);
  });

  test("a linked service that never gets a running container: the start fails after the wait, saying what to do", async () => {
    const ghost = await createService(s, {
      image: "busybox:local",
      name: "ghost",
      container_ports: port(80),
    });
    const lonely = await createService(s, {
      image: "busybox:local",
      run_command: "sleep 100000",
      name: "lonely",
      linked_to_service: [{ to_service: ghost.resource_uri, name: "ghost" }],
    });
    const res = await call(s.h, s.alice, "POST", `${lonely.resource_uri}start/`);
    assert.equal(res.status, 202, res.raw);
    const a = await finished(s, res);
    assert.equal(a.state, "Failed");
    assert.ok(
      a.log.some((l) =>
        l.includes(
          "linked service(s) ghost had no running container after 8 s; start it, then start lonely again",
        ),
      ),
      a.log.join("\n"),
    );
    const after = (await call(s.h, s.alice, "GET", lonely.resource_uri)).body;
    assert.equal(after.current_num_containers, 0, "no container was created without its links");
    assert.equal(after.state, "Not running");
  });

  test("services linking to each other do not wait for each other", async () => {
    const one = await createService(s, { image: "busybox:local", run_command: "sleep 100000", name: "one" });
    const two = await createService(s, {
      image: "busybox:local",
      run_command: "sleep 100000",
      name: "two",
      linked_to_service: [{ to_service: one.resource_uri, name: "one" }],
    });
    const patched = await call(s.h, s.alice, "PATCH", one.resource_uri, {
      linked_to_service: [{ to_service: two.resource_uri, name: "two" }],
    });
    assert.equal(patched.status, 200, patched.raw);
    const a = await operate(s, one.resource_uri, "start");
    assert.ok(!a.log.some((l) => l.startsWith("Waiting")), a.log.join("\n"));
  });
});
