// `npm install` on the Node the project supports says nothing to worry a newcomer (issue 27): no
// package of the lock file refuses this Node (EBADENGINE; cookie 2 wanted Node 22) and no config npm
// does not know (build-from-source was in .npmrc). npm checks both when it plans an install from the
// lock file, so a dry run of `npm ci` on a copy of the manifest files shows what a user would see,
// without the network and without touching node_modules. `.ci/run` fails on the same warnings.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { promisify } from "node:util";

const ROOT = path.resolve(import.meta.dirname, "..");
const MANIFESTS = ["package.json", "package-lock.json", ".npmrc", ".prebuild-installrc"];

describe("installing the dependencies", () => {
  test("npm ci plans the lock file on this Node without a warning", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-install-"));
    try {
      for (const file of MANIFESTS) {
        if (fs.existsSync(path.join(ROOT, file)))
          fs.copyFileSync(path.join(ROOT, file), path.join(dir, file));
      }
      fs.writeFileSync(path.join(dir, "empty-npmrc"), "");
      // The settings npm passes to a script it runs (`npm test`) and the user's own npmrc are left
      // out: the project's files alone must be clean.
      const env: NodeJS.ProcessEnv = {};
      for (const [key, value] of Object.entries(process.env)) if (!/^npm_/i.test(key)) env[key] = value;
      env.npm_config_userconfig = path.join(dir, "empty-npmrc");
      const npm = process.platform === "win32" ? "npm.cmd" : "npm";
      const { stdout, stderr } = await promisify(execFile)(
        npm,
        ["ci", "--dry-run", "--ignore-scripts", "--offline", "--no-audit", "--no-fund"],
        { cwd: dir, env, maxBuffer: 16 * 1024 * 1024 },
      );
      const warnings = `${stdout}\n${stderr}`.split("\n").filter((l) => /^npm (warn|WARN|error|ERR)/.test(l));
      assert.deepEqual(warnings, [], `npm ci on Node ${process.version} warned:\n${warnings.join("\n")}`);
      assert.match(stdout, /added \d+ packages/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("fastify's cookie is 1.x wherever it is installed (cookie 2 is ESM-only and needs Node 22)", () => {
    const lock = JSON.parse(fs.readFileSync(path.join(ROOT, "package-lock.json"), "utf8")) as {
      packages: Record<string, { version?: string }>;
    };
    const cookies = Object.entries(lock.packages)
      .filter(([where]) => where.endsWith("node_modules/cookie"))
      .map(([where, p]) => `${where}@${p.version}`);
    assert.ok(cookies.length > 0, "fastify's cookie is in the lock file");
    for (const cookie of cookies) assert.match(cookie, /@1\./, "cookie 2 requires Node 22");
  });
});
