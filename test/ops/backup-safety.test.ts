// Backups are safe to keep and safe to restore (issue 31): sealed with the operator's passphrase
// or key file (the data directory's key nowhere in the file), checked whole before anything is
// written, restored through a staging directory renamed into place only when the database passed
// SQLite's checks. A truncated, a corrupted and a wrongly opened backup are each refused with one
// line, the target directory as it was; the same target then takes a good backup.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { admin } from "../../src/ops/admin.ts";
import { writeSealed } from "../../src/ops/backup-file.ts";
import { runningService, simulatedCluster } from "../streams/support.ts";
import { type Harness, startHarness } from "../support/harness.ts";

const onSqlite = !process.env.BERTH_TEST_DATABASE_URL?.startsWith("postgres");

let h: Harness;
let dir = "";
let backup = "";
let passphrase = "";
let keyFile = "";
before(async () => {
  h = await startHarness();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-backup-safety-"));
  passphrase = path.join(dir, "passphrase");
  fs.writeFileSync(passphrase, "correct horse battery staple\n", { mode: 0o600 });
  keyFile = path.join(dir, "backup.key");
  fs.writeFileSync(keyFile, Buffer.alloc(64, 7), { mode: 0o600 });
  backup = path.join(dir, "berth.backup");
});
after(async () => {
  await h.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs `berth admin …` in-process: exit status and what it printed. */
async function run(argv: string[], env: NodeJS.ProcessEnv) {
  const out: string[] = [];
  const err: string[] = [];
  const status = await admin(
    argv,
    { BERTH_LOG_LEVEL: "silent", ...env },
    {
      out: (l) => out.push(l),
      err: (l) => err.push(l),
    },
  );
  return { status, out, err };
}

/** Every path under `root` with its size: what "unchanged" compares. */
function listing(root: string): string[] {
  if (!fs.existsSync(root)) return ["<absent>"];
  const found: string[] = [];
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      found.push(`${path.relative(root, p)} ${e.isDirectory() ? "dir" : fs.statSync(p).size}`);
    }
  };
  walk(root);
  return found.sort();
}

test("a backup is sealed: neither the data directory's key nor the passphrase is in it", {
  skip: onSqlite ? false : "restores SQLite backups",
}, async () => {
  await simulatedCluster(h, h.admin, 1);
  await runningService(h, h.admin, { name: "kept", target_num_containers: 1 });
  // A local node's record, as the local provider keeps it: it travels with the backup.
  const record = path.join(h.dataDir, "local-nodes", "nodes", "0123456789ab", "node.json");
  fs.mkdirSync(path.dirname(record), { recursive: true });
  fs.writeFileSync(record, '{"version":1,"nodeId":"n"}\n');
  const made = await run(["backup", backup, "--passphrase-file", passphrase], { BERTH_DATA_DIR: h.dataDir });
  fs.rmSync(path.join(h.dataDir, "local-nodes"), { recursive: true, force: true });
  assert.equal(made.status, 0, made.err.join("\n"));
  assert.equal(fs.statSync(backup).mode & 0o777, 0o600);
  const bytes = fs.readFileSync(backup);
  assert.equal(bytes.subarray(0, 15).toString(), "BERTH-BACKUP 2\n");
  const key = fs.readFileSync(path.join(h.dataDir, "secret.key"), "utf8").trim();
  assert.ok(key.length >= 32);
  for (const needle of [
    Buffer.from(key),
    Buffer.from(key, "base64"),
    Buffer.from(key, "hex"),
    Buffer.from("correct horse battery staple"),
    Buffer.from("SQLite format 3"),
    Buffer.from('"nodeId":"n"'),
  ]) {
    if (needle.length >= 8)
      assert.equal(bytes.indexOf(needle), -1, `found ${needle.toString("hex").slice(0, 16)}…`);
  }
  // Restored: the database, the key file and the local nodes' record are back.
  const target = path.join(dir, "restored");
  const restored = await run(["restore", backup, "--passphrase-file", passphrase], {
    BERTH_DATA_DIR: target,
  });
  assert.equal(restored.status, 0, restored.err.join("\n"));
  assert.equal(fs.readFileSync(path.join(target, "secret.key"), "utf8").trim(), key);
  assert.equal(
    fs.readFileSync(path.join(target, "local-nodes", "nodes", "0123456789ab", "node.json"), "utf8"),
    '{"version":1,"nodeId":"n"}\n',
  );
  assert.deepEqual(
    fs.readdirSync(dir).filter((n) => n.includes("restore-")),
    [],
    "no staging directory is left",
  );
});

