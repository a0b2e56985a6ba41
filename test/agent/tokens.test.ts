// Registration tokens and agent registration (issue 15): the historical CLI's `node byo` call,
// single use, expiry, revocation, actions, namespaces, and what a node key can (not) open.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { parseArgs } from "node:util";
import WebSocket from "ws";
import { AGENT_OPTIONS } from "../../src/agent/options.ts";
import {
  basic,
  type Caller,
  call,
  createUser,
  type Harness,
  startHarness,
  waitFor,
} from "../support/harness.ts";
import { engineFacts, register } from "./support.ts";

let h: Harness;
let alice: Caller;
let bob: Caller;
let now = Date.now();
const clock = { now: () => now };

before(async () => {
  h = await startHarness({
    clock,
    env: { BERTH_PUBLIC_URL: "http://berth.test:8000", BERTH_NODE_UNREACHABLE_GRACE_MS: "400" },
  });
  alice = await createUser(h, "alice");
  bob = await createUser(h, "bob");
});
after(() => h.close());

async function newToken(who: Caller, path = "/api/infra/v1/token/") {
  const res = await call(h, who, "POST", path);
  assert.equal(res.status, 201, res.raw);
  return res.body as { token: string; uuid: string; resource_uri: string; command: string };
}

describe("registration tokens", () => {
  test("the historical CLI's call (Basic credentials, no body) answers a JSON object with a token string, once", async () => {
    const res = await h.app.inject({
      method: "POST",
      url: "/api/infra/v1/token/",
      headers: { authorization: alice.auth, accept: "*/*" },
    });
    assert.equal(res.statusCode, 201, res.body);
    const body = res.json();
    assert.equal(typeof body.token, "string");
    assert.ok(body.token.length >= 32);
    assert.ok(body.command.includes(body.token), "the answer says what to run on the server");
    assert.ok(body.command.includes("http://berth.test:8000"));
    assert.match(body.resource_uri, /^\/api\/infra\/v1\/alice\/token\/[0-9a-f-]{36}\/$/);
    // Shown once: the list and the object never carry it, and the store keeps only a hash.
    const list = await call(h, alice, "GET", "/api/infra/v1/token/");
    assert.ok(!list.raw.includes(body.token));
    assert.ok(list.body.objects.some((t: { uuid: string }) => t.uuid === body.uuid));
    const one = await call(h, alice, "GET", body.resource_uri);
    assert.equal(one.status, 200);
    assert.equal(one.body.token, undefined);
    const row = await h.store.agents.findToken(body.uuid);
    assert.ok(row && !JSON.stringify(row).includes(body.token));
    // Every call leaves its action.
    const actionUri = res.headers["x-platform-action-uri"] as string;
    assert.equal(res.headers["x-dockercloud-action-uri"], actionUri);
    const action = (await call(h, alice, "GET", actionUri)).body;
    assert.equal(action.action, "Token Create");
    assert.equal(action.object, body.resource_uri);
    assert.equal(action.state, "Success");
  });

  test("without credentials the call is 401; another user's namespace is 404 and its tokens are invisible", async () => {
    assert.equal((await call(h, undefined, "POST", "/api/infra/v1/token/")).status, 401);
    assert.equal((await call(h, bob, "POST", "/api/infra/v1/alice/token/")).status, 404);
    const t = await newToken(alice, "/api/infra/v1/alice/token/");
    assert.equal((await call(h, bob, "GET", t.resource_uri)).status, 404);
    assert.equal((await call(h, bob, "DELETE", `/api/infra/v1/token/${t.uuid}/`)).status, 404);
    const bobs = await call(h, bob, "GET", "/api/infra/v1/token/");
    assert.ok(!bobs.body.objects.some((x: { uuid: string }) => x.uuid === t.uuid));
  });

  test("a revoked token is gone from the list and registers nothing", async () => {
    const t = await newToken(alice);
    const del = await call(h, alice, "DELETE", t.resource_uri);
    assert.equal(del.status, 204);
    const action = (await call(h, alice, "GET", del.headers["x-platform-action-uri"] as string)).body;
    assert.equal(action.action, "Token Revoke");
    const list = await call(h, alice, "GET", "/api/infra/v1/token/");
    assert.ok(!list.body.objects.some((x: { uuid: string }) => x.uuid === t.uuid));
    const res = await register(h, t.token);
    assert.equal(res.status, 401);
    assert.match(res.body.error, /not valid|revoked/);
  });
});

