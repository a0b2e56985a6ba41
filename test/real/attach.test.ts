// Bring your own engine: an existing Docker engine attached as a node through the API, over its
// unix socket and over TCP with mutual TLS; a service then runs on it for real.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { loadConfig } from "../../src/config/index.ts";
import { startServer } from "../../src/main.ts";
import { dockerdUnavailable, type PrivateDockerd, startPrivateDockerd } from "../support/dockerd.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";

const unavailable = dockerdUnavailable();
if (unavailable && process.env.CI === "true") {
  throw new Error(`the real-engine tier must run in CI: ${unavailable}`);
}

describe("attaching an existing engine", {
  skip: unavailable ? `real engines unavailable: ${unavailable}` : false,
}, () => {
  let h: Harness;
  let engine: PrivateDockerd;
  let alice: Caller;

  before(async () => {
    engine = await startPrivateDockerd();
    h = await startHarness({
      env: { BERTH_CONTAINER_STOP_TIMEOUT_S: "1", BERTH_RECONCILE_INTERVAL_MS: "300" },
    });
    alice = await createUser(h, "alice");
  });
  after(async () => {
    await h?.close();
    await engine?.stop();
  });

  test("only administrators may attach engines, and an address where nothing answers is a 400", async () => {
    const denied = await call(h, alice, "POST", "/api/infra/v1/node/", {
      engine_url: `unix://${engine.socketPath}`,
    });
    assert.equal(denied.status, 403);
    assert.equal(denied.body.code, "admin_only");
    const nothing = await call(h, h.admin, "POST", "/api/infra/v1/node/", {
      engine_url: "unix:///nonexistent/docker.sock",
    });
    assert.equal(nothing.status, 400);
    assert.equal(nothing.body.details[0].field, "engine_url");
    const bad = await call(h, h.admin, "POST", "/api/infra/v1/node/", {
      engine_url: "http://example.invalid",
    });
    assert.equal(bad.status, 400);
  });

  test("an engine over TCP with mutual TLS becomes a Deployed node with the engine's facts, once", async () => {
    assert.ok(engine.tcp.tls, "the private engine offers TLS");
    const res = await call(h, h.admin, "POST", "/api/infra/v1/node/", {
      engine_url: engine.tcp.address,
      tls: engine.tcp.tls,
      nickname: "my box",
      tags: ["own"],
    });
    assert.equal(res.status, 201, res.raw);
    const n = res.body;
    assert.equal(n.state, "Deployed");
    assert.equal(n.nickname, "my box");
    assert.ok(n.cpu > 0 && n.memory > 0);
    assert.match(n.engine_version, /^\d+\.\d+/);
    assert.equal(n.node_cluster, null);
    assert.equal(n.region, "/api/infra/v1/region/byon/byon/");
    assert.deepEqual(n.tags, [{ name: "own" }]);
    assert.ok(!JSON.stringify(n).includes("PRIVATE KEY"), "the TLS key is never shown");
    const row = (await h.store.nodes.findNode(n.uuid))!;
    assert.ok(row.engine_tls && !row.engine_tls.includes("PRIVATE KEY"), "the TLS key is encrypted at rest");
    const again = await call(h, h.admin, "POST", "/api/infra/v1/node/", {
      engine_url: `unix://${engine.socketPath}`,
    });
    assert.equal(again.status, 409, `the same engine (same engine id) is not attached twice: ${again.raw}`);
  });

  test("a service runs on the attached engine for real and is removed from it at terminate", async () => {
    const s = (
      await call(h, h.admin, "POST", "/api/app/v1/service/", {
        image: engine.image,
        name: "hello",
        run_command: "sleep 100000",
        tags: ["own"],
      })
    ).body;
    const start = await call(h, h.admin, "POST", `${s.resource_uri}start/`);
    assert.equal(start.status, 202);
    const running = await waitFor(
      "service Running",
      async () => {
        const r = (await call(h, h.admin, "GET", s.resource_uri)).body;
        return r.state === "Running" ? r : undefined;
      },
      30_000,
    );
    const node = (await h.store.nodes.liveNodes())[0]!;
    const onEngine = await h.engines.forNode(node).listContainers({ labels: { "io.berth.service": s.uuid } });
    assert.equal(onEngine.length, 1);
    assert.equal(onEngine[0]!.state, "running");
    assert.equal(running.running_num_containers, 1);
    await call(h, h.admin, "DELETE", s.resource_uri);
    await waitFor(
      "service Terminated",
      async () => (await call(h, h.admin, "GET", s.resource_uri)).body.state === "Terminated",
      30_000,
    );
    assert.deepEqual(
      await h.engines.forNode(node).listContainers({ all: true, labels: { "io.berth.service": s.uuid } }),
      [],
    );
  });

  test("on start-up, the engine at DOCKER_HOST is attached to the administrator's namespace when it has no node", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-autoattach-"));
    const server = await startServer(
      loadConfig({
        BERTH_LISTEN: "127.0.0.1:0",
        BERTH_DATA_DIR: dataDir,
        BERTH_LOG_LEVEL: "silent",
        BERTH_ADMIN_USERNAME: "boss",
        BERTH_ADMIN_PASSWORD: "boss-password",
        BERTH_ADMIN_API_KEY: "boss-key-0123456789abcdef",
        DOCKER_HOST: `unix://${engine.socketPath}`,
        BERTH_LOCAL_LAB_RANGE: "10.221.0.0/16",
      }),
    );
    try {
      const nodes = await server.store.nodes.liveNodes({ namespace: "boss" });
      assert.equal(nodes.length, 1);
      assert.equal(nodes[0]!.state, "Deployed");
      assert.equal(nodes[0]!.engine_url, `unix://${engine.socketPath}`);
    } finally {
      await server.close();
    }
    // A second start finds the node already there and attaches nothing more.
    const again = await startServer(
      loadConfig({
        BERTH_LISTEN: "127.0.0.1:0",
        BERTH_DATA_DIR: dataDir,
        BERTH_LOG_LEVEL: "silent",
        DOCKER_HOST: `unix://${engine.socketPath}`,
        BERTH_LOCAL_LAB_RANGE: "10.221.0.0/16",
      }),
    );
    try {
      assert.equal((await again.store.nodes.liveNodes({ namespace: "boss" })).length, 1);
    } finally {
      await again.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test("terminating an attached node detaches it and leaves the engine running", async () => {
    const node = (await h.store.nodes.liveNodes())[0]!;
    const del = await call(h, h.admin, "DELETE", `/api/infra/v1/node/${node.uuid}/`);
    assert.equal(del.status, 202);
    await waitFor(
      "node Terminated",
      async () =>
        (await call(h, h.admin, "GET", `/api/infra/v1/node/${node.uuid}/`)).body.state === "Terminated",
    );
    await h.engines.forNode(node).ping();
  });
});