test("truncated, corrupted and wrongly opened backups are refused in one line; the target stays as it was", {
  skip: onSqlite ? false : "restores SQLite backups",
}, async () => {
  assert.ok(fs.existsSync(backup), "the first test made it");
  const good = fs.readFileSync(backup);
  const target = path.join(dir, "target");
  fs.mkdirSync(target, { mode: 0o700 });
  fs.writeFileSync(path.join(target, "notes.txt"), "the operator's own file\n");
  const before = listing(target);

  const truncated = path.join(dir, "truncated.backup");
  fs.writeFileSync(truncated, good.subarray(0, Math.floor(good.length * 0.6)));
  const corrupted = path.join(dir, "corrupted.backup");
  const flipped = Buffer.from(good);
  flipped[Math.floor(flipped.length / 2)]! ^= 0x40;
  fs.writeFileSync(corrupted, flipped);
  const wrong = path.join(dir, "wrong-passphrase");
  fs.writeFileSync(wrong, "not the passphrase it was sealed with\n");
  const siblings = fs.readdirSync(dir).sort();

  const cases: [string, string[], RegExp][] = [
    [
      truncated,
      ["--passphrase-file", passphrase],
      /^berth admin: \S+ is truncated: its end line is missing \(\d+ bytes\)$/,
    ],
    [
      corrupted,
      ["--passphrase-file", passphrase],
      /^berth admin: \S+ is corrupted: its checksum does not match its contents$/,
    ],
    [
      backup,
      ["--passphrase-file", wrong],
      /^berth admin: \S+ cannot be opened with this passphrase \(\S+\): wrong secret$/,
    ],
    [backup, ["--key-file", keyFile], /^berth admin: \S+ is sealed with a passphrase, not a key file$/],
    [backup, [], /^berth admin: \S+ is sealed with a passphrase: give it with --passphrase-file$/],
  ];
  for (const [file, secret, expected] of cases) {
    const r = await run(["restore", file, ...secret], { BERTH_DATA_DIR: target });
    assert.equal(r.status, 1, `${path.basename(file)} ${secret.join(" ")}: ${r.out.join("\n")}`);
    assert.equal(r.err.length, 1, r.err.join("\n"));
    assert.match(r.err[0]!, expected);
    assert.deepEqual(listing(target), before, `${path.basename(file)}: the target is unchanged`);
    assert.deepEqual(fs.readdirSync(dir).sort(), siblings, "no staging directory is left beside it");
  }

  // A file whose checksum holds but whose database is damaged fails SQLite's checks, in one line.
  const garbage = path.join(dir, "garbage.sqlite");
  // The database the first test restored: whole, checkpointed; pages past the first are damaged.
  const db = Buffer.from(fs.readFileSync(path.join(dir, "restored", "berth.sqlite")));
  assert.ok(db.length > 4096 * 8);
  db.fill(0xa5, 4096 * 2, 4096 * 6);
  fs.writeFileSync(garbage, db);
  const damaged = path.join(dir, "damaged.backup");
  await writeSealed({
    file: damaged,
    dialect: "sqlite",
    createdAt: new Date().toISOString(),
    secret: { kind: "passphrase", bytes: Buffer.from("correct horse battery staple"), source: "test" },
    entries: [
      { name: "database", file: garbage },
      { name: "secret.key", file: path.join(h.dataDir, "secret.key") },
    ],
  });
  const r = await run(["restore", damaged, "--passphrase-file", passphrase], { BERTH_DATA_DIR: target });
  assert.equal(r.status, 1);
  assert.equal(r.err.length, 1, r.err.join("\n"));
  assert.match(r.err[0]!, /^berth admin: \S+ is corrupted: its database fails SQLite's checks \(.+\)$/);
  assert.deepEqual(listing(target), before);
  fs.rmSync(damaged);
  fs.rmSync(garbage);

  // The same target then takes the good backup (nothing half-written stood in its way).
  const ok = await run(["restore", backup, "--passphrase-file", passphrase], { BERTH_DATA_DIR: target });
  assert.equal(ok.status, 0, ok.err.join("\n"));
  assert.match(ok.out[0]!, /^restored from \S+ \(sqlite database, backup made \S+\)$/);
  assert.ok(fs.existsSync(path.join(target, "berth.sqlite")));
  assert.ok(
    !fs.existsSync(path.join(target, "berth.sqlite-wal")) ||
      fs.statSync(path.join(target, "berth.sqlite-wal")).size === 0,
  );
});

test("a key file seals as well as a passphrase; short secrets are refused", async () => {
  const sealed = path.join(dir, "keyed.backup");
  const made = await run(["backup", sealed, "--key-file", keyFile], { BERTH_DATA_DIR: h.dataDir });
  assert.equal(made.status, 0, made.err.join("\n"));
  assert.equal(fs.readFileSync(sealed).indexOf(fs.readFileSync(keyFile)), -1);
  const target = path.join(dir, "keyed-target");
  const restored = await run(["restore", sealed, "--key-file", keyFile], { BERTH_DATA_DIR: target });
  assert.equal(restored.status, 0, restored.err.join("\n"));

  const short = path.join(dir, "short");
  fs.writeFileSync(short, "tiny\n");
  const refused = await run(["backup", path.join(dir, "x.backup"), "--passphrase-file", short], {
    BERTH_DATA_DIR: h.dataDir,
  });
  assert.equal(refused.status, 1);
  assert.deepEqual(refused.err, [
    `berth admin: BERTH_BACKUP_PASSPHRASE_FILE: the passphrase in ${short} must be at least 12 characters`,
  ]);
  const none = await run(["backup", path.join(dir, "x.backup")], { BERTH_DATA_DIR: h.dataDir });
  assert.equal(none.status, 1);
  assert.match(none.err[0]!, /^berth admin: a backup is sealed with a secret you give: --passphrase-file/);
  assert.ok(!fs.existsSync(path.join(dir, "x.backup")));
});
