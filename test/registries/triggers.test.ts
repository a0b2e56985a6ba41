// Service triggers on simulated nodes: created, listed and read with their secret URL; called
// without credentials they start their operation as an action (202 with the Action); a deleted
// trigger's URL, a wrong secret or another service's path answer 404.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  actionOf,
  call,
  closeSim,
  createUser,
  deployCluster,
  finishedAction,
  runningService,
  type SimHarness,
  startSimHarness,
  until,
} from "./support.ts";

let s: SimHarness;
let web: { uuid: string; resource_uri: string };

before(async () => {
  s = await startSimHarness({ env: { BERTH_PUBLIC_URL: "http://berth.test:8000" } });
  await deployCluster(s, 2);
  web = await runningService(s, { image: "busybox:local", name: "web" });
});
after(() => closeSim(s));

/** POSTs the trigger URL as a CI system would: no Authorization header. */
async function callUrl(url: string) {
  const u = new URL(url);
  const res = await s.h.app.inject({
    method: "POST",
    url: `${u.pathname}${u.search}`,
    headers: { "user-agent": "ci-system/1.0" },
  });
  return {
    status: res.statusCode,
    body: res.body ? JSON.parse(res.body) : undefined,
    headers: res.headers,
    raw: res.body,
  };
}

describe("triggers", () => {
  let redeploy: { uuid: string; url: string; resource_uri: string; name: string; operation: string };

  test("a trigger is created (REDEPLOY by default) with a long secret URL, and listed and read", async () => {
    const created = await call(s.h, s.alice, "POST", `${web.resource_uri}trigger/`, { name: "ci" });
    assert.equal(created.status, 201, created.raw);
    redeploy = created.body;
    assert.deepEqual(Object.keys(redeploy).sort(), ["name", "operation", "resource_uri", "url", "uuid"]);
    assert.equal(redeploy.name, "ci");
    assert.equal(redeploy.operation, "REDEPLOY");
    assert.equal(redeploy.resource_uri, `${web.resource_uri}trigger/${redeploy.uuid}/`);
    const url = new URL(redeploy.url);
    assert.equal(url.origin, "http://berth.test:8000", "the URL is on Berth's public address");
    assert.equal(url.pathname, `${redeploy.resource_uri}call/`);
    assert.ok((url.searchParams.get("token") ?? "").length >= 40, "the URL holds a long secret");
    assert.ok(created.headers["x-platform-action-uri"], "creating a trigger is an action");

    const row = await s.h.store.registries.findTrigger(redeploy.uuid);
    assert.ok(row);
    assert.ok(
      !JSON.stringify(row).includes(url.searchParams.get("token")!),
      "only a hash of the secret is stored",
    );

    const read = await call(s.h, s.alice, "GET", redeploy.resource_uri);
    assert.equal(read.status, 200);
    assert.deepEqual(read.body, redeploy, "the trigger shows the same URL again");
    const uuidOfService = web.uuid;
    const bare = await call(
      s.h,
      s.alice,
      "GET",
      `/api/app/v1/service/${uuidOfService}/trigger/${redeploy.uuid}/`,
    );
    assert.equal(bare.status, 200);
    const list = await call(s.h, s.alice, "GET", `${web.resource_uri}trigger/`);
    assert.equal(list.status, 200);
    assert.equal(list.body.meta.total_count, 1);
    assert.deepEqual(list.body.objects[0], redeploy);
  });

  test("calling the URL without credentials redeploys the service: 202 with the action", async () => {
    const before = (await call(s.h, s.alice, "GET", web.resource_uri)).body;
    const res = await callUrl(redeploy.url);
    assert.equal(res.status, 202, res.raw);
    assert.equal(res.body.action, "Service Redeploy");
    assert.equal(res.body.object, web.resource_uri);
    assert.equal(res.body.is_user_action, false);
    assert.equal(res.body.user_agent, "ci-system/1.0");
    assert.equal(res.body.method, "POST");
    assert.equal(res.body.path, new URL(redeploy.url).pathname, "the action's path has no secret");
    assert.equal(res.headers["x-platform-action-uri"], res.body.resource_uri);
    assert.equal(res.headers["x-dockercloud-action-uri"], res.body.resource_uri);
    const a = await finishedAction(s, res.body.uuid);
    assert.equal(a.state, "Success", a.log.join("\n"));
    assert.ok(
      a.log.some((l) => l.startsWith(`Started by trigger "ci" (${redeploy.uuid})`)),
      a.log.join("\n"),
    );
    assert.ok(!JSON.stringify(a).includes(new URL(redeploy.url).searchParams.get("token")!));
    const after = await until(s, web.resource_uri, "Running");
    assert.notDeepEqual(after.containers, [], "containers run again");
    assert.notEqual(after.deployed_datetime, null);
    assert.ok(
      Date.parse(after.deployed_datetime) >= Date.parse(before.deployed_datetime),
      "deployed again by the trigger",
    );
    // The audit list of the namespace shows it.
    const actions = await call(s.h, s.alice, "GET", `/api/audit/v1/action/?object=${web.resource_uri}`);
    assert.ok(actions.body.objects.some((x: { uuid: string }) => x.uuid === res.body.uuid));
  });

  test("a SCALEUP trigger raises the target by one and scales", async () => {
    const created = await call(s.h, s.alice, "POST", `${web.resource_uri}trigger/`, { operation: "SCALEUP" });
    assert.equal(created.status, 201, created.raw);
    assert.equal(created.body.operation, "SCALEUP");
    assert.equal(created.body.name, "scaleup", "the default name is the operation");
    const before = (await call(s.h, s.alice, "GET", web.resource_uri)).body;
    const res = await callUrl(created.body.url);
    assert.equal(res.status, 202, res.raw);
    assert.equal(res.body.action, "Service Scale");
    const a = await finishedAction(s, res.body.uuid);
    assert.equal(a.state, "Success", a.log.join("\n"));
    const after = await until(s, web.resource_uri, "Running");
    assert.equal(after.target_num_containers, before.target_num_containers + 1);
    assert.equal(after.running_num_containers, before.running_num_containers + 1);
  });

  test("a wrong or missing secret, another service's path or another namespace answers 404", async () => {
    const url = new URL(redeploy.url);
    const token = url.searchParams.get("token")!;
    const other = await call(s.h, s.alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "other",
    });
    assert.equal(other.status, 201);
    const bad = [
      `${url.pathname}?token=${token.slice(0, -2)}xx`,
      url.pathname,
      `${url.pathname}?token=`,
      `${other.body.resource_uri}trigger/${redeploy.uuid}/call/?token=${token}`,
      `/api/app/v1/bob/service/${web.uuid}/trigger/${redeploy.uuid}/call/?token=${token}`,
    ];
    await createUser(s.h, "bob");
    for (const path of bad) {
      const res = await s.h.app.inject({ method: "POST", url: path });
      assert.equal(res.statusCode, 404, `${path}: ${res.body}`);
      assert.equal(JSON.parse(res.body).code, "not_found");
    }
    const bare = await s.h.app.inject({
      method: "POST",
      url: `/api/app/v1/service/${web.uuid}/trigger/${redeploy.uuid}/call/?token=${token}`,
    });
    assert.equal(bare.statusCode, 202, "the path without namespace works too");
    await finishedAction(s, JSON.parse(bare.body).uuid);
    const get = await s.h.app.inject({ method: "GET", url: `${url.pathname}?token=${token}` });
    assert.equal(get.statusCode, 401, "reading needs credentials; only the call takes the URL's secret");
  });

  test("another user cannot see or manage the triggers", async () => {
    const bob = await createUser(s.h, "bob2");
    for (const [method, url] of [
      ["GET", `${web.resource_uri}trigger/`],
      ["GET", redeploy.resource_uri],
      ["DELETE", redeploy.resource_uri],
      ["POST", `${web.resource_uri}trigger/`],
    ] as const) {
      const r = await call(s.h, bob, method, url, method === "POST" ? {} : undefined);
      assert.equal(r.status, 404, `${method} ${url}`);
    }
  });

  test("a bad operation is refused with 400", async () => {
    const r = await call(s.h, s.alice, "POST", `${web.resource_uri}trigger/`, { operation: "EXPLODE" });
    assert.equal(r.status, 400, r.raw);
    assert.equal(r.body.code, "invalid_field");
    assert.match(r.raw, /operation/);
  });

  test("DELETE answers 200 with the deleted trigger; its URL answers 404 from then on", async () => {
    const del = await call(s.h, s.alice, "DELETE", redeploy.resource_uri);
    assert.equal(del.status, 200, del.raw);
    assert.deepEqual(del.body, redeploy);
    assert.ok(del.headers["x-platform-action-uri"]);
    assert.equal((await call(s.h, s.alice, "GET", redeploy.resource_uri)).status, 404);
    assert.equal((await call(s.h, s.alice, "DELETE", redeploy.resource_uri)).status, 404);
    const res = await callUrl(redeploy.url);
    assert.equal(res.status, 404, res.raw);
    const list = await call(s.h, s.alice, "GET", `${web.resource_uri}trigger/`);
    assert.ok(!list.body.objects.some((t: { uuid: string }) => t.uuid === redeploy.uuid));
  });

  test("a call on a service in a state that refuses the operation answers 409 and changes nothing", async () => {
    const t = await call(s.h, s.alice, "POST", `${web.resource_uri}trigger/`, { operation: "SCALEUP" });
    const stop = await call(s.h, s.alice, "POST", `${web.resource_uri}stop/`);
    await finishedAction(s, actionOf(stop));
    const stopped = await until(s, web.resource_uri, "Stopped");
    const terminate = await call(s.h, s.alice, "DELETE", web.resource_uri);
    await finishedAction(s, actionOf(terminate));
    await until(s, web.resource_uri, "Terminated");
    const res = await callUrl(t.body.url);
    assert.equal(res.status, 409, res.raw);
    assert.match(res.body.error, /is Terminated/);
    const after = (await call(s.h, s.alice, "GET", web.resource_uri)).body;
    assert.equal(after.target_num_containers, stopped.target_num_containers, "the target is unchanged");
  });
});
