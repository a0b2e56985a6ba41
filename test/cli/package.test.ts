// `npm pack` of packages/cli gives a package whose `berth` works with Node alone: installed from the
// tarball (offline, into a fresh prefix), run with nothing on PATH but node, outside the checkout.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { installPackage, ROOT } from "./support.ts";

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-pack-"));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Runs the installed `berth` with a bare environment: no PATH but node's folder, no NODE_PATH. */
function installed(bin: string, args: string[], input?: string, env: Record<string, string> = {}) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    const child = execFile(
      bin,
      args,
      { cwd: dir, env: { PATH: path.dirname(process.execPath), HOME: dir, ...env } },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code) || 1 : 0, stdout, stderr }),
    );
    child.stdin?.end(input ?? "");
  });
}

test("npm pack bundles the CLI into one file (and its agent and admin parts); installed offline, berth runs on Node alone", {
  timeout: 180_000,
}, async () => {
  const { files, prefix, bin } = await installPackage(dir);
  assert.deepEqual(files, ["README.md", "admin.mjs", "agent.mjs", "berth.mjs", "package.json"]);
  const installedFile = (name: string) =>
    fs.readFileSync(path.join(prefix, "lib", "node_modules", "berth-cli", name), "utf8");
  const bundle = installedFile("berth.mjs");
  for (const server of ["fastify", "kysely", "dockerode", "better-sqlite3", "pg"])
    assert.ok(!bundle.includes(`node_modules/${server}/`), `the CLI bundle holds no ${server}`);
  // The parts hold what their commands need, and no server: the agent its Docker client (Berth's
  // own bounded requests, no dockerode), admin the store (the drivers stay outside: better-sqlite3
  // is native).
  const agentPart = installedFile("agent.mjs");
  assert.ok(agentPart.includes("src/drivers/docker/request.ts"), "the agent holds the engine client");
  assert.ok(
    !agentPart.includes("node_modules/dockerode/"),
    "the agent's engine calls are bounded, not dockerode's",
  );
  const adminPart = installedFile("admin.mjs");
  for (const part of [agentPart, adminPart])
    assert.ok(!part.includes("node_modules/fastify/"), "no part holds the server");
  assert.ok(!adminPart.includes("node_modules/dockerode/"));
  for (const driver of ["better-sqlite3", "pg"])
    assert.ok(!adminPart.includes(`node_modules/${driver}/`), `admin.mjs leaves ${driver} outside`);
  assert.ok(fs.existsSync(bin));
  assert.equal(
    fs.readdirSync(path.join(prefix, "lib", "node_modules")).join(),
    "berth-cli",
    "no dependencies installed",
  );

  const version = await installed(bin, ["--version"]);
  assert.equal(version.code, 0, version.stderr);
  assert.equal(
    version.stdout,
    `${JSON.parse(fs.readFileSync(path.join(ROOT, "packages/cli/package.json"), "utf8")).version}\n`,
  );
  // The YAML parser, commander and the HTTP client are inside the bundle.
  const yaml = await installed(bin, ["stack", "create", "-f", "-"], "web:\n  image: [\n");
  assert.equal(yaml.code, 1);
  assert.match(yaml.stderr, /^berth: <stdin>:3:1: /);
  const down = await installed(bin, ["service", "ls"], "", { BERTH_URL: "http://127.0.0.1:9" });
  assert.equal(down.code, 1);
  assert.match(down.stderr, /cannot reach http:\/\/127\.0\.0\.1:9/);
  const completion = await installed(bin, ["completion", "bash"]);
  assert.match(completion.stdout, /complete -o default -F _berth berth/);

  // berth agent runs the agent on Node alone: its usage, then a clear refusal with no engine here.
  const agentHelp = await installed(bin, ["agent", "--help"]);
  assert.equal(agentHelp.code, 0, agentHelp.stderr);
  assert.match(agentHelp.stdout, /^usage: berth agent --url <Berth URL> \[--token <token>\]/);
  const noEngine = await installed(bin, [
    "agent",
    "--url",
    "http://127.0.0.1:9",
    "--token",
    "t",
    "--state-dir",
    path.join(dir, "agent-state"),
    "--docker-socket",
    path.join(dir, "no-engine.sock"),
  ]);
  assert.equal(noEngine.code, 1);
  assert.match(noEngine.stderr, /^berth agent: no Docker engine answers on \S+no-engine\.sock/);
  // berth admin without the database drivers: says which to install; nothing else is affected.
  const admin = await installed(bin, ["admin", "backup", path.join(dir, "x.bak"), "--data-dir", dir]);
  assert.equal(admin.code, 1);
  assert.match(
    admin.stderr,
    /^berth: berth admin needs the database driver better-sqlite3, which is not installed here: install it beside berth \(npm install -g better-sqlite3 pg\)/,
  );
  assert.ok(!fs.existsSync(path.join(dir, "x.bak")));
});
