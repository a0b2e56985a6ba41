// Quotas per namespace (issue 26): each limit refuses the create that would pass it with 403
// `quota_exceeded` naming the limit and the usage; an administrator raises a limit and the create
// passes; the namespace's GET shows usage against limits; two creates at the limit cannot both
// pass; terminated objects do not count.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { listen, openStream, refusal, type StreamClient } from "../streams/support.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";

let h: Harness;
let base: string;
let alice: Caller;

const AWS = {
  region: "/api/infra/v1/region/aws/us-east-1/",
  node_type: "/api/infra/v1/nodetype/aws/t2.micro/",
};

before(async () => {
  h = await startHarness();
  base = await listen(h);
  alice = await createUser(h, "alice");
});
after(() => h.close());

async function setLimits(ns: string, limits: Record<string, number | null>) {
  const res = await call(h, h.admin, "PATCH", `/api/v1.1/namespaces/${ns}/`, { limits });
  assert.equal(res.status, 200, res.raw);
  return res.body;
}

/** A refusal of quota `resource`: 403, its code, a sentence naming limit and usage, and the figures. */
function assertQuota(
  res: { status: number; body: { error: string; code: string; details?: unknown[] }; raw: string },
  resource: string,
  limit: number,
  usage: number,
) {
  assert.equal(res.status, 403, res.raw);
  assert.equal(res.body.code, "quota_exceeded");
  assert.match(res.body.error, new RegExp(`\\b${limit}\\b`), "the sentence names the limit");
  assert.match(res.body.error, new RegExp(`\\b${usage}\\b`), "the sentence names the usage");
  assert.match(res.body.error, new RegExp(resource), "the sentence names the quota");
  const detail = res.body.details?.[0] as { field: string; problem: string; limit: number; usage: number };
  assert.equal(detail.limit, limit);
  assert.equal(detail.usage, usage);
  assert.equal(typeof detail.field, "string");
  assert.equal(typeof detail.problem, "string");
}

const service = (name: string, extra: Record<string, unknown> = {}) =>
  call(h, alice, "POST", "/api/app/v1/service/", { image: "busybox:local", name, ...extra });

describe("the namespace shows its quotas", () => {
  test("a tenant sees usage against the default limits; only administrators change them", async () => {
    const res = await call(h, alice, "GET", "/api/v1.1/namespaces/alice/");
    assert.equal(res.status, 200, res.raw);
    assert.deepEqual(res.body.limits, {});
    assert.deepEqual(res.body.quotas.services, { limit: 200, usage: 0 });
    assert.deepEqual(res.body.quotas.apikeys, { limit: 20, usage: 1 });
    assert.equal(res.body.quotas.envvars_per_service.limit, 100);
    const refused = await call(h, alice, "PATCH", "/api/v1.1/namespaces/alice/", {
      limits: { services: 1000 },
    });
    assert.equal(refused.status, 403);
    const bad = await call(h, h.admin, "PATCH", "/api/v1.1/namespaces/alice/", { limits: { planets: 3 } });
    assert.equal(bad.status, 400, bad.raw);
    const negative = await call(h, h.admin, "PATCH", "/api/v1.1/namespaces/alice/", {
      limits: { services: -1 },
    });
    assert.equal(negative.status, 400, negative.raw);
  });
});

