// What an agent sees (issue 15, security): the real agent (src/agent) registers and keeps its
// tunnel to Berth; behind it sits a recording HTTP server on a unix socket in place of the
// engine, so the test reads every Engine API call that crossed the tunnel. Another namespace's
// work (bob's service on bob's nodes) never reaches alice's agent; terminate reaches it and it exits.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { type AgentExit, BerthAgent } from "../../src/agent/agent.ts";
import { runningService, simulatedCluster } from "../streams/support.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";

describe("an agent sees only its own node's engine calls", () => {
  let h: Harness;
  let alice: Caller;
  let bob: Caller;
  let dir: string;
  let server: http.Server;
  let agent: BerthAgent;
  let exit: Promise<AgentExit>;
  const seen: string[] = [];

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "berth-isolation-"));
    const socketPath = path.join(dir, "engine.sock");
    server = http.createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => {
        body += c.toString();
      });
      req.on("end", () => {
        seen.push(`${req.method} ${req.url} ${body}`);
        const json = (v: unknown) =>
          res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(v));
        const url = req.url?.replace(/^\/v[\d.]+/, "") ?? "";
        if (url.startsWith("/_ping")) return res.end("OK");
        if (url.startsWith("/version")) return json({ Version: "20.10.24", ApiVersion: "1.41" });
        if (url.startsWith("/info"))
          return json({
            ID: "recording-engine",
            Name: "recorder",
            NCPU: 2,
            MemTotal: 2 * 1024 ** 3,
            ServerVersion: "20.10.24",
            Driver: "overlay2",
            DockerRootDir: dir,
          });
        if (url.startsWith("/containers/json")) return json([]);
        if (url.startsWith("/events")) {
          res.writeHead(200, { "content-type": "application/json" });
          return; // stays open, as a real event stream
        }
        res.writeHead(404, { "content-type": "application/json" }).end('{"message":"no such object"}');
      });
    });
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    h = await startHarness({
      env: { BERTH_NODE_HEALTH_INTERVAL_MS: "200", BERTH_RECONCILE_INTERVAL_MS: "200" },
    });
    await h.app.listen({ host: "127.0.0.1", port: 0 });
    const address = h.app.server.address();
    if (!address || typeof address === "string") throw new Error("no address");
    alice = await createUser(h, "alice");
    bob = await createUser(h, "bob");
    const token = (await call(h, alice, "POST", "/api/infra/v1/token/")).body.token as string;
    agent = new BerthAgent({
      url: `http://127.0.0.1:${address.port}`,
      token,
      stateDir: path.join(dir, "state"),
      socketPath,
      log: () => {},
      minBackoffMs: 50,
    });
    exit = agent.run();
  });

  after(async () => {
    agent?.stop();
    server?.closeAllConnections();
    server?.close();
    await h?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("the agent's node is Deployed in alice's namespace with what the engine said through the tunnel", async () => {
    const node = await waitFor(
      "alice's node Deployed with the engine's own id",
      async () => {
        const n = (await h.store.nodes.liveNodes({ namespace: "alice" }))[0];
        return n?.state === "Deployed" && n.last_seen && h.tunnels.isConnected(n.uuid) ? n : undefined;
      },
      20_000,
    );
    assert.equal(node.engine_id, "recording-engine");
    assert.ok(
      seen.some((l) => l.startsWith("GET /info")),
      "Berth asked the engine through the tunnel",
    );
  });

  test("bob's service on bob's nodes: none of it crosses alice's tunnel", async () => {
    await simulatedCluster(h, bob, 1);
    const svc = await runningService(h, bob, { name: "secret-sauce", target_num_containers: 2 });
    const bobsNode = (await h.store.nodes.liveNodes({ namespace: "bob" }))[0]!;
    const seenBefore = seen.length;
    // Full reconciler passes over every node, bob's included, and alice's engine talked to since…
    for (let pass = 0; pass < 2; pass++) {
      await h.reconciler.resync();
      await h.reconciler.settle();
    }
    await waitFor("alice's engine to be talked to again", async () => seen.length > seenBefore, 20_000);
    const traffic = seen.join("\n");
    for (const secret of ["bob", "secret-sauce", svc.uuid, bobsNode.uuid, ...svc.containers]) {
      assert.ok(!traffic.includes(secret), `${secret} never reaches alice's agent`);
    }
    for (const line of seen) assert.match(line, /^(GET|POST|DELETE|HEAD) \//, "only Engine API calls");
  });

  test("terminating the node reaches the agent: it cleans up, forgets its identity and stops", async () => {
    const node = (await h.store.nodes.liveNodes({ namespace: "alice" }))[0]!;
    const del = await call(h, alice, "DELETE", `/api/infra/v1/node/${node.uuid}/`);
    assert.equal(del.status, 202);
    const result = await Promise.race([
      exit,
      new Promise<string>((r) => setTimeout(() => r("running"), 20_000)),
    ]);
    assert.deepEqual(result, { reason: "terminated", removed: 0 });
    assert.ok(
      seen.some((l) => l.startsWith("GET /containers/json")),
      "the agent listed the engine's containers",
    );
    const { loadIdentity } = await import("../../src/agent/identity.ts");
    assert.equal(await loadIdentity(path.join(dir, "state")), undefined);
    // The agent exits once it has sent its report; the action logs it as it arrives.
    const action = del.headers["x-platform-action-uri"]!.toString().split("/").at(-2)!;
    await waitFor("the agent's report in the action's log", async () =>
      (await h.store.actions.actionLogTail(action, 50)).some((l) =>
        /The agent removed 0 container\(s\) and exits/.test(l.line),
      ),
    );
  });
});
