// `berth service` and `berth container` operations against a live server process with simulated
// nodes: scale, set, env, stop, start, redeploy, terminate.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { api as apiOf, berth, okWith, rows, Server, simulatedCluster } from "./support.ts";

let server: Server;
let env: Record<string, string>;
const ok = okWith(() => env);
const api = async (method: string, p: string, body?: unknown) => (await apiOf(server, method, p, body)).body;

before(async () => {
  server = await Server.start();
  env = server.adminEnv();
  await simulatedCluster(server, "pool", 2);
  await ok([
    "service",
    "run",
    "busybox:local",
    "--name",
    "hello",
    "-t",
    "2",
    "-r",
    "sh -c 'echo hello; sleep 100000'",
    "-e",
    "GREETING=hi",
    "-p",
    "80",
    "--sync",
  ]);
});

after(async () => {
  await server.stop();
});

describe("operations on services and containers", () => {
  test("scale, set, env add/rm/ls, stop and start change the service as the API shows", async () => {
    await ok(["service", "scale", "hello", "3", "--sync"]);
    assert.equal(
      (await api("GET", `/api/app/v1/service/?name=hello`)).objects?.[0]?.current_num_containers,
      3,
    );

    await ok(["service", "env", "add", "hello", "A=1", "B=2"]);
    await ok(["service", "env", "rm", "hello", "GREETING"]);
    const env1 = await ok(["service", "env", "ls", "hello"]);
    assert.deepEqual(rows(env1.stdout), [
      ["A", "1"],
      ["B", "2"],
    ]);
    const missing = await berth(["service", "env", "rm", "hello", "NOPE"], { env });
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no variable NOPE/);

    await ok(["service", "set", "hello", "--nickname", "greeter", "--autorestart", "on_failure"]);
    const s = JSON.parse((await ok(["service", "inspect", "hello"])).stdout);
    assert.equal(s.nickname, "greeter");
    assert.equal(s.autorestart, "ON_FAILURE");

    await ok(["service", "stop", "hello", "--sync"]);
    assert.equal(JSON.parse((await ok(["service", "inspect", "hello"])).stdout).state, "Stopped");
    const started = await ok(["service", "start", "hello", "--sync", "--json"]);
    assert.equal(JSON.parse(started.stdout).state, "Running");
  });

  test("container stop/start/redeploy/terminate by name; service terminate", async () => {
    await ok(["container", "stop", "hello-3", "--sync"]);
    assert.match((await ok(["container", "ps", "-s", "Stopped"])).stdout, /\nhello-3 /);
    await ok(["container", "start", "hello-3", "--sync"]);
    await ok(["container", "redeploy", "hello-3", "--sync"]);
    await ok(["container", "terminate", "hello-3", "--sync"]);
    assert.doesNotMatch((await ok(["container", "ps"])).stdout, /\nhello-3 /);
    const term = await ok(["service", "terminate", "hello", "--sync"]);
    assert.equal(term.stdout.trim().split("\n").length, 1, "one action uuid for one service");
    assert.doesNotMatch((await ok(["service", "ls"])).stdout, /\nhello /);
  });
});
