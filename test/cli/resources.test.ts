// The rest of the `berth` command line against a live server process: node clusters and the
// catalogue, nodes, tags, triggers, actions (filters, logs, cancel, retry, Ctrl-C), the events
// stream, repositories and registries, API keys, organizations and namespaces, colours, completion.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { type FakeRegistry, startFakeRegistry } from "../registries/support.ts";
import { basic, waitFor } from "../support/harness.ts";
import { ADMIN, BIN, berth, cleanEnv, rows, Server, spawnBerth } from "./support.ts";

let server: Server;
let env: Record<string, string>;
let registry: FakeRegistry;
const ESC = "\u001b";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

async function ok(args: string[], opts: Parameters<typeof berth>[1] = {}) {
  const r = await berth(args, { env, ...opts });
  assert.equal(r.code, 0, `berth ${args.join(" ")}: exit ${r.code}\n${r.stderr}${r.stdout}`);
  return r;
}

/** Starts the test-only widget operation (an action of `steps` steps); resolves with its uuid. */
async function widget(body: { steps: number; stepMs: number; failAt?: number }): Promise<string> {
  const res = await fetch(`${server.url}/api/app/v1/widget/w1/work/`, {
    method: "POST",
    headers: { authorization: basic(ADMIN.username, ADMIN.key), "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 202);
  return ((await res.json()) as { action: string }).action;
}

async function actionState(uuid: string): Promise<string> {
  const res = await fetch(`${server.url}/api/audit/v1/action/${uuid}/`, {
    headers: { authorization: basic(ADMIN.username, ADMIN.key) },
  });
  return ((await res.json()) as { state: string }).state;
}

before(async () => {
  registry = await startFakeRegistry({ auth: "basic", username: "robot", password: "s3cret" });
  server = await Server.start({ BERTH_REGISTRY_ALLOW: "127.0.0.1", BERTH_REGISTRY_TIMEOUT_MS: "3000" });
  env = server.adminEnv();
});

after(async () => {
  await server.stop();
  await registry.close();
});

describe("node clusters, the catalogue and nodes", () => {
  test("provider, region and nodetype list the catalogue; -q gives names", async () => {
    const providers = await ok(["nodecluster", "provider", "-q"]);
    assert.ok(providers.stdout.split("\n").includes("aws"), providers.stdout);
    const regions = await ok(["nodecluster", "region", "-p", "aws"]);
    assert.match(regions.stdout, /^NAME\s+LABEL\s+PROVIDER\s+AVAILABLE\n/);
    assert.ok(rows(regions.stdout).every((r) => r[2] === "aws"));
    const types = await ok(["nodecluster", "nodetype", "-p", "aws", "-r", "us-east-1", "--json"]);
    assert.ok(JSON.parse(types.stdout).objects.some((t: { name: string }) => t.name === "t2.micro"));
  });

  test("nodecluster create deploys with --sync; ls, scale, node ls/inspect/upgrade/rm, nodecluster rm", async () => {
    const created = await ok([
      "nodecluster",
      "create",
      "pool",
      "aws",
      "us-east-1",
      "t2.micro",
      "-t",
      "2",
      "--sync",
    ]);
    assert.match(created.stdout, /^[0-9a-f-]{36}\n$/);
    assert.match(created.stderr, /Node Cluster Deploy Success/);
    const ls = await ok(["nodecluster", "ls"]);
    const row = rows(ls.stdout).find((r) => r[0] === "pool");
    assert.deepEqual(row?.slice(2, 4), ["us-east-1", "t2.micro"]);
    assert.deepEqual(row?.slice(5), ["Deployed", "2", "2"]);

    await ok(["nodecluster", "scale", "pool", "3", "--sync"]);
    const nodes = await ok(["node", "ls", "--cluster", "pool"]);
    assert.equal(rows(nodes.stdout).length, 3);
    assert.ok(
      rows(nodes.stdout).every((r) => r[3] === "Deployed" && r[4] === "pool"),
      nodes.stdout,
    );
    const ids = (await ok(["node", "ls", "-q"])).stdout.trim().split("\n");
    assert.ok(ids.every((id) => UUID.test(id)));
    const node = JSON.parse((await ok(["node", "inspect", ids[0]!.slice(0, 8)])).stdout);
    assert.equal(node.uuid, ids[0]);
    // By its FQDN too.
    assert.equal(JSON.parse((await ok(["node", "inspect", node.external_fqdn])).stdout).uuid, ids[0]);
    const upgrade = await ok(["node", "upgrade", ids[0]!, "--sync"]);
    assert.match(upgrade.stderr, /Node Engine Upgrade Success/);
    const refused = await berth(["node", "health-check", ids[0]!], { env });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /health-check is allowed in Unreachable/);
    await ok(["node", "rm", ids[0]!, "--sync"]);
    assert.equal(rows((await ok(["node", "ls"])).stdout).length, 2);
    await ok(["nodecluster", "create", "spare", "aws", "us-east-1", "t2.micro", "--no-deploy"]);
    await ok(["nodecluster", "rm", "spare", "--sync"]);
    assert.doesNotMatch((await ok(["nodecluster", "ls"])).stdout, /\nspare /);
  });
});

describe("tags and triggers", () => {
  test("tag add/rm/set/ls on a service and a node cluster", async () => {
    await ok(["service", "create", "busybox:local", "--name", "web", "-r", "sleep 100000"]);
    await ok(["tag", "add", "-t", "blue", "-t", "green", "web", "pool"]);
    await ok(["tag", "rm", "-t", "green", "web"]);
    const ls = await ok(["tag", "ls", "web", "pool"]);
    assert.deepEqual(rows(ls.stdout), [
      ["web", "service", "blue"],
      ["pool", "node cluster", "blue green"],
    ]);
    // The cluster's tags are its nodes' tags: a service tagged red deploys on them.
    await ok(["tag", "set", "-t", "red", "pool", "web"]);
    assert.deepEqual(
      JSON.parse((await ok(["tag", "ls", "pool", "web", "--json"])).stdout).map(
        (t: { tags: string[] }) => t.tags,
      ),
      [["red"], ["red"]],
    );
    const none = await berth(["tag", "add", "-t", "x", "nosuch"], { env });
    assert.equal(none.code, 1);
    assert.match(none.stderr, /no service, node cluster or node is called nosuch/);
  });

  test("trigger create prints a URL that redeploys; ls and rm by name", async () => {
    const url = (await ok(["trigger", "create", "web", "-n", "deploy-hook"])).stdout.trim();
    assert.match(url, /\/trigger\/[0-9a-f-]{36}\/call\/\?token=/);
    const ls = await ok(["trigger", "ls", "web"]);
    assert.deepEqual(rows(ls.stdout)[0]?.slice(1, 3), ["deploy-hook", "REDEPLOY"]);
    await ok(["trigger", "rm", "web", "deploy-hook"]);
    assert.equal(rows((await ok(["trigger", "ls", "web"])).stdout).length, 0);
  });
});

describe("actions and events", () => {
  test("action ls filters by object (with related ones) and state; inspect and logs by uuid prefix", async () => {
    await ok(["service", "start", "web", "--sync"]);
    await ok(["container", "stop", "web-1", "--sync"]);
    await ok(["container", "start", "web-1", "--sync"]);
    const own = await ok(["action", "ls", "-o", "web"]);
    assert.match(own.stdout, /^UUID\s+ACTION\s+OBJECT\s+STATE\s+STARTED\s+DURATION\s+USER\n/);
    const actions = rows(own.stdout).map((r) => r[1]);
    assert.ok(actions.includes("Service Start") && actions.includes("Service Create"), own.stdout);
    assert.ok(!actions.includes("Container Start"));
    // Newest first.
    assert.equal(actions[0], "Service Start");
    const related = await ok(["action", "ls", "-o", "web", "--include-related", "--json"]);
    const objects = JSON.parse(related.stdout).objects.map((a: { object: string }) => a.object);
    assert.ok(
      objects.some((o: string) => o.includes("/container/")),
      "container actions are related",
    );
    const failedOnly = await ok(["action", "ls", "-s", "Failed", "-q"]);
    assert.equal(failedOnly.stdout, "");

    const uuid = (await ok(["action", "ls", "-o", "web", "-n", "1", "-q"])).stdout.trim();
    const inspected = JSON.parse((await ok(["action", "inspect", uuid.slice(0, 8)])).stdout);
    assert.equal(inspected.action, "Service Start");
    const logs = await ok(["action", "logs", uuid.slice(0, 8)]);
    assert.match(logs.stdout, /^Placing 1 container\(s\) of web\n/);
  });

  test("a failing action: --sync-less retry of it with --sync exits 1; logs -f of a running one ends with it", async () => {
    const failing = await widget({ steps: 2, stepMs: 50, failAt: 2 });
    await waitFor("the widget to fail", async () => (await actionState(failing)) === "Failed");
    const retried = await berth(["action", "retry", failing, "--sync"], { env });
    assert.equal(retried.code, 1);
    assert.match(retried.stderr, /step 1 begins\nstep 1 done\nstep 2 begins\n.*widget broke at step 2/s);
    assert.match(retried.stdout.trim(), UUID, "the new action's uuid");

    const running = await widget({ steps: 3, stepMs: 400 });
    const follow = await ok(["action", "logs", "-f", running]);
    assert.equal(
      follow.stdout,
      "step 1 begins\nstep 1 done\nstep 2 begins\nstep 2 done\nstep 3 begins\nstep 3 done\n",
    );
  });

  test("action cancel --sync waits for Canceled; retry --sync of it succeeds", async () => {
    const slow = await widget({ steps: 5, stepMs: 1000 });
    await waitFor("the widget to start", async () => (await actionState(slow)) === "In progress");
    const cancel = await ok(["action", "cancel", slow, "--sync", "--json"]);
    assert.equal(JSON.parse(cancel.stdout).uuid, slow);
    assert.equal(await actionState(slow), "Canceled");
    const retry = await ok(["action", "retry", slow.slice(0, 8), "--sync"]);
    assert.match(retry.stderr, /Widget Work Success/);
  });

  test("Ctrl-C on a synced command without a terminal leaves the action running and says how to cancel it", async () => {
    const failed = await widget({ steps: 1, stepMs: 10, failAt: 1 });
    await waitFor("the widget to fail", async () => (await actionState(failed)) === "Failed");
    // The retry waits Pending behind a slow action on the same object.
    const slow = await widget({ steps: 8, stepMs: 1000 });
    const run = spawnBerth(["action", "retry", failed, "--sync"], { env });
    await waitFor(
      "the retry to print its first line",
      async () => run.out.stderr.includes("Widget Work"),
      30_000,
    );
    run.child.kill("SIGINT");
    assert.equal(await run.exited, 130);
    assert.match(
      run.out.stderr,
      /interrupted: action [0-9a-f-]{36} goes on without waiting \(berth action cancel /,
    );
    assert.match(run.out.stderr, /^Widget Work [0-9a-f-]{36} Pending\n/);
    assert.doesNotMatch(run.out.stderr, /step 1 begins/, "nothing is printed after the interruption");
    assert.equal(await actionState(slow), "In progress", "nothing was canceled");
  });

  test("Ctrl-C on a synced command on a terminal asks, and 'y' cancels the action (exit 1, Canceled)", async () => {
    const failed = await widget({ steps: 5, stepMs: 1000, failAt: 5 });
    await waitFor("the widget to fail", async () => (await actionState(failed)) === "Failed", 30_000);
    // `script` gives berth a pseudo-terminal; typing Ctrl-C there sends it SIGINT.
    const shell = spawn(
      "script",
      ["-qfec", `${process.execPath} ${BIN} action retry ${failed} --sync`, "/dev/null"],
      {
        env: cleanEnv({ ...env, TERM: "xterm" }),
        stdio: ["pipe", "pipe", "pipe"],
      },
    );
    let output = "";
    shell.stdout.on("data", (d) => {
      output += d;
    });
    const exited = new Promise<number>((resolve) => shell.on("close", (code) => resolve(code ?? 1)));
    await waitFor("the spinner", async () => /step 1 begins/.test(output), 30_000);
    shell.stdin.write("\x03");
    await waitFor(
      "the question",
      async () => /Cancel action Widget Work \([0-9a-f]{8}\)\? \[y\/N\]/.test(output),
      10_000,
    );
    shell.stdin.write("y\r");
    assert.equal(await exited, 1, output);
    assert.match(output, /Widget Work .*Canceled/);
    assert.match(output, /ended Canceled/);
  });

  test("event prints one line per event, or JSON lines; --type filters", async () => {
    const lines = spawnBerth(["event", "--type", "service", "-n", "2"], { env });
    const json = spawnBerth(["event", "--type", "service", "--json", "-n", "1"], { env });
    await new Promise((r) => setTimeout(r, 1500));
    await ok(["service", "stop", "web", "--sync"]);
    assert.equal(await lines.exited, 0, lines.out.stderr);
    assert.equal(await json.exited, 0, json.out.stderr);
    const printed = lines.out.stdout.trimEnd().split("\n");
    assert.equal(printed.length, 2);
    assert.match(
      printed[0]!,
      /^\d{4}-\d\d-\d\dT[\d:.]+Z {2}service {2}update {2}Stopping {2}service [0-9a-f]{8}$/,
    );
    const event = JSON.parse(json.out.stdout);
    assert.equal(event.type, "service");
    assert.equal(typeof event.revision, "number");
  });
});

describe("repositories, registries, keys, organizations, namespaces", () => {
  test("repository register checks the credentials with the registry; ls, inspect, update, rm; registry ls", async () => {
    const name = `${registry.host}/team/app`;
    const wrong = await berth(["repository", "register", name, "-u", "robot", "--password-stdin"], {
      env,
      input: "nope\n",
    });
    assert.equal(wrong.code, 1);
    assert.equal(wrong.stdout, "");
    await ok(["repository", "register", name, "-u", "robot", "--password-stdin"], { input: "s3cret\n" });
    const ls = await ok(["repository", "ls"]);
    assert.deepEqual(rows(ls.stdout), [[name, "no", registry.host]]);
    assert.equal(JSON.parse((await ok(["repository", "inspect", name])).stdout).name, name);
    await ok(["repository", "update", name, "-u", "robot", "-p", "s3cret"]);
    const registries = rows((await ok(["registry", "ls"])).stdout);
    assert.ok(
      registries.some((r) => r[1] === registry.host || `${r[1]}:${r[2]}` === registry.host),
      JSON.stringify(registries),
    );
    await ok(["repository", "rm", name]);
    assert.equal((await ok(["repository", "ls", "-q"])).stdout, "");
  });

  test("apikey create/ls/rm; org create, member add, and --namespace acting in the organization", async () => {
    const key = (await ok(["apikey", "create", "--label", "ci"])).stdout.trim();
    assert.match(key, /^\S{20,}$/);
    const keys = await ok(["apikey", "ls"]);
    const ci = rows(keys.stdout).find((r) => r[1] === "ci");
    assert.ok(ci, keys.stdout);
    const asKey = await ok(["whoami"], { env: { ...env, BERTH_APIKEY: key } });
    assert.match(asKey.stdout, /^admin at /);
    await ok(["apikey", "rm", ci[0]!]);
    const revoked = await berth(["whoami"], { env: { ...env, BERTH_APIKEY: key } });
    assert.equal(revoked.code, 1);

    await ok(["org", "create", "acme"]);
    const orgs = await ok(["org", "ls"]);
    assert.deepEqual(rows(orgs.stdout), [
      ["admin", "user"],
      ["acme", "organization"],
    ]);
    await ok(["service", "create", "busybox:local", "--name", "shared", "--namespace", "acme"]);
    assert.match((await ok(["service", "ls", "--namespace", "acme"])).stdout, /\nshared /);
    assert.doesNotMatch((await ok(["service", "ls"])).stdout, /\nshared /);
    const elsewhere = await berth(["service", "inspect", "shared"], { env });
    assert.equal(elsewhere.code, 1);
    assert.match(elsewhere.stderr, /service shared not found/);
    const members = await ok(["org", "inspect", "acme"]);
    assert.deepEqual(rows(members.stdout), [["admin", "owner"]]);
  });
});

describe("output and completion", () => {
  test("colours only on request (FORCE_COLOR) and never with NO_COLOR or --no-color", async () => {
    const forced = await ok(["service", "ls"], { env: { ...env, FORCE_COLOR: "1" } });
    assert.ok(forced.stdout.startsWith(`${ESC}[1mNAME`), JSON.stringify(forced.stdout.slice(0, 40)));
    const none = await ok(["service", "ls"], { env: { ...env, FORCE_COLOR: "1", NO_COLOR: "1" } });
    assert.ok(!none.stdout.includes(ESC));
    const flag = await ok(["service", "ls", "--no-color"], { env: { ...env, FORCE_COLOR: "1" } });
    assert.ok(!flag.stdout.includes(ESC));
  });

  test("bash completion completes nouns, verbs and options from the command tree; zsh loads it", async () => {
    const script = (await ok(["completion", "bash"])).stdout;
    const file = path.join(server.configDir, "berth.bash");
    fs.writeFileSync(file, script);
    const complete = (line: string) => {
      const words = line.split(" ");
      const r = spawnSync(
        "bash",
        [
          "-c",
          `source ${file}; COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${words.length - 1}; _berth; printf '%s\\n' "\${COMPREPLY[@]}"`,
        ],
        { encoding: "utf8" },
      );
      return r.stdout.trim().split("\n").filter(Boolean).sort();
    };
    assert.ok(complete("berth ser").includes("service"));
    assert.deepEqual(complete("berth service env "), [
      "--help",
      "--json",
      "--namespace",
      "--no-color",
      "add",
      "ls",
      "rm",
      "set",
    ]);
    assert.ok(complete("berth --json container ex").includes("exec"));
    assert.ok(complete("berth service redeploy --n").includes("--not-reuse-volumes"));
    const zsh = (await ok(["completion", "zsh"])).stdout;
    assert.match(zsh, /bashcompinit/);
    const bad = await berth(["completion", "fish"], { env });
    assert.equal(bad.code, 2);
  });
});
