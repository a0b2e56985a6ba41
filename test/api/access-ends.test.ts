// A member removed from an organization keeps nothing of it (issue 26 item 3): the registration
// token he made there registers no node, his trigger URL answers 404, and the service key he
// could read from a role-global container is refused (rotated: the service then shows it needs a
// redeploy, an action of the organization says why, and a redeploy gives the containers a key that
// works). What other members made keeps working. A deactivated creator's token and trigger refuse
// while he is inactive.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { register } from "../agent/support.ts";
import { AWS, call, engineContainer, type Sim, startSim, until, waitFor } from "../services/sim.ts";
import { addMember, type Caller, createUser } from "../support/harness.ts";

let s: Sim & { users: Record<string, Caller> };
let alice: Caller;
let bob: Caller;
// biome-ignore lint/suspicious/noExplicitAny: API bodies are arbitrary JSON.
let api: any;

before(async () => {
  s = await startSim({ users: ["bob"] });
  alice = s.alice;
  bob = s.users.bob!;
  assert.equal((await call(s.h, alice, "POST", "/api/v1.1/orgs/", { name: "acme" })).status, 201);
  await addMember(s.h, alice, "acme", bob);
  const cluster = await call(s.h, alice, "POST", "/api/infra/v1/acme/nodecluster/", {
    ...AWS,
    name: "pool",
    target_num_nodes: 1,
  });
  assert.equal(cluster.status, 201, cluster.raw);
  assert.equal((await call(s.h, alice, "POST", `${cluster.body.resource_uri}deploy/`)).status, 202);
  await until(s, cluster.body.resource_uri, "Deployed");
  const created = await call(s.h, alice, "POST", "/api/app/v1/acme/service/", {
    image: "busybox:local",
    name: "api",
    run_command: "sleep 100000",
    roles: ["global"],
  });
  assert.equal(created.status, 201, created.raw);
  assert.equal((await call(s.h, alice, "POST", `${created.body.resource_uri}start/`)).status, 202);
  api = await until(s, created.body.resource_uri, "Running");
});
after(() => s.close());

/** The PLATFORM_AUTH a container of the service holds (what a member can read with exec). */
async function platformAuth(service: { containers: string[] }): Promise<string> {
  const auth = (await engineContainer(s, service.containers[0]!)).view.env.PLATFORM_AUTH;
  assert.ok(auth, "the role-global container holds PLATFORM_AUTH");
  return auth;
}

const getWith = async (authorization: string, url: string) =>
  (await s.h.app.inject({ method: "GET", url, headers: { authorization } })).statusCode;

/** POSTs a trigger URL as a CI system would: no credentials. */
async function callTrigger(url: string): Promise<number> {
  const u = new URL(url);
  return (await s.h.app.inject({ method: "POST", url: `${u.pathname}${u.search}` })).statusCode;
}

