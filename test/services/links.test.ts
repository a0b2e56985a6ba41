// Links and injected environment on simulated nodes (CONTRACT §10): link variables and host
// entries, `link_variables`, `linked_to_container`, PLATFORM_* / DOCKERCLOUD_*, the role-global
// key in PLATFORM_AUTH, and sequential deployment.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { basic } from "../support/harness.ts";
import {
  call,
  containersOf,
  deployCluster,
  engineContainer,
  envOf,
  finished,
  operate,
  runningService,
  type Sim,
  startSim,
  until,
} from "./sim.ts";

let s: Sim;

before(async () => {
  s = await startSim();
  await deployCluster(s, { name: "pool", target_num_nodes: 2 });
});
after(() => s.close());

type Env = { key: string; value: string; origin: string }[];

describe("links", () => {
  // biome-ignore lint/suspicious/noExplicitAny: API bodies are arbitrary JSON.
  let pg: any;
  // biome-ignore lint/suspicious/noExplicitAny: API bodies are arbitrary JSON.
  let web: any;

  before(async () => {
    pg = await runningService(s, {
      name: "postgres",
      target_num_containers: 2,
      deployment_strategy: "HIGH_AVAILABILITY",
      container_ports: [{ protocol: "tcp", inner_port: 5432 }],
      container_envvars: [{ key: "PASSWORD", value: "s3cret" }],
    });
    web = await runningService(s, {
      name: "web",
      linked_to_service: [{ to_service: pg.resource_uri, name: "db" }],
      container_envvars: [{ key: "MODE", value: "prod" }],
      roles: ["global"],
    });
  });

  test("a linked service's containers get the target's variables, host names and endpoints", async () => {
    const [pg1, pg2] = await containersOf(s, pg);
    assert.equal(pg1.name, "postgres-1");
    assert.notEqual(pg1.node, pg2.node, "the targets run on different nodes");
    const [w] = await containersOf(s, web);
    const env = envOf(w.calculated_envvars);
    const expected: Record<string, string> = {
      DB_PORT: `tcp://${pg1.private_ip}:5432`,
      DB_PORT_5432_TCP: `tcp://${pg1.private_ip}:5432`,
      DB_PORT_5432_TCP_ADDR: pg1.private_ip,
      DB_PORT_5432_TCP_PORT: "5432",
      DB_PORT_5432_TCP_PROTO: "tcp",
      DB_NAME: "/web-1/db",
      DB_ENV_PASSWORD: "s3cret",
      DB_1_PORT_5432_TCP: `tcp://${pg1.private_ip}:5432`,
      DB_2_PORT_5432_TCP: `tcp://${pg2.private_ip}:5432`,
      DB_2_PORT_5432_TCP_ADDR: pg2.private_ip,
      DB_2_ENV_PASSWORD: "s3cret",
      MODE: "prod",
    };
    for (const [key, value] of Object.entries(expected)) assert.equal(env[key], value, key);
    const origins = Object.fromEntries((w.calculated_envvars as Env).map((e) => [e.key, e.origin]));
    assert.equal(origins.DB_PORT_5432_TCP, "platform");
    assert.equal(origins.MODE, "user");

    // The engine container got the same variables, and host entries for the link.
    const e = await engineContainer(s, w.resource_uri);
    for (const [key, value] of Object.entries(expected))
      assert.equal(e.view.env[key], value, `engine ${key}`);
    for (const host of [
      `db:${pg1.private_ip}`,
      `postgres-1:${pg1.private_ip}`,
      `postgres-2:${pg2.private_ip}`,
    ]) {
      assert.ok(e.spec.extraHosts?.includes(host), `${host} in ${JSON.stringify(e.spec.extraHosts)}`);
    }
    // Node FQDNs resolve through Berth's own records (CONTRACT §13), here the container's hosts.
    const node = (await call(s.h, s.alice, "GET", w.node)).body;
    assert.ok(
      e.spec.extraHosts?.includes(`${node.external_fqdn}:${node.public_ip}`),
      `node ${node.external_fqdn} in ${JSON.stringify(e.spec.extraHosts)}`,
    );

    assert.deepEqual(w.linked_to_container, [
      {
        name: "DB_1",
        from_container: w.resource_uri,
        to_container: pg1.resource_uri,
        endpoints: { "5432/tcp": `tcp://${pg1.private_ip}:5432` },
      },
      {
        name: "DB_2",
        from_container: w.resource_uri,
        to_container: pg2.resource_uri,
        endpoints: { "5432/tcp": `tcp://${pg2.private_ip}:5432` },
      },
    ]);
  });

  test("services show the link both ways, and the target's link_variables", async () => {
    const [pg1, pg2] = await containersOf(s, pg);
    const w = (await call(s.h, s.alice, "GET", web.resource_uri)).body;
    const link = { name: "db", from_service: web.resource_uri, to_service: pg.resource_uri };
    assert.deepEqual(w.linked_to_service, [link]);
    assert.equal(envOf(w.calculated_envvars).DB_PORT_5432_TCP, `tcp://${pg1.private_ip}:5432`);
    const p = (await call(s.h, s.alice, "GET", pg.resource_uri)).body;
    assert.deepEqual(p.linked_from_service, [link]);
    assert.deepEqual(p.linked_to_service, []);
    const lv = p.link_variables as Record<string, string>;
    assert.equal(lv.POSTGRES_PORT, `tcp://${pg1.private_ip}:5432`);
    assert.equal(lv.POSTGRES_PORT_5432_TCP_ADDR, pg1.private_ip);
    assert.equal(lv.POSTGRES_1_PORT_5432_TCP, `tcp://${pg1.private_ip}:5432`);
    assert.equal(lv.POSTGRES_2_PORT_5432_TCP, `tcp://${pg2.private_ip}:5432`);
    assert.equal(lv.POSTGRES_ENV_PASSWORD, "s3cret");
    assert.ok(!Object.keys(lv).some((k) => k.endsWith("_NAME")), "no client, so no NAME variables");
    // A container shows the service's variables applied to itself alone (spec "Containers").
    assert.deepEqual(pg1.link_variables, {
      POSTGRES_1_PORT: `tcp://${pg1.private_ip}:5432`,
      POSTGRES_1_PORT_5432_TCP: `tcp://${pg1.private_ip}:5432`,
      POSTGRES_1_PORT_5432_TCP_ADDR: pg1.private_ip,
      POSTGRES_1_PORT_5432_TCP_PORT: "5432",
      POSTGRES_1_PORT_5432_TCP_PROTO: "tcp",
      POSTGRES_1_ENV_PASSWORD: "s3cret",
    });
    assert.equal(pg2.link_variables.POSTGRES_2_PORT, `tcp://${pg2.private_ip}:5432`);
  });

  test("PLATFORM_* and DOCKERCLOUD_* are injected; PLATFORM_AUTH only into the engine", async () => {
    const [w] = await containersOf(s, web);
    const node = (await call(s.h, s.alice, "GET", w.node)).body;
    const env = envOf(w.calculated_envvars);
    const platform: Record<string, string> = {
      CONTAINER_API_URI: w.resource_uri,
      SERVICE_API_URI: web.resource_uri,
      NODE_API_URI: w.node,
      CONTAINER_FQDN: "web-1.alice.cont.berth.internal",
      SERVICE_FQDN: "web.alice.svc.berth.internal",
      NODE_FQDN: node.external_fqdn,
      REST_HOST: s.h.config.publicUrl,
      STREAM_HOST: s.h.config.publicUrl.replace(/^http/, "ws"),
    };
    const e = await engineContainer(s, w.resource_uri);
    for (const [name, value] of Object.entries(platform)) {
      for (const prefix of ["PLATFORM_", "DOCKERCLOUD_"]) {
        assert.equal(env[prefix + name], value, `${prefix}${name}`);
        assert.equal(e.view.env[prefix + name], value, `engine ${prefix}${name}`);
      }
    }
    assert.equal(env.PLATFORM_AUTH, undefined, "views never show the credential");
    assert.equal(env.DOCKERCLOUD_AUTH, undefined);
    assert.equal(envOf(web.calculated_envvars).PLATFORM_AUTH, undefined);
    assert.match(e.view.env.PLATFORM_AUTH ?? "", /^Basic /);
    assert.equal(e.view.env.DOCKERCLOUD_AUTH, e.view.env.PLATFORM_AUTH);
    // A service without role global gets no key.
    const [p1] = await containersOf(s, pg);
    assert.equal((await engineContainer(s, p1.resource_uri)).view.env.PLATFORM_AUTH, undefined);
  });

  test("the role-global key works only in its namespace and is revoked when the service is terminated", async () => {
    const org = await s.h.app.inject({
      method: "POST",
      url: "/api/v1.1/orgs/",
      headers: { authorization: s.alice.auth },
      payload: { name: "acme" },
    });
    assert.equal(org.statusCode, 201, org.body);
    const [w] = await containersOf(s, web);
    const auth = (await engineContainer(s, w.resource_uri)).view.env.PLATFORM_AUTH!;
    const get = (url: string, authorization: string) =>
      s.h.app.inject({ method: "GET", url, headers: { authorization } });

    const own = await get("/api/app/v1/service/", auth);
    assert.equal(own.statusCode, 200, own.body);
    assert.ok(own.json().objects.some((x: { name: string }) => x.name === "web"));
    assert.equal((await get("/api/app/v1/alice/service/", auth)).statusCode, 200);
    assert.equal((await get(web.resource_uri, auth)).statusCode, 200);
    // Alice herself may use the organization's namespace; the service's key may not.
    assert.equal((await get("/api/app/v1/acme/service/", s.alice.auth)).statusCode, 200);
    assert.equal((await get("/api/app/v1/acme/service/", auth)).statusCode, 404);

    await operate(s, web.resource_uri, "terminate");
    await until(s, web.resource_uri, "Terminated");
    const revoked = await get("/api/app/v1/service/", auth);
    assert.equal(revoked.statusCode, 401, revoked.body);
    // Alice's own key is untouched.
    assert.equal((await get("/api/app/v1/service/", basic("alice", s.alice.key))).statusCode, 200);
  });
});