describe("the agent download", () => {
  test("Berth serves the agent as one file that runs on Node without anything else, and the token's command uses it", async () => {
    const res = await h.app.inject({ method: "GET", url: "/api/agent/v1/berth-agent.mjs" });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers["content-type"]), /javascript/);
    assert.ok(res.body.startsWith("#!/usr/bin/env node\n"));
    assert.ok(res.body.includes("/api/agent/v1/register/"), "it is the agent");
    assert.ok(!/from ["'](ws|dockerode)["']/.test(res.body), "its packages are inside it");
    const t = await newToken(alice);
    assert.equal(
      t.command,
      `curl -fsSL http://berth.test:8000/api/agent/v1/berth-agent.mjs -o berth-agent.mjs && sudo node berth-agent.mjs --url http://berth.test:8000 --token ${t.token} --install-systemd`,
    );
  });
});

describe("registering a node with a token", () => {
  test("the token's namespace gets a byon node with the reported facts, Deploying until its tunnel is up; the token is used up", async () => {
    const t = await newToken(alice);
    const res = await register(h, t.token, { nickname: "desk", tags: ["home"] });
    assert.equal(res.status, 201, res.raw);
    const n = res.body;
    assert.equal(n.state, "Deploying");
    assert.equal(n.namespace, "alice");
    assert.match(n.resource_uri, /^\/api\/infra\/v1\/alice\/node\//);
    assert.equal(n.nickname, "desk");
    assert.deepEqual(n.tags, [{ name: "home" }]);
    assert.equal(n.cpu, 4);
    assert.equal(n.memory, 7900);
    assert.equal(n.disk, 121);
    assert.equal(n.engine_version, "20.10.24");
    assert.equal(n.region, "/api/infra/v1/region/byon/byon/");
    assert.equal(n.tunnel, `ws://berth.test:8000/api/agent/v1/node/${n.uuid}/tunnel/`);
    assert.equal(n.public_ip, "127.0.0.1");
    assert.equal(typeof n.node_key, "string");
    // The owner sees it; bob does not.
    assert.equal((await call(h, alice, "GET", n.resource_uri)).body.uuid, n.uuid);
    assert.equal((await call(h, bob, "GET", `/api/infra/v1/node/${n.uuid}/`)).status, 404);
    // The registration is an action of alice's namespace, by the token's creator.
    const actions = (await call(h, alice, "GET", "/api/audit/v1/action/?limit=1000")).body.objects;
    const reg = actions.find((a: { action: string; object: string }) => a.action === "Node Register");
    assert.equal(reg?.object, n.resource_uri);
    assert.equal(reg?.user, "alice");
    const bobsActions = (await call(h, bob, "GET", "/api/audit/v1/action/?limit=1000")).body.objects;
    assert.ok(!bobsActions.some((a: { object: string }) => a.object === n.resource_uri));
    // The key is kept only as a hash.
    const key = await h.store.agents.findKey(n.uuid);
    assert.ok(key && key.key_hash !== n.node_key && !JSON.stringify(key).includes(n.node_key));
    // Used up: a second registration is refused, and the list no longer offers it.
    const again = await call(h, undefined, "POST", "/api/agent/v1/register/", {
      token: t.token,
      engine: engineFacts(),
    });
    assert.equal(again.status, 403);
    assert.equal(again.body.code, "token_used");
    assert.match(again.body.error, /already used/);
    const list = await call(h, alice, "GET", "/api/infra/v1/token/");
    assert.ok(!list.body.objects.some((x: { uuid: string }) => x.uuid === t.uuid));
  });

  test("an expired token is refused with 403 and says so", async () => {
    const t = await newToken(alice);
    now += 3601 * 1000;
    try {
      const res = await register(h, t.token);
      assert.equal(res.status, 403);
      assert.equal(res.body.code, "token_expired");
      assert.match(res.body.error, /expired/);
      assert.ok(!(await call(h, alice, "GET", "/api/infra/v1/token/")).raw.includes(t.uuid));
    } finally {
      now -= 3601 * 1000;
    }
  });

  test("an unknown token is 401; a malformed registration is 400 naming the field", async () => {
    const res = await register(h, "nope");
    assert.equal(res.status, 401);
    const t = await newToken(alice);
    const bad = await call(h, undefined, "POST", "/api/agent/v1/register/", {
      token: t.token,
      engine: { ...engineFacts(), cpus: "many" },
    });
    assert.equal(bad.status, 400, bad.raw);
    assert.match(JSON.stringify(bad.body), /cpus/);
    // A refused body does not use the token up.
    assert.equal((await register(h, t.token)).status, 201);
  });

  test("the same engine is not registered twice in a namespace", async () => {
    const facts = engineFacts("engine-twice");
    const first = await call(h, undefined, "POST", "/api/agent/v1/register/", {
      token: (await newToken(alice)).token,
      engine: facts,
    });
    assert.equal(first.status, 201);
    const second = await call(h, undefined, "POST", "/api/agent/v1/register/", {
      token: (await newToken(alice)).token,
      engine: facts,
    });
    assert.equal(second.status, 409);
    assert.equal(second.body.code, "engine_already_registered");
  });

  test("engine-upgrade of an agent node is refused with 409: the host's package manager owns the engine", async () => {
    const n = (await register(h, (await newToken(alice)).token)).body;
    const res = await call(h, alice, "POST", `${n.resource_uri}engine-upgrade/`);
    assert.equal(res.status, 409, res.raw);
    assert.equal(res.body.code, "engine_managed_by_host");
    assert.match(res.body.error, /package manager/);
  });
});

describe("what a node key opens", () => {
  let node: { uuid: string; node_key: string; resource_uri: string };
  let base: string;

  before(async () => {
    node = (await register(h, (await newToken(alice)).token)).body;
    await h.app.listen({ port: 0, host: "127.0.0.1" });
    const address = h.app.server.address();
    if (!address || typeof address === "string") throw new Error("no address");
    base = `ws://127.0.0.1:${address.port}`;
  });

  /** The status the tunnel's upgrade is answered with (101 when accepted). */
  function upgrade(nodeUuid: string, key: string | undefined): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(`${base}/api/agent/v1/node/${nodeUuid}/tunnel/`, {
        headers: key ? { authorization: `Bearer ${key}` } : {},
      });
      ws.once("open", () => {
        ws.close();
        resolve({ status: 101, body: "" });
      });
      ws.once("unexpected-response", (_req, res) => {
        let body = "";
        res.on("data", (c: Buffer) => {
          body += c.toString();
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      });
      ws.once("error", reject);
    });
  }

  test("nothing of the platform API: the node key is not a user's credential", async () => {
    const asBasic = basic(node.uuid, node.node_key);
    for (const url of ["/api/app/v1/service/", "/api/app/v1/alice/service/", "/api/infra/v1/alice/node/"]) {
      const res = await h.app.inject({ method: "GET", url, headers: { authorization: asBasic } });
      assert.equal(res.statusCode, 401, url);
      const bearer = await h.app.inject({
        method: "GET",
        url,
        headers: { authorization: `Bearer ${node.node_key}` },
      });
      assert.equal(bearer.statusCode, 401, url);
    }
  });

  test("only its own node's tunnel: a wrong key, no key, or another node's uuid is refused before the upgrade", async () => {
    const other = (await register(h, (await newToken(bob)).token)).body;
    assert.equal((await upgrade(node.uuid, node.node_key)).status, 101);
    assert.equal((await upgrade(node.uuid, undefined)).status, 401);
    assert.equal((await upgrade(node.uuid, `${node.node_key}x`)).status, 401);
    assert.equal((await upgrade(other.uuid, node.node_key)).status, 401);
    assert.equal((await upgrade(node.uuid, other.node_key)).status, 401);
    assert.equal((await upgrade("not-a-uuid", node.node_key)).status, 400);
  });

  test("a terminated node's key opens nothing more; the agent is told the node is terminated", async () => {
    const n = (await register(h, (await newToken(alice)).token)).body;
    // Its agent connects once and goes: the node is Unreachable (it never was Deployed), and can be terminated.
    assert.equal((await upgrade(n.uuid, n.node_key)).status, 101);
    await waitFor(
      "node Unreachable",
      async () => (await call(h, alice, "GET", n.resource_uri)).body.state === "Unreachable",
    );
    const del = await call(h, alice, "DELETE", n.resource_uri);
    assert.equal(del.status, 202);
    await waitFor(
      "node Terminated",
      async () => (await call(h, alice, "GET", n.resource_uri)).body.state === "Terminated",
    );
    const res = await upgrade(n.uuid, n.node_key);
    assert.equal(res.status, 403);
    assert.equal(JSON.parse(res.body).code, "node_terminated");
  });
});

describe("the printed command", () => {
  test("every token's command parses as the agent parses it: a token never reads as an option", async () => {
    // A base64url secret starts with "-" one time in 64, and `--token -x…` is refused by the
    // agent's parser as an ambiguous option: 300 tokens find such a one 99 times in 100.
    for (let i = 0; i < 300; i++) {
      const res = await call(h, bob, "POST", "/api/infra/v1/token/");
      assert.equal(res.status, 201, res.raw);
      const { token, command, uuid } = res.body as { token: string; command: string; uuid: string };
      const argv = command.split(" && ").at(-1)!.split(" ").slice(3); // after `sudo node berth-agent.mjs`
      const { values } = parseArgs({ args: argv, options: AGENT_OPTIONS, strict: true });
      assert.equal(values.token, token, command);
      // Usable tokens are a quota (issue 26): each is revoked once looked at.
      assert.equal((await call(h, bob, "DELETE", `/api/infra/v1/token/${uuid}/`)).status, 204);
    }
  });
});
