// The `berth` binary on real engines: the README's quick start, run command by command against a
// live server with `local` nodes; `logs -f` receiving lines printed after it started; exec through
// pipes and on a terminal (`script` gives it a pseudo-terminal: raw mode, size, exit code); --sync
// streaming a failing action and exiting 1; stack up from a YAML file.
//
// Needs root, dockerd, iproute2, iptables and busybox-static, like every file of this tier;
// skipped without them locally, failing under CI=true.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { BIN, berth, cleanEnv, ROOT, spawnBerth } from "../cli/support.ts";
import { call, type Harness, startHarness, waitFor } from "../support/harness.ts";
import { localNodesUnavailable, tearDownLocalLab } from "../support/local-lab.ts";

// A lab range and bridge of this file's own (see streams-local.test.ts for the others).
const LAB_RANGE = "10.218.0.0/16";
const BRIDGE = "berth-c0";

const unavailable = await localNodesUnavailable({ labRange: LAB_RANGE, bridgeName: BRIDGE });

/** The quick start of README.md: its `berth …` commands (comments dropped) and its berth.yml. */
export function quickStart(readme: string): { commands: string[][]; stackFile: string } {
  const section = readme.slice(readme.indexOf("## Quick start with the command line"));
  const sh = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? "";
  const yaml = /```yaml\n([\s\S]*?)```/.exec(section)?.[1] ?? "";
  const commands = sh
    .split("\n")
    .map((line) => line.replace(/\s{2,}#.*$/, "").trim())
    .filter((line) => line.startsWith("berth "))
    .map(shellWords);
  return { commands, stackFile: yaml };
}

/** Splits a command line as sh would for plain words and '…' / "…" quotes. */
function shellWords(line: string): string[] {
  const words: string[] = [];
  for (const m of line.matchAll(/'([^']*)'|"((?:\\.|[^"\\])*)"|(\S+)/g)) {
    if (m[1] !== undefined) words.push(m[1]);
    else if (m[2] !== undefined) words.push(m[2].replace(/\\(.)/g, "$1"));
    else words.push(m[3]!);
  }
  // `--name 'a b'`-style quotes glued to a word (-r "sh -c '…'") are not used in the README.
  return words;
}

describe("the berth CLI on real engines", { skip: unavailable ?? false }, () => {
  let h: Harness;
  let url: string;
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), "berth-quickstart-"));
  const env = () => ({ BERTH_CONFIG: path.join(cwd, "config.json") });

  before(async () => {
    h = await startHarness({
      env: {
        BERTH_LOCAL_LAB_RANGE: LAB_RANGE,
        BERTH_LOCAL_BRIDGE: BRIDGE,
        BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
        BERTH_RECONCILE_INTERVAL_MS: "300",
      },
    });
    await h.app.listen({ port: 0, host: "127.0.0.1" });
    const address = h.app.server.address();
    assert.ok(address && typeof address === "object");
    url = `http://127.0.0.1:${address.port}`;
  });

  after(async () => {
    const nodes = h ? await call(h, h.admin, "GET", "/api/infra/v1/node/?limit=100") : undefined;
    const nodeUuids = ((nodes?.body?.objects ?? []) as { uuid: string }[]).map((n) => n.uuid);
    await tearDownLocalLab(h, { nodeUuids });
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  test("every command of the README's quick start succeeds", { timeout: 240_000 }, async (t) => {
    const { commands, stackFile } = quickStart(fs.readFileSync(path.join(ROOT, "README.md"), "utf8"));
    assert.ok(commands.length >= 8, `the quick start has its commands: ${JSON.stringify(commands)}`);
    assert.ok(stackFile.includes("web:"), "and its berth.yml");
    fs.writeFileSync(path.join(cwd, "berth.yml"), stackFile);
    const outputs = new Map<string, string>();
    for (const words of commands) {
      const args = words.slice(1).map((w) => w.replace("http://127.0.0.1:8000", url));
      const started = Date.now();
      // login reads the password from standard input when it is not a terminal.
      const run = () => berth(args, { env: env(), cwd, input: `${h.admin.password}\n`, timeoutMs: 180_000 });
      let r = await run();
      // The clock prints a line a second: `--tail 3` right after it started may find two so far.
      for (let i = 0; args[0] === "service" && args[1] === "logs" && r.code === 0 && i < 10; i++) {
        if (r.stdout.trimEnd().split("\n").length >= 3) break;
        await new Promise((resolve) => setTimeout(resolve, 500));
        r = await run();
      }
      t.diagnostic(`berth ${args.join(" ")}: exit ${r.code} in ${Date.now() - started} ms`);
      assert.equal(r.code, 0, `berth ${args.join(" ")}\n${r.stderr}${r.stdout}`);
      outputs.set(`${args[0]} ${args[1]}`, r.stdout);
    }
    assert.match(outputs.get("service ls") ?? "", /\nclock\s+[0-9a-f]{8}\s+Running\s+1\s+busybox:local/);
    const logLines = (outputs.get("service logs") ?? "").trimEnd().split("\n");
    assert.equal(logLines.length, 3, outputs.get("service logs"));
    assert.ok(logLines.every((l) => l.startsWith("clock-1 | ")));
    assert.match(outputs.get("container exec") ?? "", /<html>/);
    const stacks = await berth(["stack", "ls", "--json"], { env: env() });
    const stack = JSON.parse(stacks.stdout).objects[0];
    assert.equal(
      stack.name,
      path
        .basename(cwd)
        .toLowerCase()
        .replace(/[^a-z0-9-]+/g, "-")
        .replace(/^-+|-+$/g, "")
        .slice(0, 63)
        .replace(/-+$/, ""),
    );
    assert.equal(stack.state, "Running");
    assert.equal(stack.services.length, 2);
  });

  test("logs -f prints lines written after it started, for a container and a service", {
    timeout: 60_000,
  }, async () => {
    for (const args of [
      ["container", "logs", "-f", "--tail", "0", "clock-1"],
      ["service", "logs", "-f", "--tail", "0", "clock"],
    ]) {
      const run = spawnBerth(args, { env: env() });
      // `date` prints once a second: with no tail, every line that arrives was written after the start.
      await waitFor(
        `two new lines from berth ${args.join(" ")}`,
        async () => run.out.stdout.split("\n").length > 2,
        20_000,
        100,
      );
      run.child.kill("SIGTERM");
      await run.exited;
      assert.ok(
        run.out.stdout.split("\n").every((l) => l === "" || /\d\d:\d\d:\d\d/.test(l)),
        run.out.stdout,
      );
    }
  });

  test("exec through pipes: stdin to the command, stdout and stderr apart, its exit code is berth's", {
    timeout: 60_000,
  }, async () => {
    const r = await berth(["container", "exec", "clock-1"], {
      env: env(),
      input: "echo $((6 * 7)); echo oops >&2; exit 3\n",
    });
    assert.equal(r.code, 3, r.stderr);
    assert.equal(r.stdout, "42\n");
    assert.equal(r.stderr, "oops\n");
  });

  test("exec on a terminal: a real TTY of the client's size, raw keys, the exit code passed on", {
    timeout: 60_000,
  }, async () => {
    const command = `stty rows 33 cols 101; ${process.execPath} ${BIN} container exec clock-1`;
    const shell = spawn("script", ["-qfec", command, "/dev/null"], {
      env: cleanEnv({ ...env(), TERM: "xterm" }),
      stdio: ["pipe", "pipe", "pipe"],
    });
    let output = "";
    shell.stdout.on("data", (d) => {
      output += d;
      // BusyBox's line editor asks where the cursor is (ESC [6n) after its prompt; answer as a
      // terminal would, or it waits and redraws the prompt.
      if (String(d).includes("\x1b[6n")) shell.stdin.write("\x1b[12;13R");
    });
    const exited = new Promise<number>((resolve) => shell.on("close", (code) => resolve(code ?? 1)));
    await waitFor(
      "the shell's prompt",
      // The prompt, maybe followed by terminal control sequences (ESC [ … letter).
      // biome-ignore lint/suspicious/noControlCharactersInRegex: ESC is what the terminal sends.
      async () => /# (\x1b\[[\d;]*[A-Za-z])*$/.test(output),
      30_000,
      100,
    ).catch((error: Error) => {
      throw new Error(`${error.message}; the terminal showed ${JSON.stringify(output)}`);
    });
    shell.stdin.write("tty; stty size; exit 4\r");
    assert.equal(await exited, 4, output);
    assert.match(output, /\/dev\/pts\/\d+/);
    assert.match(output, /33 101/);
  });

  test("--sync streams a failing action's log and exits 1", { timeout: 60_000 }, async () => {
    const r = await berth(
      ["service", "run", "busybox:local", "--name", "broken", "-r", "/no/such/program", "--sync"],
      {
        env: env(),
      },
    );
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /no\/such\/program/);
    assert.match(r.stderr, /Service Start Failed/);
    assert.match(r.stderr, /berth: action Service Start [0-9a-f-]{36} ended Failed\n$/);
  });
});
