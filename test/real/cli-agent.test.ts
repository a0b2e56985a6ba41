// Bring your own node with the installed berth package, on a real engine: `berth node byo` prints
// the command, and that very command (`berth agent --url … --token … --install-systemd`, run
// inside a network namespace whose Docker engine listens on its unix socket only) makes the
// engine a node; a service runs there and its log comes back through the tunnel; the systemd
// unit it wrote re-attaches the same node through `berth agent`; `berth node rm` ends the agent.
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { berth, freePort, installPackage } from "../cli/support.ts";
import { type Caller, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";
import { type NetnsDockerd, netnsDockerdUnavailable, startNetnsDockerd } from "../support/netns-dockerd.ts";

const unavailable = netnsDockerdUnavailable();
if (unavailable && process.env.CI === "true") {
  throw new Error(`the real-engine tier must run in CI: ${unavailable}`);
}

function exited(p: ChildProcess): Promise<number | null> {
  if (p.exitCode !== null) return Promise.resolve(p.exitCode);
  return new Promise((resolve) => p.once("exit", (code) => resolve(code)));
}

describe("berth node byo and berth agent, from the installed package, on a real engine", {
  skip: unavailable ? `real engines unavailable: ${unavailable}` : false,
}, () => {
  let engine: NetnsDockerd;
  let h: Harness;
  let alice: Caller;
  let url: string;
  let installedBerth: string;
  let agent: ChildProcess | undefined;
  let nodeUuid: string;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-cli-agent-"));
  const agentLog = path.join(dir, "agent.log");
  const unitDir = path.join(dir, "systemd");
  const cli = () => ({
    BERTH_URL: url,
    BERTH_USER: alice.username,
    BERTH_APIKEY: alice.key,
    BERTH_CONFIG: path.join(dir, "config.json"),
  });
  const ok = async (args: string[]) => {
    const r = await berth(args, { env: cli() });
    if (r.code !== 0) throw new Error(`berth ${args.join(" ")}: exit ${r.code}\n${r.stderr}${r.stdout}`);
    return r;
  };
  const log = () => (fs.existsSync(agentLog) ? fs.readFileSync(agentLog, "utf8") : "");

  before(async () => {
    // The package as a user installs it: packed, installed offline into a prefix of its own.
    installedBerth = (await installPackage(dir)).bin;

    engine = await startNetnsDockerd();
    const port = await freePort(engine.hostAddress);
    url = `http://${engine.hostAddress}:${port}`;
    h = await startHarness({
      env: {
        BERTH_PUBLIC_URL: url,
        BERTH_NODE_UNREACHABLE_GRACE_MS: "4000",
        BERTH_NODE_HEALTH_INTERVAL_MS: "500",
        BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
        BERTH_RECONCILE_INTERVAL_MS: "300",
      },
    });
    await h.app.listen({ host: engine.hostAddress, port });
    alice = await createUser(h, "alice");
  });

  after(async () => {
    if (agent && agent.exitCode === null) agent.kill("SIGKILL");
    h?.reconciler.stop();
    h?.health.stop();
    await h?.close();
    await engine?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test("the command node byo prints, run on the server with the installed berth, makes its engine a Deployed node", {
    timeout: 120_000,
  }, async () => {
    const byo = await ok(["node", "byo"]);
    const line = /^ {4}(sudo berth agent .+)$/m.exec(byo.stdout)?.[1];
    assert.ok(line, byo.stdout);
    assert.match(line, new RegExp(`^sudo berth agent --url ${url} --token \\S+ --install-systemd$`));
    // As printed, without sudo (the test runs as root), with this test's engine socket and folders.
    const args = line.split(" ").slice(3);
    agent = engine.spawnInside(
      process.execPath,
      [
        installedBerth,
        "agent",
        ...args,
        "--state-dir",
        path.join(dir, "state"),
        "--docker-socket",
        engine.socketPath,
        "--systemd-dir",
        unitDir,
      ],
      { log: agentLog },
    );
    const node = await waitFor(
      "the node Deployed",
      async () => {
        const r = await berth(["node", "ls", "--json"], { env: cli() });
        const n = r.code === 0 ? JSON.parse(r.stdout).objects[0] : undefined;
        return n?.state === "Deployed" ? n : undefined;
      },
      60_000,
      300,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\nagent log:\n${log()}`);
    });
    nodeUuid = node.uuid;
    assert.equal(node.engine_version, (await engine.docker.version()).Version);
    assert.match(log(), /^berth agent: registered as node \S+ in namespace alice$/m);
    assert.equal((await ok(["node", "token", "ls", "-q"])).stdout, "", "the token is used up");

    // The unit it wrote runs the agent again through the same installed berth, without the token.
    const unit = fs.readFileSync(path.join(unitDir, "berth-agent.service"), "utf8");
    const execStart = /^ExecStart=(.+)$/m.exec(unit)?.[1] ?? "";
    assert.equal(
      execStart,
      `${process.execPath} ${installedBerth} agent --url ${url} --state-dir ${path.join(dir, "state")} --docker-socket ${engine.socketPath}`,
    );
    assert.ok(!unit.includes("--token"));
  });

  test("a service runs on the node and its log comes back through the tunnel", {
    timeout: 120_000,
  }, async () => {
    await ok([
      "service",
      "run",
      engine.image,
      "--name",
      "hello",
      "-r",
      "sh -c 'echo hello through the agent; sleep 100000'",
      "--sync",
    ]);
    const logs = await waitFor(
      "the service's log",
      async () => {
        const r = await berth(["service", "logs", "hello"], { env: cli() });
        return r.stdout.includes("hello through the agent") ? r.stdout : undefined;
      },
      30_000,
      300,
    );
    assert.match(logs, /hello through the agent/);
  });

  test("the unit's command re-attaches the same node; node rm --sync ends the agent", {
    timeout: 120_000,
  }, async () => {
    agent!.kill("SIGKILL");
    await exited(agent!);
    const unit = fs.readFileSync(path.join(unitDir, "berth-agent.service"), "utf8");
    const [node, script, ...rest] = (/^ExecStart=(.+)$/m.exec(unit)?.[1] ?? "").split(" ");
    agent = engine.spawnInside(node!, [script!, ...rest], { log: agentLog });
    await waitFor(
      "re-attached",
      async () =>
        /identity found, re-attaching/.test(log()) &&
        /tunnel up to/.test(log().split("re-attaching")[1] ?? ""),
      30_000,
      200,
    );
    await waitFor(
      "the node Deployed again",
      async () =>
        (await berth(["node", "inspect", nodeUuid], { env: cli() })).stdout.includes('"state": "Deployed"'),
      30_000,
      300,
    );
    assert.equal((await ok(["node", "ls", "-q"])).stdout, `${nodeUuid}\n`, "the same node, not a new one");

    await ok(["service", "terminate", "hello", "--sync"]);
    const rm = await ok(["node", "rm", nodeUuid.slice(0, 8), "--sync"]);
    assert.match(rm.stderr, /Success/);
    const code = await Promise.race([
      exited(agent),
      new Promise<string>((resolve) => setTimeout(() => resolve("still running"), 60_000)),
    ]);
    assert.equal(code, 0, `the agent exits by itself\n${log()}`);
  });
});