describe("role global added and removed by an update", () => {
  test("adding the role gives redeployed containers a working key; removing it revokes the key", async () => {
    const svc = await runningService(s, { name: "robot" });
    const [c] = await containersOf(s, svc);
    assert.equal((await engineContainer(s, c.resource_uri)).view.env.PLATFORM_AUTH, undefined);

    const add = await call(s.h, s.alice, "PATCH", svc.resource_uri, { roles: ["global"] });
    assert.equal(add.status, 200, add.raw);
    assert.deepEqual(add.body.roles, ["global"]);
    assert.equal(add.body.synchronized, false);
    await operate(s, svc.resource_uri, "redeploy");
    await until(s, svc.resource_uri, "Running");
    const auth = (await engineContainer(s, c.resource_uri)).view.env.PLATFORM_AUTH;
    assert.match(auth ?? "", /^Basic /, "the redeployed container has PLATFORM_AUTH");
    const get = () =>
      s.h.app.inject({ method: "GET", url: "/api/app/v1/service/", headers: { authorization: auth! } });
    assert.equal((await get()).statusCode, 200);

    const remove = await call(s.h, s.alice, "PATCH", svc.resource_uri, { roles: [] });
    assert.equal(remove.status, 200, remove.raw);
    assert.equal((await get()).statusCode, 401, "the key is revoked with the role");
  });
});