describe("a refusal for each limit", () => {
  test("services: the create over the limit is refused; raised by an administrator, it passes", async () => {
    await setLimits("alice", { services: 2 });
    assert.equal((await service("s1")).status, 201);
    assert.equal((await service("s2")).status, 201);
    const over = await service("s3");
    assertQuota(over, "services", 2, 2);
    const list = await call(h, alice, "GET", "/api/app/v1/service/?name=s3");
    assert.equal(list.body.objects.length, 0, "nothing half-written");
    const raised = await setLimits("alice", { services: 3 });
    assert.equal(raised.limits.services, 3);
    assert.equal((await service("s3")).status, 201);
    const shown = await call(h, alice, "GET", "/api/v1.1/namespaces/alice/");
    assert.deepEqual(shown.body.quotas.services, { limit: 3, usage: 3 });
    assert.deepEqual(shown.body.quotas.containers, { limit: 1000, usage: 3 });
  });

  test("services: a terminated service does not count", async () => {
    const s = await call(h, alice, "GET", "/api/app/v1/service/?name=s3");
    const uri = s.body.objects[0].resource_uri as string;
    assert.equal((await call(h, alice, "DELETE", uri)).status, 202);
    await waitFor(
      "s3 terminated",
      async () => (await call(h, alice, "GET", uri)).body.state === "Terminated",
    );
    assert.equal((await service("s4")).status, 201);
    await setLimits("alice", { services: null });
  });

  test("containers: a create and a scale over the limit are refused and leave the target as it was", async () => {
    await setLimits("alice", { containers: 6 });
    // s1, s2, s4: one container each.
    const big = await service("big", { target_num_containers: 4 });
    assertQuota(big, "containers", 6, 3);
    const web = await service("web", { target_num_containers: 2 });
    assert.equal(web.status, 201, web.raw);
    const uri = web.body.resource_uri as string;
    const scaled = await call(h, alice, "PATCH", uri, { target_num_containers: 4 });
    assertQuota(scaled, "containers", 6, 5);
    assert.equal((await call(h, alice, "GET", uri)).body.target_num_containers, 2);
    await setLimits("alice", { containers: 7 });
    const ok = await call(h, alice, "PATCH", uri, { target_num_containers: 4 });
    assert.equal(ok.status, 200, ok.raw);
    // Fewer containers are always allowed, even over a lowered limit.
    await setLimits("alice", { containers: 2 });
    assert.equal((await call(h, alice, "PATCH", uri, { target_num_containers: 1 })).status, 200);
    await setLimits("alice", { containers: null });
  });

  test("containers: a trigger's scale-up is refused at the limit", async () => {
    const svc = await call(h, alice, "GET", "/api/app/v1/service/?name=web");
    const uri = svc.body.objects[0].resource_uri as string;
    const trigger = await call(h, alice, "POST", `${uri}trigger/`, { operation: "SCALEUP" });
    assert.equal(trigger.status, 201, trigger.raw);
    const usage = (await call(h, alice, "GET", "/api/v1.1/namespaces/alice/")).body.quotas.containers.usage;
    await setLimits("alice", { containers: usage });
    const url = new URL(trigger.body.url as string);
    const fired = await h.app.inject({ method: "POST", url: `${url.pathname}${url.search}` });
    assert.equal(fired.statusCode, 403, fired.body);
    assert.equal(fired.json().code, "quota_exceeded");
    await setLimits("alice", { containers: null });
  });

  test("stacks", async () => {
    await setLimits("alice", { stacks: 1 });
    const stack = (name: string) =>
      call(h, alice, "POST", "/api/app/v1/stack/", {
        name,
        services: [{ name: `${name}-db`, image: "busybox" }],
      });
    assert.equal((await stack("one")).status, 201);
    assertQuota(await stack("two"), "stacks", 1, 1);
    assert.equal((await call(h, alice, "GET", "/api/app/v1/service/?name=two-db")).body.objects.length, 0);
  });

  test("services of a stack count one after another, in the stack's transaction", async () => {
    const usage = (await call(h, alice, "GET", "/api/v1.1/namespaces/alice/")).body.quotas.services.usage;
    await setLimits("alice", { stacks: null, services: usage + 1 });
    const res = await call(h, alice, "POST", "/api/app/v1/stack/", {
      name: "pair",
      services: [
        { name: "pa", image: "busybox" },
        { name: "pb", image: "busybox" },
      ],
    });
    assertQuota(res, "services", usage + 1, usage + 1);
    assert.equal((await call(h, alice, "GET", "/api/app/v1/stack/?name=pair")).body.objects.length, 0);
    assert.equal((await call(h, alice, "GET", "/api/app/v1/service/?name=pa")).body.objects.length, 0);
    await setLimits("alice", { services: null });
  });

  test("node clusters and nodes", async () => {
    await setLimits("alice", { nodeclusters: 1, nodes: 3 });
    const cluster = (name: string, n: number) =>
      call(h, alice, "POST", "/api/infra/v1/nodecluster/", { name, ...AWS, target_num_nodes: n });
    assertQuota(await cluster("huge", 4), "nodes", 3, 0);
    const one = await cluster("one", 2);
    assert.equal(one.status, 201, one.raw);
    assertQuota(await cluster("two", 1), "nodeclusters", 1, 1);
    const scaled = await call(h, alice, "PATCH", one.body.resource_uri, { target_num_nodes: 4 });
    assertQuota(scaled, "nodes", 3, 2);
    assert.equal((await call(h, alice, "GET", one.body.resource_uri)).body.target_num_nodes, 2);
    assert.equal((await call(h, alice, "PATCH", one.body.resource_uri, { target_num_nodes: 3 })).status, 200);
  });

  test("API keys (per user)", async () => {
    await setLimits("alice", { apikeys: 2 });
    const key = () => call(h, alice, "POST", "/api/v1.1/users/alice/apikeys/", { label: "more" });
    assert.equal((await key()).status, 201);
    assertQuota(await key(), "apikeys", 2, 2);
  });

  test("registration tokens: usable ones count, a revoked one does not", async () => {
    await setLimits("alice", { tokens: 1 });
    const first = await call(h, alice, "POST", "/api/infra/v1/token/");
    assert.equal(first.status, 201, first.raw);
    assertQuota(await call(h, alice, "POST", "/api/infra/v1/token/"), "tokens", 1, 1);
    assert.equal((await call(h, alice, "DELETE", `/api/infra/v1/token/${first.body.uuid}/`)).status, 204);
    assert.equal((await call(h, alice, "POST", "/api/infra/v1/token/")).status, 201);
  });

  test("triggers", async () => {
    const svc = await call(h, alice, "GET", "/api/app/v1/service/?name=s1");
    const uri = svc.body.objects[0].resource_uri as string;
    const usage = (await call(h, alice, "GET", "/api/v1.1/namespaces/alice/")).body.quotas.triggers.usage;
    await setLimits("alice", { triggers: usage + 1 });
    assert.equal((await call(h, alice, "POST", `${uri}trigger/`, { name: "t1" })).status, 201);
    assertQuota(
      await call(h, alice, "POST", `${uri}trigger/`, { name: "t2" }),
      "triggers",
      usage + 1,
      usage + 1,
    );
  });

  test("streams per key: refused at the upgrade, and a closed stream gives its place back", async () => {
    await setLimits("alice", { streams_per_key: 2, apikeys: null });
    const open: StreamClient[] = [];
    open.push(await openStream(`${base}/api/audit/v1/events/`, { auth: alice.auth }));
    open.push(await openStream(`${base}/api/audit/v1/alice/events/`, { auth: alice.auth }));
    const refused = await refusal(`${base}/api/audit/v1/events/`, alice.auth);
    assert.equal(refused.status, 403);
    const body = refused.body as { error: string; code: string; details: { limit: number; usage: number }[] };
    assert.equal(body.code, "quota_exceeded");
    assert.match(body.error, /streams_per_key/);
    assert.deepEqual([body.details[0]!.limit, body.details[0]!.usage], [2, 2]);
    // Another key of the same user has places of its own.
    const other = await call(h, h.admin, "POST", "/api/v1.1/users/alice/apikeys/", { label: "second" });
    assert.equal(other.status, 201, other.raw);
    const otherAuth = `Basic ${Buffer.from(`alice:${other.body.key}`).toString("base64")}`;
    open.push(await openStream(`${base}/api/audit/v1/events/`, { auth: otherAuth }));
    open[0]!.close();
    await open[0]!.closed;
    await waitFor("a place is given back", async () => {
      try {
        open.push(await openStream(`${base}/api/audit/v1/events/`, { auth: alice.auth }));
        return true;
      } catch {
        return false;
      }
    });
    for (const s of open) s.close();
  });

  test("environment: more variables, or more bytes, than a service may hold (the defaults)", async () => {
    await setLimits("alice", { apikeys: null, services: null });
    // What the report sent: 200 variables of 4,000 characters.
    const report = Array.from({ length: 200 }, (_, i) => ({ key: `K${i}`, value: "x".repeat(4000) }));
    const many = await service("env-report", { container_envvars: report });
    assert.equal(many.status, 403, many.raw);
    assert.equal(many.body.code, "quota_exceeded");
    const vars = Array.from({ length: 101 }, (_, i) => ({ key: `K${i}`, value: "v" }));
    assertQuota(await service("env-many", { container_envvars: vars }), "envvars_per_service", 100, 101);
    const fat = Array.from({ length: 9 }, (_, i) => ({ key: `K${i}`, value: "x".repeat(4000) }));
    assertQuota(await service("env-fat", { container_envvars: fat }), "env_bytes_per_service", 32768, 36018);
    // The same bound holds for a stack's items and for an update.
    const stack = await call(h, alice, "POST", "/api/app/v1/stack/", {
      name: "envs",
      services: [
        {
          name: "env-item",
          image: "busybox",
          environment: Object.fromEntries(vars.map((v) => [v.key, v.value])),
        },
      ],
    });
    assert.equal(stack.status, 403, stack.raw);
    assert.equal(stack.body.code, "quota_exceeded");
    const small = await service("env-small", { container_envvars: [{ key: "A", value: "1" }] });
    assert.equal(small.status, 201);
    const grown = await call(h, alice, "PATCH", small.body.resource_uri, { container_envvars: fat });
    assertQuota(grown, "env_bytes_per_service", 32768, 36018);
    await setLimits("alice", { env_bytes_per_service: 64 * 1024 });
    assert.equal((await service("env-fat", { container_envvars: fat })).status, 201);
  });
});

describe("concurrency", () => {
  test("creates racing at the limit: exactly as many pass as the limit leaves", async () => {
    const racer = await createUser(h, "racer");
    await setLimits("racer", { services: 3 });
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        call(h, racer, "POST", "/api/app/v1/service/", { image: "busybox", name: `r${i}` }),
      ),
    );
    const passed = results.filter((r) => r.status === 201).length;
    const refused = results.filter((r) => r.status === 403 && r.body.code === "quota_exceeded").length;
    assert.equal(passed, 3, results.map((r) => r.status).join(","));
    assert.equal(refused, 5);
    const shown = await call(h, racer, "GET", "/api/v1.1/namespaces/racer/");
    assert.deepEqual(shown.body.quotas.services, { limit: 3, usage: 3 });

    await setLimits("racer", { apikeys: 4 });
    const keys = await Promise.all(
      Array.from({ length: 8 }, () =>
        call(h, racer, "POST", "/api/v1.1/users/racer/apikeys/", { label: "race" }),
      ),
    );
    assert.equal(keys.filter((r) => r.status === 201).length, 3, "one key existed already");
  });
});
