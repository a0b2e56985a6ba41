// Stacks from stack files (YAML and JSON, a file of the current folder, standard input) with
// `berth up` and `berth stack`, and problems reported at the file's line.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { waitFor } from "../support/harness.ts";
import { berth, liveServer, rows, UUID } from "./support.ts";

const { live, ok } = liveServer({ cluster: { name: "pool", nodes: 2 } });

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

  test("ls --failing (issue 33): a crashed stack, its service and container; no node or cluster of a sound pool", async () => {
    const up = (name: string, command: string) =>
      ok(["stack", "up", "-f", "-", "-n", name], {
        input: JSON.stringify({ [name]: { image: "busybox:local", command } }),
      });
    await up("calm", "sleep 100000");
    await up("broken", 'sh -c "exit 5"');
    const names = async (args: string[]) => rows((await ok(args)).stdout).map((r) => r[0]);
    const failing = await waitFor("the broken stack to fail", async () => {
      const listed = await names(["stack", "ls", "--failing"]);
      return listed.length > 0 ? listed : undefined;
    });
    assert.deepEqual(failing, ["broken"]);
    assert.ok((await names(["stack", "ls"])).includes("calm"));
    assert.deepEqual(await names(["service", "ls", "--failing"]), ["broken"]);
    assert.deepEqual(await names(["container", "ls", "--failing"]), ["broken-1"]);
    assert.ok((await names(["container", "ls"])).includes("calm-1"));
    // The pool's nodes answer: listed, but none failing (the filter reaches the server).
    assert.equal((await ok(["node", "ls", "-q"])).stdout.trim().split("\n").length, 2);
    assert.equal((await ok(["node", "ls", "--failing", "-q"])).stdout, "");
    assert.deepEqual(await names(["nodecluster", "ls"]), ["pool"]);
    assert.equal((await ok(["nodecluster", "ls", "--failing", "-q"])).stdout, "");
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
    const r = await berth(["stack", "create", "-f", "bad.yml"], { env: live.env, cwd: dir });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /\nbad\.yml:5: services\.web\.ports\[1\]: must be a port/);
    assert.match(r.stderr, /\nbad\.yml:6: services\.web\.mem_limit: /);
    const syntax = await berth(["stack", "up", "-f", "-"], { env: live.env, input: "web:\n  image: [\n" });
    assert.equal(syntax.code, 1);
    assert.match(syntax.stderr, /^berth: <stdin>:3:1: /);
    const none = await berth(["up"], { env: live.env, cwd: os.tmpdir() });
    assert.equal(none.code, 2);
    assert.match(none.stderr, /no stack file: give -f <file>, or put one of berth\.yml/);
  });
});
