// The `berth` binary as a user runs it, against a live server process with simulated nodes:
// credentials, services, containers (logs, exec), stacks from YAML files, output modes and exit codes.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { basic } from "../support/harness.ts";
import { ADMIN, berth, rows, Server } from "./support.ts";

let server: Server;
let env: Record<string, string>;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

async function api(method: string, p: string, body?: unknown) {
  const res = await fetch(server.url + p, {
    method,
    headers: { authorization: basic(ADMIN.username, ADMIN.key), "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return res.json() as Promise<Record<string, unknown> & { objects?: Record<string, unknown>[] }>;
}

async function ok(args: string[], opts: Parameters<typeof berth>[1] = {}) {
  const r = await berth(args, { env, ...opts });
  assert.equal(r.code, 0, `berth ${args.join(" ")}: exit ${r.code}\n${r.stderr}${r.stdout}`);
  return r;
}

before(async () => {
  server = await Server.start();
  env = server.adminEnv();
  const cluster = await api("POST", "/api/infra/v1/nodecluster/", {
    name: "pool",
    region: "/api/infra/v1/region/aws/us-east-1/",
    node_type: "/api/infra/v1/nodetype/aws/t2.micro/",
    target_num_nodes: 2,
  });
  await api("POST", `${cluster.resource_uri}deploy/`);
  for (let i = 0; i < 100; i++) {
    if ((await api("GET", String(cluster.resource_uri))).state === "Deployed") return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("the simulated cluster did not deploy");
});

after(() => server.stop());

describe("credentials", () => {
  test("login with a password stores URL, user and a new API key in a 0600 file; whoami and logout use it", async () => {
    const config = path.join(server.configDir, "nested", "config.json");
    const own = { BERTH_CONFIG: config, BERTH_URL: server.url };
    const login = await berth(["login", "-u", ADMIN.username, "--password-stdin"], {
      env: own,
      input: `${ADMIN.password}\n`,
    });
    assert.equal(login.code, 0, login.stderr);
    assert.match(login.stdout, /Signed in to http:\/\/127\.0\.0\.1:\d+ as admin/);
    assert.equal(fs.statSync(config).mode & 0o777, 0o600);
    const stored = JSON.parse(fs.readFileSync(config, "utf8"));
    assert.equal(stored.user, "admin");
    assert.equal(stored.url, server.url);
    assert.notEqual(stored.apikey, ADMIN.password, "a key is stored, never the password");

    // Only the config file now: no URL or key in the environment.
    const who = await berth(["whoami"], { env: { BERTH_CONFIG: config } });
    assert.equal(who.code, 0, who.stderr);
    assert.match(who.stdout, /^admin at http:\/\/127\.0\.0\.1:\d+ \(namespaces: admin\)\n$/);

    // Variables override the file: a wrong key from the environment is refused (401 → exit 1).
    const wrong = await berth(["service", "ls"], {
      env: { BERTH_CONFIG: config, DOCKERCLOUD_USER: "admin", DOCKERCLOUD_APIKEY: "not-the-key" },
    });
    assert.equal(wrong.code, 1);
    assert.equal(wrong.stdout, "");
    assert.match(wrong.stderr, /berth login/);

    const out = await berth(["logout"], { env: { BERTH_CONFIG: config } });
    assert.equal(out.code, 0, out.stderr);
    assert.equal(fs.existsSync(config), false);
    // logout revoked the key login made.
    const revoked = await fetch(`${server.url}/auth/`, {
      headers: { authorization: basic("admin", stored.apikey) },
    });
    assert.equal(revoked.status, 401);
    const after = await berth(["whoami"], { env: { BERTH_CONFIG: config, BERTH_URL: server.url } });
    assert.equal(after.code, 1);
    assert.match(after.stderr, /not signed in/);
  });

  test("login --apikey checks the key before storing it", async () => {
    const config = path.join(server.configDir, "k.json");
    const bad = await berth(["login", "--url", server.url, "-u", "admin", "--apikey", "nope"], {
      env: { BERTH_CONFIG: config },
    });
    assert.equal(bad.code, 1);
    assert.equal(fs.existsSync(config), false);
    const good = await berth(["login", "--url", server.url, "-u", "admin", "--apikey", ADMIN.key, "--json"], {
      env: { BERTH_CONFIG: config },
    });
    assert.equal(good.code, 0, good.stderr);
    assert.equal(JSON.parse(good.stdout).username, "admin");
  });
});

describe("services and containers", () => {
  test("service run --sync streams the action's log, then ls shows it Running (table, --json, -q)", async () => {
    const run = await ok([
      "service",
      "run",
      "busybox:local",
      "--name",
      "hello",
      "-t",
      "2",
      "-r",
      "sh -c 'echo hello from $HOSTNAME; echo oops >&2; sleep 100000'",
      "-e",
      "GREETING=hi",
      "-p",
      "80",
      "--sync",
    ]);
    assert.match(run.stdout, /^[0-9a-f-]{36}\n$/);
    assert.match(run.stderr, /^Service Start [0-9a-f-]{36} (Pending|In progress|Success)\n/);
    assert.match(run.stderr, /Started hello-1/);
    assert.match(run.stderr, /Service Start Success in /);

    const ls = await ok(["service", "ls"]);
    assert.match(ls.stdout.split("\n")[0]!, /^NAME\s+UUID\s+STATUS\s+#CONTAINERS\s+IMAGE\s+DEPLOYED/);
    const hello = rows(ls.stdout).find((r) => r[0] === "hello");
    assert.ok(hello, ls.stdout);
    assert.deepEqual(hello.slice(1, 5), [run.stdout.slice(0, 8), "Running", "2", "busybox:local"]);
    assert.ok(!ls.stdout.includes("\u001b["), "no colours when piped");

    const json = JSON.parse((await ok(["service", "ls", "--json"])).stdout);
    assert.equal(json.objects.find((s: { name: string }) => s.name === "hello").uuid, run.stdout.trim());
    const quiet = await ok(["service", "ps", "-q", "--status", "Running"]);
    assert.ok(quiet.stdout.split("\n").includes(run.stdout.trim()));
    assert.ok(
      quiet.stdout
        .trim()
        .split("\n")
        .every((l) => UUID.test(l)),
      quiet.stdout,
    );

    // By uuid prefix, and with a namespace given explicitly.
    const inspected = JSON.parse(
      (await ok(["service", "inspect", run.stdout.slice(0, 6), "--namespace", "admin"])).stdout,
    );
    assert.equal(inspected.name, "hello");
    assert.deepEqual(inspected.container_envvars, [{ key: "GREETING", value: "hi" }]);
    assert.deepEqual(
      [inspected.container_ports[0].inner_port, inspected.container_ports[0].published],
      [80, true],
    );

    const containers = await ok(["container", "ps", "--service", "hello"]);
    assert.deepEqual(
      rows(containers.stdout)
        .map((r) => [r[0], r[2]])
        .sort(),
      [
        ["hello-1", "Running"],
        ["hello-2", "Running"],
      ],
    );
  });

  test("service logs prefix each line with its container; container logs are the container's own", async () => {
    const logs = await ok(["service", "logs", "hello"]);
    const lines = logs.stdout.trimEnd().split("\n").sort();
    assert.deepEqual(lines, ["hello-1 | hello from hello-1", "hello-2 | hello from hello-2"]);
    assert.match(logs.stderr, /hello-1 \| oops/);
    const one = await ok(["container", "logs", "hello-2", "--tail", "5"]);
    assert.equal(one.stdout, "hello from hello-2\n");
  });

  test("container exec through pipes: stdin reaches the command and its exit code is berth's", async () => {
    const piped = await berth(["container", "exec", "hello-1"], {
      env,
      input: "echo in $HOSTNAME; exit 3\n",
    });
    assert.equal(piped.code, 3, piped.stderr);
    assert.equal(piped.stdout, "in hello-1\n");
    const args = await berth(["container", "exec", "hello-1", "echo", "a", "b"], { env });
    assert.equal(args.code, 0, args.stderr);
    assert.equal(args.stdout, "a b\n");
  });

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

  test("--sync exits 1 when the action fails, after printing its log", async () => {
    const r = await berth(["service", "run", "nosuch/image:1", "--name", "broken", "--sync"], { env });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /could not pull nosuch\/image:1/);
    assert.match(r.stderr, /Service Start Failed/);
    assert.match(r.stderr, /berth: action Service Start [0-9a-f-]{36} ended Failed\n$/);
  });

  test("container stop/start/redeploy/terminate by name; service terminate", async () => {
    await ok(["container", "stop", "hello-3", "--sync"]);
    assert.match((await ok(["container", "ps", "-s", "Stopped"])).stdout, /\nhello-3 /);
    await ok(["container", "start", "hello-3", "--sync"]);
    await ok(["container", "redeploy", "hello-3", "--sync"]);
    await ok(["container", "terminate", "hello-3", "--sync"]);
    assert.doesNotMatch((await ok(["container", "ps"])).stdout, /\nhello-3 /);
    const term = await ok(["service", "terminate", "hello", "broken", "--sync"]);
    assert.equal(term.stdout.trim().split("\n").length, 2);
    assert.doesNotMatch((await ok(["service", "ls"])).stdout, /\nhello /);
  });
});

describe("stacks from stack files", () => {
  const dir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "berth-cli-")), "My_Shop");
  fs.mkdirSync(dir);
  const name = "my-shop";
  const YAML_FILE = [
    "# a stack file in YAML",
    "db:",
    "  image: busybox:local",
    "  command: sh -c 'echo db up; sleep 100000'",
    "  expose:",
    '    - "5432"',
    "web:",
    "  image: busybox:local",
    "  command: sh -c 'echo web up; sleep 100000'",
    "  links:",
    "    - db:database",
    "  ports:",
    '    - "80"',
    "",
  ].join("\n");

  test("berth up reads berth.yml of the current folder, names the stack after the folder (as a DNS label), starts it", async () => {
    fs.writeFileSync(path.join(dir, "berth.yml"), YAML_FILE);
    const up = await ok(["up", "--sync"], { cwd: dir });
    assert.match(up.stdout, /^[0-9a-f-]{36}\n$/);
    assert.match(up.stderr, /Stack Start Success/);
    const ls = await ok(["stack", "ls"]);
    const row = rows(ls.stdout).find((r) => r[0] === name);
    assert.ok(row, ls.stdout);
    assert.deepEqual(row.slice(2, 4), ["Running", "2"]);
    const svc = await ok(["service", "ls", "--stack", name]);
    assert.deepEqual(
      rows(svc.stdout)
        .map((r) => r[0])
        .sort(),
      ["db", "web"],
    );
  });

  test("stack export prints YAML that stack update takes back unchanged; --json gives JSON", async () => {
    const exported = await ok(["stack", "export", name]);
    assert.match(exported.stdout, /^db:\n {2}image: busybox:local\n/);
    const file = path.join(dir, "exported.yml");
    fs.writeFileSync(file, exported.stdout);
    await ok(["stack", "update", name, "-f", file, "--sync"]);
    assert.equal((await ok(["stack", "export", name])).stdout, exported.stdout);
    const json = JSON.parse((await ok(["stack", "export", name, "--json"])).stdout);
    assert.deepEqual(json.web.links, ["db:database"]);
  });

  test("stack create -f - reads standard input (JSON too); stack start/stop/redeploy/terminate", async () => {
    const created = await ok(["stack", "create", "-f", "-", "-n", "piped"], {
      input: JSON.stringify({ api: { image: "busybox:local", command: "sleep 100000" } }),
    });
    const uuid = created.stdout.trim();
    assert.match(uuid, UUID);
    assert.equal(JSON.parse((await ok(["stack", "inspect", "piped"])).stdout).state, "Not Running");
    await ok(["stack", "start", "piped", "--sync"]);
    await ok(["stack", "stop", uuid.slice(0, 8), "--sync"]);
    assert.equal(JSON.parse((await ok(["stack", "inspect", "piped"])).stdout).state, "Stopped");
    await ok(["stack", "redeploy", "piped", "--not-reuse-volumes", "--sync"]);
    await ok(["stack", "terminate", "piped", "--sync"]);
    assert.doesNotMatch((await ok(["stack", "ls"])).stdout, /\npiped /);
  });

  test("a refused stack file names the file and line of each problem; a YAML error its line and column", async () => {
    const bad = path.join(dir, "bad.yml");
    fs.writeFileSync(
      bad,
      [
        "web:",
        "  image: busybox:local",
        "  ports:",
        '    - "80"',
        '    - "notaport"',
        "  mem_limit: lots",
        "",
      ].join("\n"),
    );
    const r = await berth(["stack", "create", "-f", "bad.yml"], { env, cwd: dir });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /\nbad\.yml:5: services\.web\.ports\[1\]: must be a port/);
    assert.match(r.stderr, /\nbad\.yml:6: services\.web\.mem_limit: /);
    const syntax = await berth(["stack", "up", "-f", "-"], { env, input: "web:\n  image: [\n" });
    assert.equal(syntax.code, 1);
    assert.match(syntax.stderr, /^berth: <stdin>:3:1: /);
    const none = await berth(["up"], { env, cwd: os.tmpdir() });
    assert.equal(none.code, 2);
    assert.match(none.stderr, /no stack file: give -f <file>, or put one of berth\.yml/);
  });
});

