// Colours (on request, never with NO_COLOR or --no-color) and shell completion.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { type FakeRegistry, startFakeRegistry } from "../registries/support.ts";
import { berth, okWith, Server } from "./support.ts";

let server: Server;
let env: Record<string, string>;
const ok = okWith(() => env);
const ESC = "\u001b";
let registry: FakeRegistry;

before(async () => {
  registry = await startFakeRegistry({ auth: "basic", username: "robot", password: "s3cret" });
  server = await Server.start({ BERTH_REGISTRY_ALLOW: "127.0.0.1", BERTH_REGISTRY_TIMEOUT_MS: "3000" });
  env = server.adminEnv();
});

after(async () => {
  await server.stop();
  await registry.close();
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
    for (const noun of ["node", "nodecluster", "stack", "service", "container"])
      assert.deepEqual(complete(`berth ${noun} ls --fa`), ["--failing"], noun);
    // The newer commands: bring your own node, the agent's own options, admin.
    assert.ok(["byo", "token"].every((w) => complete("berth node ").includes(w)));
    assert.deepEqual(
      complete("berth node token ").filter((w) => !w.startsWith("-")),
      ["ls", "revoke", "rm"],
    );
    assert.ok(complete("berth node byo -").includes("-q"));
    assert.deepEqual(complete("berth agent --"), [
      "--docker-socket",
      "--help",
      "--install-systemd",
      "--nickname",
      "--no-router",
      "--state-dir",
      "--systemd-dir",
      "--tag",
      "--token",
      "--url",
    ]);
    assert.deepEqual(
      complete("berth admin ").filter((w) => !w.startsWith("-")),
      ["backup", "ls", "restore"],
    );
    assert.ok(complete("berth admin restore --").includes("--data-dir"));
    const zsh = (await ok(["completion", "zsh"])).stdout;
    assert.match(zsh, /bashcompinit/);
    const bad = await berth(["completion", "fish"], { env });
    assert.equal(bad.code, 2);
  });
});