describe("sequential deployment", () => {
  test("containers start one after another, each linked to the earlier ones", async () => {
    const res = await call(s.h, s.alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "seq",
      run_command: "sleep 100000",
      target_num_containers: 3,
      sequential_deployment: true,
      container_ports: [{ protocol: "tcp", inner_port: 80 }],
    });
    assert.equal(res.status, 201, res.raw);
    const start = await call(s.h, s.alice, "POST", `${res.body.resource_uri}start/`);
    const a = await finished(s, start);
    assert.equal(a.state, "Success", a.log.join("\n"));
    const steps = a.log.filter((l) => /^(Created|Started) seq-\d$/.test(l));
    assert.deepEqual(steps, [
      "Created seq-1",
      "Started seq-1",
      "Created seq-2",
      "Started seq-2",
      "Created seq-3",
      "Started seq-3",
    ]);
    const svc = await until(s, res.body.resource_uri, "Running");
    const [c1, c2, c3] = await containersOf(s, svc);
    const e1 = await engineContainer(s, c1.resource_uri);
    const e2 = await engineContainer(s, c2.resource_uri);
    const e3 = await engineContainer(s, c3.resource_uri);
    assert.ok(!Object.keys(e1.view.env).some((k) => k.startsWith("SEQ_")), "the first has no earlier ones");
    assert.equal(e2.view.env.SEQ_1_PORT_80_TCP, `tcp://${c1.private_ip}:80`);
    assert.equal(e2.view.env.SEQ_PORT_80_TCP_ADDR, c1.private_ip);
    assert.equal(e2.view.env.SEQ_2_PORT_80_TCP, undefined, "not linked to itself");
    assert.equal(e3.view.env.SEQ_1_PORT_80_TCP, `tcp://${c1.private_ip}:80`);
    assert.equal(e3.view.env.SEQ_2_PORT_80_TCP, `tcp://${c2.private_ip}:80`);
    assert.equal(e3.view.env.SEQ_3_PORT_80_TCP, undefined);
    // Each was created after the one before it was running.
    assert.ok(e2.view.createdAt >= (e1.view.startedAt ?? Infinity));
    assert.ok(e3.view.createdAt >= (e2.view.startedAt ?? Infinity));
  });
});
