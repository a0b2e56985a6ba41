// `berth volume-backup` against a live server process with simulated nodes (issue 31): create one
// (waiting with --sync), list it with its size and state, restore it into another service,
// schedule, delete; errors in one line.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { berth, okWith, rows, Server, simulatedCluster } from "./support.ts";

let server: Server;
let env: Record<string, string>;
const ok = okWith(() => env);

before(async () => {
  server = await Server.start();
  env = server.adminEnv();
  await simulatedCluster(server, "pool", 1);
});
after(async () => {
  await server.stop();
});

test("create, ls, restore --into, schedule and rm volume backups", { timeout: 120_000 }, async () => {
  for (const name of ["db", "copy"])
    await ok([
      "service",
      "run",
      "busybox:local",
      "--name",
      name,
      "-r",
      "sleep 100000",
      "-v",
      "/data",
      "--sync",
    ]);
  const made = JSON.parse(
    (await ok(["volume-backup", "create", "db", "--keep", "2", "--sync", "--json"])).stdout,
  );
  assert.equal(made.state, "Success");
  const listed = rows((await ok(["volume-backup", "ls", "db"])).stdout);
  assert.equal(listed.length, 1);
  assert.deepEqual(listed[0]!.slice(1, 3), ["db", "Success"]);
  assert.equal((await ok(["volume-backup", "ls", "-q"])).stdout.trim().length > 0, true);
  const restored = await ok(["volume-backup", "restore", made.uuid.slice(0, 8), "--into", "copy", "--sync"]);
  assert.equal(restored.code, 0, restored.stderr);
  const scheduled = JSON.parse(
    (await ok(["volume-backup", "schedule", "db", "--every", "24", "--keep", "3", "--json"])).stdout,
  );
  assert.equal(scheduled.every_hours, 24);
  await ok(["volume-backup", "schedule", "db", "--off"]);
  const refused = await berth(["volume-backup", "restore", made.uuid, "--into", "nosuch"], { env });
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /nosuch/);
  assert.equal((await ok(["volume-backup", "rm", made.uuid])).stdout.trim(), made.uuid);
  assert.deepEqual(rows((await ok(["volume-backup", "ls", "db"])).stdout), []);
});

test("control-backup ls and create say what to set when BERTH_BACKUP_DIR is not", async () => {
  assert.deepEqual(rows((await ok(["control-backup", "ls"])).stdout), []);
  const refused = await berth(["control-backup", "create"], { env });
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /set BERTH_BACKUP_DIR/);
});