describe("a removed member keeps nothing of the organization", () => {
  test("his registration token, his trigger and the service key he read are refused; others' keep working", async () => {
    const bobsToken = await call(s.h, bob, "POST", "/api/infra/v1/acme/token/");
    assert.equal(bobsToken.status, 201, bobsToken.raw);
    const alicesToken = await call(s.h, alice, "POST", "/api/infra/v1/acme/token/");
    assert.equal(alicesToken.status, 201, alicesToken.raw);
    const ownToken = await call(s.h, bob, "POST", "/api/infra/v1/bob/token/");
    assert.equal(ownToken.status, 201, ownToken.raw);
    const bobsTrigger = await call(s.h, bob, "POST", `${api.resource_uri}trigger/`, { name: "bobs-ci" });
    assert.equal(bobsTrigger.status, 201, bobsTrigger.raw);
    const alicesTrigger = await call(s.h, alice, "POST", `${api.resource_uri}trigger/`, {
      name: "alices-ci",
    });
    assert.equal(alicesTrigger.status, 201, alicesTrigger.raw);
    const readKey = await platformAuth(api);
    assert.equal(await getWith(readKey, "/api/app/v1/acme/service/"), 200, "the service key works before");

    const removed = await call(s.h, alice, "DELETE", "/api/v1.1/orgs/acme/members/bob/");
    assert.equal(removed.status, 204, removed.raw);

    // His node never joins.
    const joined = await register(s.h, bobsToken.body.token);
    assert.equal(joined.status, 401, joined.raw);
    assert.equal((await call(s.h, alice, "GET", "/api/infra/v1/acme/node/")).body.meta.total_count, 1);
    // His trigger's URL answers as a deleted trigger's.
    assert.equal(await callTrigger(bobsTrigger.body.url), 404);
    // The service key he read is refused.
    assert.equal(await getWith(readKey, "/api/app/v1/acme/service/"), 401);

    // The rotation is visible: the containers still hold the old key (not synchronized), and an
    // action of the organization says why and what to do.
    assert.equal((await call(s.h, alice, "GET", api.resource_uri)).body.synchronized, false);
    const actions = await call(
      s.h,
      alice,
      "GET",
      `/api/audit/v1/acme/action/?object=${encodeURIComponent(api.resource_uri)}&limit=100`,
    );
    const rotation = actions.body.objects.find((a: { action: string }) => a.action === "Service Key Rotate");
    assert.ok(rotation, `an action records the rotation: ${actions.raw.slice(0, 2000)}`);
    const log = (await s.h.store.actions.actionLogTail(rotation.uuid, 10)).map((l) => l.line).join("\n");
    assert.match(log, /bob was removed from acme/);
    assert.match(log, /redeploy/);
    assert.ok(
      actions.body.objects.some((a: { action: string }) => a.action === "Trigger Revoke"),
      "the revoked trigger is recorded too",
    );
    const revoked = await call(
      s.h,
      alice,
      "GET",
      `/api/audit/v1/acme/action/?object=${encodeURIComponent(`/api/infra/v1/acme/token/${bobsToken.body.uuid}/`)}`,
    );
    assert.ok(
      revoked.body.objects.some((a: { action: string }) => a.action === "Token Revoke"),
      revoked.raw,
    );

    // What the remaining members made keeps working, and so does his own namespace's token.
    assert.equal((await register(s.h, alicesToken.body.token)).status, 201);
    assert.equal((await register(s.h, ownToken.body.token)).status, 201);
    // Alice's trigger redeploys the service: its containers get the new key, which works.
    assert.equal(await callTrigger(alicesTrigger.body.url), 202);
    const fresh = await waitFor("the redeployed service", async () => {
      const v = (await call(s.h, alice, "GET", api.resource_uri)).body;
      return v.state === "Running" && v.synchronized ? v : undefined;
    });
    const key = await platformAuth(fresh);
    assert.notEqual(key, readKey);
    assert.equal(await getWith(key, "/api/app/v1/acme/service/"), 200, "the new key works");
    assert.equal(await getWith(readKey, "/api/app/v1/acme/service/"), 401);
  });
});

describe("a deactivated creator", () => {
  test("his token and trigger refuse while he is inactive, and work again once he is activated", async () => {
    const carol = await createUser(s.h, "carol");
    await addMember(s.h, alice, "acme", carol);
    const token = await call(s.h, carol, "POST", "/api/infra/v1/acme/token/");
    assert.equal(token.status, 201, token.raw);
    const trigger = await call(s.h, carol, "POST", `${api.resource_uri}trigger/`, { name: "carols-ci" });
    assert.equal(trigger.status, 201, trigger.raw);
    const readKey = await platformAuth(await until(s, api.resource_uri, "Running"));
    assert.equal(await getWith(readKey, "/api/app/v1/acme/service/"), 200);
    assert.equal((await call(s.h, s.h.admin, "POST", "/api/v1.1/users/carol/deactivate/")).status, 200);
    assert.equal((await register(s.h, token.body.token)).status, 401);
    assert.equal(await callTrigger(trigger.body.url), 404);
    // She could read the organization's service keys: they are rotated.
    assert.equal(await getWith(readKey, "/api/app/v1/acme/service/"), 401);
    assert.equal((await call(s.h, alice, "GET", api.resource_uri)).body.synchronized, false);
    assert.equal((await call(s.h, s.h.admin, "POST", "/api/v1.1/users/carol/activate/")).status, 200);
    assert.equal(await callTrigger(trigger.body.url), 202);
    assert.equal((await register(s.h, token.body.token)).status, 201);
  });
});
