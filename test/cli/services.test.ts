// `berth service` and `berth container` against a live server process with simulated nodes:
// run --sync, ls in every output mode, logs, exec through pipes, a failing --sync.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { berth, liveServer, rows, UUID } from "./support.ts";

const { live, ok } = liveServer({ cluster: { name: "pool", nodes: 2 } });

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
      env: live.env,
      input: "echo in $HOSTNAME; exit 3\n",
    });
    assert.equal(piped.code, 3, piped.stderr);
    assert.equal(piped.stdout, "in hello-1\n");
    const args = await berth(["container", "exec", "hello-1", "echo", "a", "b"], { env: live.env });
    assert.equal(args.code, 0, args.stderr);
    assert.equal(args.stdout, "a b\n");
  });

  test("container exec passes every word after the container's name to the command, options included", async () => {
    // Issue 27: `sh -c '…'` failed with "unknown option '-c'" unless written after `--`.
    const sum = await berth(["container", "exec", "hello-1", "sh", "-c", "echo $((1+1))"], { env: live.env });
    assert.equal(sum.code, 0, sum.stderr);
    assert.equal(sum.stdout, "2\n");
    // Words berth itself would read as its options reach the command untouched.
    const own = await berth(["container", "exec", "hello-1", "echo", "--json", "--help", "--version", "-t"], {
      env: live.env,
    });
    assert.equal(own.code, 0, own.stderr);
    assert.equal(own.stdout, "--json --help --version -t\n");
    // Exec's own options and berth's global ones go before the name; `--` still works.
    const before = await berth(
      ["--namespace", "admin", "container", "exec", "-T", "hello-2", "sh", "-c", "echo $((6*7)) $HOSTNAME"],
      { env: live.env },
    );
    assert.equal(before.code, 0, before.stderr);
    assert.equal(before.stdout, "42 hello-2\n");
    const dashes = await berth(["container", "exec", "hello-1", "--", "sh", "-c", "exit 4"], {
      env: live.env,
    });
    assert.equal(dashes.code, 4, dashes.stderr);
    // One word is a shell command line, as before.
    const line = await berth(["container", "exec", "hello-1", "echo a; echo b"], { env: live.env });
    assert.equal(line.stdout, "a\nb\n");
  });

  test("an option's value that starts with a dash is the option's, not berth's (-r --version)", async () => {
    const created = await ok([
      "service",
      "create",
      "busybox:local",
      "--name",
      "flags",
      "-r",
      "--version",
      "--json",
    ]);
    assert.equal(JSON.parse(created.stdout).run_command, "--version");
    const set = await ok([
      "service",
      "set",
      "flags",
      "--entrypoint",
      "--help",
      "-r",
      "-c 'echo x'",
      "--json",
    ]);
    assert.deepEqual(
      [JSON.parse(set.stdout).entrypoint, JSON.parse(set.stdout).run_command],
      ["--help", "-c 'echo x'"],
    );
  });

  test("--stop-signal and --stop-grace-period (seconds or a duration) set how containers are stopped", async () => {
    const created = await ok([
      "service",
      "create",
      "busybox:local",
      "--name",
      "graceful",
      "--stop-signal",
      "QUIT",
      "--stop-grace-period",
      "1m30s",
      "--json",
    ]);
    const body = JSON.parse(created.stdout);
    assert.deepEqual([body.stop_signal, body.stop_grace_period], ["SIGQUIT", 90]);
    const set = await ok(["service", "set", "graceful", "--stop-grace-period", "5", "--json"]);
    assert.equal(JSON.parse(set.stdout).stop_grace_period, 5);
    const bad = await berth(["service", "set", "graceful", "--stop-grace-period", "soon"], { env: live.env });
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /must be a duration such as "10s"/);
  });

  test("--sync exits 1 when the action fails, after printing its log", async () => {
    const r = await berth(["service", "run", "nosuch/image:1", "--name", "broken", "--sync"], {
      env: live.env,
    });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /could not pull nosuch\/image:1/);
    assert.match(r.stderr, /Service Start Failed/);
    assert.match(r.stderr, /berth: action Service Start [0-9a-f-]{36} ended Failed\n$/);
  });
});
