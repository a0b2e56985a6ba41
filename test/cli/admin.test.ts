// `berth admin backup|restore <file>`: the binary backs up a running server's SQLite database,
// restores it into an empty data directory, and a server started there lists what was made.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { berth, okWith, rows, Server } from "./support.ts";

let server: Server;
let restored: Server | undefined;
let env: Record<string, string>;
const ok = okWith(() => env);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-cli-admin-"));

before(async () => {
  server = await Server.start();
  env = server.adminEnv();
});

after(async () => {
  await restored?.stop();
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

test("admin backup of a running server, restore into an empty data directory, start there: the objects are back", {
  timeout: 300_000,
}, async () => {
  await ok(["service", "create", "busybox:local", "--name", "kept", "-t", "2"]);
  await ok(["org", "create", "keepers"]);
  const file = path.join(dir, "berth.backup");

  // While the server runs, from its data directory (--data-dir or BERTH_DATA_DIR).
  const backup = await ok(["admin", "backup", file, "--data-dir", server.dataDir]);
  assert.match(
    backup.stdout,
    new RegExp(`^backed up to ${file} \\(sqlite database, backup made \\S+\\)\\n$`),
  );
  assert.equal(fs.statSync(file).mode & 0o777, 0o600, "a backup holds the secrets' key: owner only");
  assert.ok(fs.readFileSync(file).subarray(0, 15).toString() === "BERTH-BACKUP 1\n");

  const target = path.join(dir, "restored");
  const restore = await ok(["admin", "restore", file], { env: { ...env, BERTH_DATA_DIR: target } });
  assert.match(
    restore.stdout,
    new RegExp(`^restored from ${file} \\(sqlite database, backup made \\S+\\)\\n$`),
  );
  assert.equal(fs.statSync(path.join(target, "secret.key")).mode & 0o777, 0o600);
  // Only into an empty database: a second restore there is refused, and says why.
  const again = await berth(["admin", "restore", file, "--data-dir", target], { env });
  assert.equal(again.code, 1);
  assert.match(again.stderr, /^berth admin: .*empty/m);

  restored = await Server.start({ BERTH_DATA_DIR: target });
  const there = { ...restored.adminEnv() };
  const services = await berth(["service", "ls"], { env: there });
  assert.equal(services.code, 0, services.stderr);
  const kept = rows(services.stdout).find((r) => r[0] === "kept");
  assert.ok(kept, services.stdout);
  const inspected = JSON.parse((await berth(["service", "inspect", "kept"], { env: there })).stdout);
  assert.equal(inspected.target_num_containers, 2);
  assert.match((await berth(["org", "ls"], { env: there })).stdout, /\nkeepers\s+organization\n/);
});

test("admin refuses what is not a backup, a missing database and wrong usage, with exit codes", async () => {
  const notBackup = path.join(dir, "not-a-backup");
  fs.writeFileSync(notBackup, "hello\n");
  const refused = await berth(["admin", "restore", notBackup, "--data-dir", path.join(dir, "empty")], {
    env,
  });
  assert.equal(refused.code, 1);
  assert.equal(
    refused.stderr,
    `berth admin: ${notBackup} is not a Berth backup (it should begin with "BERTH-BACKUP 1")\n`,
  );
  const missing = await berth(
    ["admin", "backup", path.join(dir, "x"), "--data-dir", path.join(dir, "nothing")],
    {
      env,
    },
  );
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /^berth admin: no database at \S+berth\.sqlite \(check BERTH_DATA_DIR\)\n$/);
  assert.ok(!fs.existsSync(path.join(dir, "x")));
  const usage = await berth(["admin", "backup"], { env });
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /missing required argument 'file'/);
});
