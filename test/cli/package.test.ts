// `npm pack` of packages/cli gives a package whose `berth` works with Node alone: installed from the
// tarball (offline, into a fresh prefix), run with nothing on PATH but node, outside the checkout.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { promisify } from "node:util";
import { ROOT } from "./support.ts";

const run = promisify(execFile);
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

test("npm pack bundles the CLI into one file; installed offline, berth runs on Node alone", {
  timeout: 180_000,
}, async () => {
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  const packed = await run(npm, ["pack", "--pack-destination", dir, "--json"], {
    cwd: path.join(ROOT, "packages/cli"),
  });
  const [info] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
  assert.ok(info);
  assert.deepEqual(info.files.map((f) => f.path).sort(), ["README.md", "berth.mjs", "package.json"]);
  const prefix = path.join(dir, "prefix");
  await run(
    npm,
    [
      "install",
      "-g",
      "--prefix",
      prefix,
      "--offline",
      "--no-audit",
      "--no-fund",
      path.join(dir, info.filename),
    ],
    {
      cwd: dir,
    },
  );
  const bin = path.join(prefix, "bin", "berth");
  const bundle = fs.readFileSync(path.join(prefix, "lib", "node_modules", "berth-cli", "berth.mjs"), "utf8");
  for (const server of ["fastify", "kysely", "dockerode", "better-sqlite3"])
    assert.ok(!bundle.includes(`node_modules/${server}/`), `the CLI bundle holds no ${server}`);
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
});
