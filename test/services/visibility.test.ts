// Who sees what: the audit API's include_related for containers, services and nodes (spec
// relation table), and namespaces: another user never sees or touches a user's services.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Caller } from "../support/harness.ts";
import {
  call,
  containersOf,
  deployCluster,
  operate,
  runningService,
  type Sim,
  startSim,
  until,
} from "./sim.ts";

let s: Sim;
let bob: Caller;
// biome-ignore lint/suspicious/noExplicitAny: API bodies are arbitrary JSON.
let cluster: any;
// biome-ignore lint/suspicious/noExplicitAny: API bodies are arbitrary JSON.
let svc: any;
// biome-ignore lint/suspicious/noExplicitAny: API bodies are arbitrary JSON.
let containers: any[];

before(async () => {
  const sim = await startSim({ users: ["bob"] });
  s = sim;
  bob = sim.users.bob!;
  cluster = await deployCluster(s, { name: "pool", target_num_nodes: 2 });
  svc = await runningService(s, { name: "web", target_num_containers: 2 });
  containers = await containersOf(s, svc);
  await operate(s, containers[0].resource_uri, "stop");
  await operate(s, containers[1].resource_uri, "stop");
});
after(() => s.close());

async function actionsAbout(object: string, related: boolean, who = s.alice) {
  const q = `object=${encodeURIComponent(object)}${related ? "&include_related=true" : ""}&limit=100`;
  const res = await call(s.h, who, "GET", `/api/audit/v1/action/?${q}`);
  assert.equal(res.status, 200, res.raw);
  return (res.body.objects as { action: string; object: string }[]).map((a) => `${a.action} ${a.object}`);
}

describe("include_related", () => {
  test("a container: its own actions and its service's, not its sibling's", async () => {
    const [c1, c2] = containers;
    assert.deepEqual(await actionsAbout(c1.resource_uri, false), [`Container Stop ${c1.resource_uri}`]);
    const related = await actionsAbout(c1.resource_uri, true);
    assert.deepEqual(related, [
      `Service Create ${svc.resource_uri}`,
      `Service Start ${svc.resource_uri}`,
      `Container Stop ${c1.resource_uri}`,
    ]);
    assert.ok(!related.includes(`Container Stop ${c2.resource_uri}`));
  });

  test("a service: its own actions and all its containers'", async () => {
    const [c1, c2] = containers;
    assert.deepEqual(await actionsAbout(svc.resource_uri, true), [
      `Service Create ${svc.resource_uri}`,
      `Service Start ${svc.resource_uri}`,
      `Container Stop ${c1.resource_uri}`,
      `Container Stop ${c2.resource_uri}`,
    ]);
  });

  test("a node: its own actions and its cluster's", async () => {
    const node = cluster.nodes[0] as string;
    const renamed = await call(s.h, s.alice, "PATCH", node, { nickname: "first" });
    assert.equal(renamed.status, 200, renamed.raw);
    const related = await actionsAbout(node, true);
    assert.ok(related.includes(`Node Cluster Create ${cluster.resource_uri}`), related.join("\n"));
    assert.ok(related.includes(`Node Cluster Deploy ${cluster.resource_uri}`), related.join("\n"));
    assert.ok(
      related.some((a) => a.endsWith(` ${node}`)),
      related.join("\n"),
    );
    assert.ok(!related.some((a) => a.endsWith(` ${cluster.nodes[1]}`)), "not its sibling node's");
    assert.ok(!related.some((a) => a.includes("/service/")), "not the services on it");
  });

  test("another user asking about the same objects sees nothing", async () => {
    for (const uri of [svc.resource_uri, containers[0].resource_uri]) {
      const res = await call(
        s.h,
        bob,
        "GET",
        `/api/audit/v1/action/?object=${encodeURIComponent(uri)}&include_related=true`,
      );
      assert.equal(res.status, 200, res.raw);
      assert.deepEqual(res.body.objects, [], `${uri}: ${res.raw}`);
    }
  });
});

describe("namespaces", () => {
  test("another user's lists are empty and every read is 404", async () => {
    assert.equal((await call(s.h, bob, "GET", "/api/app/v1/service/")).body.meta.total_count, 0);
    assert.equal((await call(s.h, bob, "GET", "/api/app/v1/container/")).body.meta.total_count, 0);
    assert.equal((await call(s.h, bob, "GET", "/api/app/v1/service/?name=web")).body.meta.total_count, 0);
    assert.equal((await call(s.h, bob, "GET", "/api/app/v1/alice/service/")).status, 404);
    assert.equal((await call(s.h, bob, "GET", "/api/app/v1/alice/container/")).status, 404);
    const missing = await call(s.h, bob, "GET", `/api/app/v1/service/00000000-0000-0000-0000-000000000000/`);
    for (const uri of [
      svc.resource_uri,
      svc.resource_uri.replace("/alice/", "/"),
      containers[0].resource_uri,
    ]) {
      const res = await call(s.h, bob, "GET", uri);
      assert.equal(res.status, 404, `${uri}: ${res.raw}`);
      assert.deepEqual(res.body.code, missing.body.code, "the same answer as for a missing object");
    }
  });

  test("another user's operations are 404 and change nothing", async () => {
    const byUuid = (uri: string) => uri.replace("/alice/", "/");
    const calls: [string, string, Record<string, unknown>?][] = [
      ["PATCH", svc.resource_uri, { target_num_containers: 5 }],
      ["PATCH", byUuid(svc.resource_uri), { nickname: "mine" }],
      ["POST", `${svc.resource_uri}start/`],
      ["POST", `${byUuid(svc.resource_uri)}start/`],
      ["POST", `${svc.resource_uri}stop/`],
      ["POST", `${svc.resource_uri}scale/`],
      ["POST", `${svc.resource_uri}redeploy/`],
      ["DELETE", svc.resource_uri],
      ["POST", `${containers[0].resource_uri}start/`],
      ["POST", `${byUuid(containers[0].resource_uri)}start/`],
      ["POST", `${containers[0].resource_uri}redeploy/`],
      ["DELETE", containers[0].resource_uri],
      ["DELETE", byUuid(containers[1].resource_uri)],
    ];
    for (const [method, url, body] of calls) {
      const res = await call(s.h, bob, method as "POST", url, body);
      assert.equal(res.status, 404, `${method} ${url}: ${res.raw}`);
    }
    const now = await until(s, svc.resource_uri, "Stopped");
    assert.equal(now.target_num_containers, 2);
    assert.equal(now.nickname, "web");
    for (const c of await containersOf(s, now)) assert.equal(c.state, "Stopped");
  });

  test("names are per namespace, and a link cannot reach into another namespace", async () => {
    const own = await call(s.h, bob, "POST", "/api/app/v1/service/", { image: "busybox:local", name: "web" });
    assert.equal(own.status, 201, own.raw);
    assert.equal(own.body.resource_uri, `/api/app/v1/bob/service/${own.body.uuid}/`);
    const link = await call(s.h, bob, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "spy",
      linked_to_service: [{ to_service: svc.resource_uri }],
    });
    assert.equal(link.status, 400, link.raw);
    assert.equal(link.body.details[0].field, "linked_to_service[0].to_service");
    // Alice still sees only her own service named web.
    const mine = (await call(s.h, s.alice, "GET", "/api/app/v1/service/?name=web")).body.objects;
    assert.deepEqual(
      mine.map((x: { uuid: string }) => x.uuid),
      [svc.uuid],
    );
  });
});
