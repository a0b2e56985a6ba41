// `berth admin backup|restore <file>`: the binary backs up a running server's database (SQLite;
// PostgreSQL with BERTH_TEST_PG_URL, required in CI), restores it into an empty data directory or
// database, and a server started there lists what was made.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import pg from "pg";
import { berth, okWith, rows, Server } from "./support.ts";

const pgUrl = process.env.BERTH_TEST_PG_URL;
if (!pgUrl && process.env.CI === "true") {
  throw new Error("BERTH_TEST_PG_URL must name a PostgreSQL server in CI: berth admin runs on both dialects");
}

let server: Server;
let restored: Server | undefined;
let env: Record<string, string>;
const ok = okWith(() => env);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-cli-admin-"));
const passphrase = path.join(dir, "passphrase");
fs.writeFileSync(passphrase, "a passphrase only the operator knows\n", { mode: 0o600 });
const sealed = ["--passphrase-file", passphrase];

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
  const backup = await ok(["admin", "backup", file, "--data-dir", server.dataDir, ...sealed]);
  assert.match(
    backup.stdout,
    new RegExp(`^backed up to ${file} \\(sqlite database, backup made \\S+\\)\\n$`),
  );
  assert.equal(fs.statSync(file).mode & 0o777, 0o600, "a backup holds the secrets' key: owner only");
  assert.ok(fs.readFileSync(file).subarray(0, 15).toString() === "BERTH-BACKUP 2\n");

  const target = path.join(dir, "restored");
  const restore = await ok(["admin", "restore", file, ...sealed], {
    env: { ...env, BERTH_DATA_DIR: target },
  });
  assert.match(
    restore.stdout,
    new RegExp(`^restored from ${file} \\(sqlite database, backup made \\S+\\)\\n$`),
  );
  assert.equal(fs.statSync(path.join(target, "secret.key")).mode & 0o777, 0o600);
  // Only into an empty database: a second restore there is refused, and says why.
  const again = await berth(["admin", "restore", file, "--data-dir", target, ...sealed], { env });
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
    `berth admin: ${notBackup} is not a Berth backup (it should begin with "BERTH-BACKUP 2")\n`,
  );
  const missing = await berth(
    ["admin", "backup", path.join(dir, "x"), "--data-dir", path.join(dir, "nothing"), ...sealed],
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

test("on PostgreSQL: --database-url backs up a running server's database and restores it into an empty one", {
  skip: pgUrl ? false : "BERTH_TEST_PG_URL is not set",
  timeout: 300_000,
}, async () => {
  const suffix = `${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const names = [`berth_cli_admin_${suffix}_a`, `berth_cli_admin_${suffix}_b`];
  const admin = new pg.Client({ connectionString: pgUrl });
  await admin.connect();
  const urlOf = (name: string) => {
    const u = new URL(pgUrl!);
    u.pathname = `/${name}`;
    return u.toString();
  };
  const servers: Server[] = [];
  try {
    for (const name of names) await admin.query(`CREATE DATABASE ${name}`);
    const source = await Server.start({ BERTH_DATABASE_URL: urlOf(names[0]!) });
    servers.push(source);
    const there = (s: Server) => ({ env: s.adminEnv() });
    const made = await berth(["service", "create", "busybox:local", "--name", "on-pg"], there(source));
    assert.equal(made.code, 0, made.stderr);

    const file = path.join(dir, "pg.backup");
    const backup = await berth(
      ["admin", "backup", file, "--database-url", urlOf(names[0]!), "--data-dir", source.dataDir, ...sealed],
      there(source),
    );
    assert.equal(backup.code, 0, backup.stderr);
    assert.match(backup.stdout, /\(postgres database, backup made \S+\)\n$/);
    const target = path.join(dir, "pg-restored");
    const restore = await berth(
      ["admin", "restore", file, "--database-url", urlOf(names[1]!), "--data-dir", target, ...sealed],
      there(source),
    );
    assert.equal(restore.code, 0, restore.stderr);
    // The dialects must match: a PostgreSQL backup does not go into SQLite.
    const wrong = await berth(
      ["admin", "restore", file, "--data-dir", path.join(dir, "sqlite-target"), ...sealed],
      there(source),
    );
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /holds a postgres database, and BERTH_DATABASE_URL names a sqlite one/);

    const copy = await Server.start({ BERTH_DATABASE_URL: urlOf(names[1]!), BERTH_DATA_DIR: target });
    servers.push(copy);
    const listed = await berth(["service", "ls", "-q"], there(copy));
    assert.equal(listed.code, 0, listed.stderr);
    const original = await berth(["service", "ls", "-q"], there(source));
    assert.equal(listed.stdout, original.stdout);
    assert.match(listed.stdout, /^[0-9a-f-]{36}\n$/);
  } finally {
    for (const s of servers) await s.stop();
    for (const name of names)
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
    await admin.end();
  }
});
