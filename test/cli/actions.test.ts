// `berth action` (filters, logs, cancel, retry, --sync, Ctrl-C with and without a terminal) and
// `berth event` against a live server process.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { waitFor } from "../support/harness.ts";
import {
  actionState as actionStateOf,
  api,
  BIN,
  berth,
  cleanEnv,
  okWith,
  rows,
  Server,
  simulatedCluster,
  spawnBerth,
  UUID,
  widget as widgetOf,
} from "./support.ts";

let server: Server;
let env: Record<string, string>;
const ok = okWith(() => env);
const widget = (body: { steps: number; stepMs: number; failAt?: number }, id?: string) =>
  widgetOf(server, body, id);
const actionState = (uuid: string) => actionStateOf(server, uuid);

before(async () => {
  server = await Server.start();
  env = server.adminEnv();
  await simulatedCluster(server, "pool", 2);
  await ok(["service", "create", "busybox:local", "--name", "web", "-r", "sleep 100000"]);
});

after(async () => {
  await server.stop();
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

    // Measured by the CLI, not from the action's whole-second dates (which could say 0.0s): three
    // steps of 300 ms take at least 0.6 s before the third breaks.
    const slowFail = await widget({ steps: 3, stepMs: 300, failAt: 3 });
    await waitFor("the widget to fail", async () => (await actionState(slowFail)) === "Failed");
    const again = await berth(["action", "retry", slowFail, "--sync"], { env });
    const took = /Widget Work Failed in (\d+\.\d)s/.exec(again.stderr)?.[1];
    assert.ok(took && Number(took) >= 0.6, again.stderr);

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
    // Its own widget, canceled at once: its retry runs 30 one-second steps, so it is still running
    // when the answer arrives however loaded the machine is.
    const canceled = await widget({ steps: 30, stepMs: 1000 }, "w2");
    assert.equal((await api(server, "POST", `/api/audit/v1/action/${canceled}/cancel/`)).status, 200);
    await waitFor("the widget to be canceled", async () => (await actionState(canceled)) === "Canceled");
    // `script` gives berth a pseudo-terminal; typing Ctrl-C there sends it SIGINT. `exec` leaves no
    // shell in the terminal's foreground group: script runs its command with $SHELL, and dash (the
    // /bin/sh used where SHELL is unset, as in CI) would die of that SIGINT itself and exit 130.
    const shell = spawn(
      "script",
      ["-qfec", `exec ${process.execPath} ${BIN} action retry ${canceled} --sync`, "/dev/null"],
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
    // The spinner redraws its line with \r, so a line of the output is anything but a newline.
    assert.match(output, /Widget Work[^\n]*Canceled/, output);
    assert.match(output, /ended Canceled/, output);
    const retried = /action Widget Work ([0-9a-f-]{36}) ended Canceled/.exec(output)?.[1];
    assert.ok(retried && retried !== canceled, output);
    assert.equal(await actionState(retried), "Canceled");
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
