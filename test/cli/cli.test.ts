// The `berth` command line, run as a child process against a real platform on a real port.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { type Harness, startHarness } from "../support/harness.ts";

const BIN = path.resolve(import.meta.dirname, "../../bin/berth.mjs");
let h: Harness;
let url: string;

before(async () => {
  h = await startHarness();
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  const address = h.app.server.address();
  assert.ok(address && typeof address === "object");
  url = `http://127.0.0.1:${address.port}`;
});

after(async () => {
  await h.close();
});

function berth(args: string[], key = h.admin.key): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { env: { ...process.env, BERTH_URL: url, BERTH_USER: h.admin.username, BERTH_APIKEY: key } },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

test("service create then service ls shows the service Not running; --json parses", async () => {
  const created = await berth(["service", "create", "busybox:local", "--name", "web"]);
  assert.equal(created.code, 0, created.stderr);
  assert.match(created.stdout, /^[0-9a-f-]{36}\n$/);

  const ls = await berth(["service", "ls"]);
  assert.equal(ls.code, 0, ls.stderr);
  const [header, ...rows] = ls.stdout.trimEnd().split("\n");
  assert.match(header!, /^NAME\s+UUID\s+STATUS\s+#CONTAINERS\s+IMAGE$/);
  const web = rows.find((r) => r.startsWith("web "));
  assert.ok(web, ls.stdout);
  assert.match(web, /^web\s+[0-9a-f]{8}\s+Not running\s+0\s+busybox:local$/);

  const json = await berth(["service", "ls", "--json"]);
  assert.equal(json.code, 0, json.stderr);
  const page = JSON.parse(json.stdout);
  assert.ok(page.objects.some((s: { name: string }) => s.name === "web"));
});

test("a wrong key exits 1 with the server's error on stderr", async () => {
  const res = await berth(["service", "ls"], "wrong-key");
  assert.equal(res.code, 1);
  assert.equal(res.stdout, "");
  const direct = await fetch(`${url}/api/app/v1/service/`, {
    headers: { authorization: `Basic ${Buffer.from(`${h.admin.username}:wrong-key`).toString("base64")}` },
  });
  assert.equal(direct.status, 401);
  const { error } = (await direct.json()) as { error: string };
  assert.equal(res.stderr, `${error}\n`);
});

test("an unknown command exits 2 with the usage on stderr", async () => {
  const res = await berth(["frobnicate", "now"]);
  assert.equal(res.code, 2);
  assert.match(res.stderr, /unknown command: frobnicate now/);
  assert.match(res.stderr, /usage: berth/);
});

test("stack up -f creates and starts a stack that stack ls lists", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-cli-"));
  try {
    const file = path.join(dir, "shop.json");
    fs.writeFileSync(file, JSON.stringify({ front: { image: "busybox:local", target_num_containers: 1 } }));
    const up = await berth(["stack", "up", "-f", file]);
    assert.equal(up.code, 0, up.stderr);

    const ls = await berth(["stack", "ls"]);
    assert.equal(ls.code, 0, ls.stderr);
    assert.match(ls.stdout, /^NAME\s+UUID\s+STATUS\s+#SERVICES\s+DEPLOYED/);
    assert.match(ls.stdout, /\nshop\s+[0-9a-f]{8}\s+\S.*\s+1\s/);

    const named = path.join(dir, "named.json");
    fs.writeFileSync(
      named,
      JSON.stringify({ name: "ignored", services: [{ name: "api", image: "busybox:local" }] }),
    );
    const up2 = await berth(["stack", "up", "-f", named, "--name", "billing", "--json"]);
    assert.equal(up2.code, 0, up2.stderr);
    assert.equal(JSON.parse(up2.stdout).name, "billing");

    const actions = await berth(["action", "ls"]);
    assert.equal(actions.code, 0, actions.stderr);
    assert.match(actions.stdout, /^ACTION\s+OBJECT\s+STATE\s+START/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("service start/stop/terminate resolve a name; an unknown name exits 1", async () => {
  const created = await berth(["service", "create", "busybox:local", "--name", "worker", "--target", "0"]);
  assert.equal(created.code, 0, created.stderr);
  const uuid = created.stdout.trim();
  const term = await berth(["service", "terminate", uuid.slice(0, 8)]);
  assert.equal(term.code, 0, term.stderr);
  assert.equal(term.stdout.trim(), uuid);
  const missing = await berth(["service", "start", "nosuch"]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /service nosuch not found/);
});
