// Bring your own node, on real engines: a Docker engine in its own network namespace that listens
// only on its unix socket (nothing Berth can dial), and the Berth agent run inside that namespace
// with a token from POST /api/infra/v1/token/, reaching Berth over a veth address. Berth drives the
// engine through the agent's tunnel: the node is Deployed, a service runs on it, logs and exec
// work; the node follows the agent (Unreachable when it is killed, Deployed again with the same
// uuid when it returns); terminating the node removes Berth's containers and the agent exits.
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { createWriteStream, readFileSync, statSync, writeFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { drain, openStream } from "../streams/support.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";
import { type NetnsDockerd, netnsDockerdUnavailable, startNetnsDockerd } from "../support/netns-dockerd.ts";

const unavailable = netnsDockerdUnavailable();
if (unavailable && process.env.CI === "true") {
  throw new Error(`the real-engine tier must run in CI: ${unavailable}`);
}

const GRACE_MS = 4000;

async function freePort(host: string): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (!address || typeof address === "string") throw new Error("no port");
  return address.port;
}

/** Whether anything accepts a TCP connection at host:port. */
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host, port, timeout: 2000 });
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
    s.once("timeout", () => {
      s.destroy();
      resolve(false);
    });
  });
}

function exited(p: ChildProcess): Promise<number | null> {
  if (p.exitCode !== null) return Promise.resolve(p.exitCode);
  return new Promise((resolve) => p.once("exit", (code) => resolve(code)));
}