describe("errors and exit codes", () => {
  test("an unknown command or option is a usage error (2); an unknown object is 1, naming it", async () => {
    const cmd = await berth(["frobnicate"], { env });
    assert.equal(cmd.code, 2);
    assert.match(cmd.stderr, /unknown command 'frobnicate'/);
    const opt = await berth(["service", "ls", "--frob"], { env });
    assert.equal(opt.code, 2);
    assert.match(opt.stderr, /unknown option '--frob'/);
    const missing = await berth(["service", "start", "nosuch"], { env });
    assert.equal(missing.code, 1);
    assert.equal(missing.stderr, "berth: service nosuch not found\n");
    const scale = await berth(["service", "scale", "x", "many"], { env });
    assert.equal(scale.code, 2);
  });

  test("a refused operation prints the server's sentence; the server unreachable says so", async () => {
    await ok(["service", "create", "busybox:local", "--name", "idle"]);
    const stop = await berth(["service", "stop", "idle"], { env });
    assert.equal(stop.code, 1);
    assert.match(stop.stderr, /^berth: service idle is Not running; stop is allowed in /);
    const down = await berth(["service", "ls"], { env: { ...env, BERTH_URL: "http://127.0.0.1:9" } });
    assert.equal(down.code, 1);
    assert.match(down.stderr, /cannot reach http:\/\/127\.0\.0\.1:9/);
  });
});