describe("the Berth agent on a real engine behind no open port", {
  skip: unavailable ? `real engines unavailable: ${unavailable}` : false,
}, () => {
  let engine: NetnsDockerd;
  let h: Harness;
  let alice: Caller;
  let bob: Caller;
  let base: string;
  let url: string;
  let agent: ChildProcess | undefined;
  let nodeUri: string;
  let nodeUuid: string;
  let container: string;
  let serviceUri: string;
  const stateDir = () => path.join(engine.dir, "agent-state");
  const agentLog = () => path.join(engine.dir, "agent.log");
  const serverLog = () => path.join(engine.dir, "berth.log");
  const tunnelLines = () =>
    agentLogText(serverLog())
      .split("\n")
      .filter((l) => l.includes("tunnel"))
      .join("\n");

  // The agent as a server gets it: the one file Berth serves, run with Node and nothing else.
  const agentFile = () => path.join(engine.dir, "berth-agent.mjs");
  const startAgent = (args: string[]) =>
    engine.spawnInside(
      process.execPath,
      [agentFile(), "--url", url, "--state-dir", stateDir(), "--docker-socket", engine.socketPath, ...args],
      {
        log: agentLog(),
      },
    );

  before(async () => {
    engine = await startNetnsDockerd();
    const port = await freePort(engine.hostAddress);
    url = `http://${engine.hostAddress}:${port}`;
    h = await startHarness({
      logStream: createWriteStream(serverLog()),
      env: {
        BERTH_LOG_LEVEL: "info",
        BERTH_PUBLIC_URL: url,
        BERTH_NODE_UNREACHABLE_GRACE_MS: String(GRACE_MS),
        BERTH_NODE_HEALTH_INTERVAL_MS: "500",
        BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
        BERTH_RECONCILE_INTERVAL_MS: "300",
      },
    });
    await h.app.listen({ host: engine.hostAddress, port });
    base = url.replace(/^http/, "ws");
    alice = await createUser(h, "alice");
    bob = await createUser(h, "bob");
    const download = await fetch(`${url}/api/agent/v1/berth-agent.mjs`);
    assert.equal(download.status, 200);
    writeFileSync(agentFile(), Buffer.from(await download.arrayBuffer()));
  });

  after(async () => {
    if (agent && agent.exitCode === null) agent.kill("SIGKILL");
    h?.reconciler.stop();
    h?.health.stop();
    await h?.close();
    await engine?.stop();
  });

  test("the engine listens on no TCP port; the agent registers it with a token as a Deployed node of the token's namespace", {
    timeout: 60_000,
  }, async () => {
    for (const p of [2375, 2376])
      assert.equal(await accepts(engine.nodeAddress, p), false, `nothing on ${p}`);
    const token = await call(h, alice, "POST", "/api/infra/v1/token/");
    assert.equal(token.status, 201, token.raw);
    assert.equal(typeof token.body.token, "string");
    agent = startAgent(["--token", token.body.token, "--nickname", "behind-nat"]);
    const node = await waitFor(
      "the agent's node Deployed with engine facts from the tunnel",
      async () => {
        const list = (await call(h, alice, "GET", "/api/infra/v1/node/")).body.objects;
        const n = list[0];
        return n?.state === "Deployed" && n.engine_version && list.length === 1 ? n : undefined;
      },
      30_000,
      200,
    ).catch((err: Error) => {
      throw new Error(
        `${err.message}\nagent log:\n${agentLogText(agentLog())}\nBerth's tunnel log:\n${agentLogText(
          serverLog(),
        )
          .split("\n")
          .filter((l) => l.includes("tunnel"))
          .join("\n")}`,
      );
    });
    nodeUri = node.resource_uri;
    nodeUuid = node.uuid;
    const version = await engine.docker.version();
    assert.equal(node.engine_version, version.Version);
    assert.equal(node.nickname, "behind-nat");
    assert.ok(node.cpu > 0 && node.memory > 0);
    assert.equal(node.public_ip, engine.nodeAddress, "public_ip is the address Berth sees");
    assert.equal(node.tunnel, `${base}/api/agent/v1/node/${node.uuid}/tunnel/`);
    assert.match(nodeUri, /^\/api\/infra\/v1\/alice\/node\//);
    assert.equal((await call(h, bob, "GET", "/api/infra/v1/node/")).body.meta.total_count, 0);
    const identity = statSync(path.join(stateDir(), "identity.json"));
    assert.equal(identity.mode & 0o777, 0o600, "the node key is kept in a 0600 file");
  });

  test("a service deploys onto the node; container logs, service logs and exec work through the tunnel", {
    timeout: 90_000,
  }, async () => {
    const created = await call(h, alice, "POST", "/api/app/v1/service/", {
      image: engine.image,
      name: "hello",
      run_command: `sh -c 'echo hello from the agent node; echo oops >&2; sleep 100000'`,
    });
    assert.equal(created.status, 201, created.raw);
    serviceUri = created.body.resource_uri;
    const start = await call(h, alice, "POST", `${serviceUri}start/`);
    assert.equal(start.status, 202);
    const running = await waitFor(
      "the service Running",
      async () => {
        const s = (await call(h, alice, "GET", serviceUri)).body;
        return s.state === "Running" ? s : undefined;
      },
      60_000,
      200,
    ).catch(async (err: Error) => {
      // Say why: the start action's log, the service, and the agent's own log.
      const actionUuid = String(start.headers["x-platform-action-uri"]).split("/").at(-2)!;
      const log = (await h.store.actions.actionLogTail(actionUuid, 200)).map((l) => l.line).join("\n");
      const s = (await call(h, alice, "GET", serviceUri)).raw;
      throw new Error(
        `${err.message}\nservice: ${s}\nstart action log:\n${log}\nagent log:\n${agentLogText(agentLog())}\nBerth's tunnel log:\n${tunnelLines()}`,
      );
    });
    container = running.containers[0];
    const c = (await call(h, alice, "GET", container)).body;
    assert.equal(c.node, nodeUri);
    const onEngine = await engine.docker.listContainers({ filters: { label: ["io.berth.container"] } });
    assert.equal(onEngine.length, 1, "the container runs on the engine in the namespace");

    const logs = await waitFor(
      "container logs",
      async () => {
        const { frames } = await drain(`${base}${container}logs/?follow=false`, alice.auth);
        return frames.some((f) => f.log === "hello from the agent node\n") &&
          frames.some((f) => f.streamType === "stderr" && f.log === "oops\n")
          ? frames
          : undefined;
      },
      15_000,
      300,
    );
    assert.ok(logs.length >= 2);
    const serviceLogs = await drain(`${base}${serviceUri}logs/?follow=false`, alice.auth);
    assert.ok(
      serviceLogs.frames.some((f) => f.log === "hello from the agent node\n" && f.source === "hello-1"),
      JSON.stringify(serviceLogs.frames),
    );

    const shell = await openStream(`${base}${container}exec/`, { auth: alice.auth });
    shell.send("echo exec through the tunnel; cat /var/www/index.html\n");
    await shell.until("the answers", (fs) =>
      fs
        .map((f) => f.output ?? "")
        .join("")
        .includes("exec through the tunnel\nhello from busybox\n"),
    );
    shell.send("\u0004");
    assert.equal((await shell.closed).reason, "exit_code=0");
    // A large output crosses the tunnel whole (flow control, many frames).
    const big = await openStream(`${base}${container}exec/?command=${encodeURIComponent("seq 1 200000")}`, {
      auth: alice.auth,
    });
    const closed = await big.closed;
    const out = big.frames.map((f) => f.output ?? "").join("");
    assert.equal(closed.reason, "exit_code=0");
    assert.equal(out.split("\n").filter(Boolean).length, 200000);
    assert.ok(out.endsWith("199999\n200000\n"));
  });

  test("engine-upgrade is refused with 409: the host's package manager owns the engine", async () => {
    const res = await call(h, alice, "POST", `${nodeUri}engine-upgrade/`);
    assert.equal(res.status, 409);
    assert.equal(res.body.code, "engine_managed_by_host");
  });

  test("the agent killed: Unreachable within the grace; restarted without a token: Deployed again, same node", {
    timeout: 90_000,
  }, async (t) => {
    agent!.kill("SIGKILL");
    await exited(agent!);
    const killedAt = Date.now();
    await waitFor(
      "node Unreachable",
      async () => (await call(h, alice, "GET", nodeUri)).body.state === "Unreachable",
      GRACE_MS + 2000,
      100,
    );
    t.diagnostic(`Unreachable ${Date.now() - killedAt} ms after the agent died (grace ${GRACE_MS} ms)`);
    // A health check goes through the tunnel too: with no agent, the engine cannot be reached.
    const check = await call(h, alice, "POST", `${nodeUri}health-check/`);
    assert.equal(check.status, 200, check.raw);
    assert.equal(check.body.state, "Unreachable");
    agent = startAgent([]);
    const restartedAt = Date.now();
    await waitFor(
      "node Deployed again",
      async () => (await call(h, alice, "GET", nodeUri)).body.state === "Deployed",
      30_000,
      100,
    );
    t.diagnostic(`Deployed ${Date.now() - restartedAt} ms after the agent restarted`);
    const nodes = (await call(h, alice, "GET", "/api/infra/v1/node/")).body;
    assert.equal(nodes.meta.total_count, 1, "the same node, not a new one");
    assert.equal(nodes.objects[0].uuid, nodeUuid);
    // The container kept running on the engine, and Berth reaches it again.
    const { frames } = await drain(`${base}${container}logs/?follow=false`, alice.auth);
    assert.ok(frames.some((f) => f.log === "hello from the agent node\n"));
  });

  test("the node terminated: Berth's containers are gone from the engine and the agent exits", {
    timeout: 90_000,
  }, async () => {
    const outsider = await engine.docker.createContainer({ Image: engine.image, Cmd: ["sleep", "1000"] });
    const del = await call(h, alice, "DELETE", nodeUri);
    assert.equal(del.status, 202, del.raw);
    const code = await Promise.race([
      exited(agent!),
      new Promise<string>((resolve) => setTimeout(() => resolve("still running"), 60_000)),
    ]);
    assert.equal(code, 0, "the agent exits by itself, successfully");
    await waitFor(
      "node Terminated",
      async () => (await call(h, alice, "GET", nodeUri)).body.state === "Terminated",
      20_000,
    );
    const berths = await engine.docker.listContainers({
      all: true,
      filters: { label: ["io.berth.container"] },
    });
    assert.deepEqual(berths, [], "no container of Berth's is left");
    const others = await engine.docker.listContainers({ all: true });
    assert.deepEqual(
      others.map((c) => c.Id),
      [outsider.id],
      "containers Berth did not start are left alone",
    );
    const action = (await call(h, alice, "GET", del.headers["x-platform-action-uri"] as string)).body;
    assert.equal(action.state, "Success");
  });
});

function agentLogText(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return "(no log)";
  }
}
