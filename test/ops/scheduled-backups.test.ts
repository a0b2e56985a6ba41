// Scheduled control-plane backups (issue 31): with BERTH_BACKUP_DIR, Berth writes sealed backups
// there (one at start-up when none is recent, then every BERTH_BACKUP_EVERY_HOURS), keeps the
// newest BERTH_BACKUP_KEEP, and lists them with size and status to administrators; a failed one
// is listed as Failed with its reason, and a backup from the list restores.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { admin } from "../../src/ops/admin.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";

const onSqlite = !process.env.BERTH_TEST_DATABASE_URL?.startsWith("postgres");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-scheduled-backups-"));
const passphrase = path.join(dir, "passphrase");
const backups = path.join(dir, "backups");
let h: Harness;
let bob: Caller;

before(async () => {
  fs.writeFileSync(passphrase, "scheduled backups passphrase\n", { mode: 0o600 });
  h = await startHarness({
    env: { BERTH_BACKUP_DIR: backups, BERTH_BACKUP_KEEP: "2", BERTH_BACKUP_PASSPHRASE_FILE: passphrase },
  });
  bob = await createUser(h, "bob");
});
after(async () => {
  await h.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test("backups are made on schedule, the newest 2 kept, listed with size and status; one restores", {
  skip: onSqlite ? false : "restores SQLite backups",
}, async () => {
  // The start-up made the first one (none was recent).
  const first = await waitFor("the first scheduled backup", async () => {
    const r = await call(h, h.admin, "GET", "/api/v1.1/backups/");
    return r.body.objects.length === 1 ? r.body : undefined;
  });
  assert.equal(first.enabled, true);
  assert.equal(first.keep, 2);
  assert.equal(first.every_hours, 24);
  const names = [first.objects[0].name];
  for (let i = 0; i < 2; i++) {
    await new Promise((r) => setTimeout(r, 5));
    const made = await call(h, h.admin, "POST", "/api/v1.1/backups/");
    assert.equal(made.status, 201, made.raw);
    names.push(made.body.objects[0].name);
  }
  const listed = (await call(h, h.admin, "GET", "/api/v1.1/backups/")).body.objects;
  assert.deepEqual(
    listed.map((b: { name: string }) => b.name),
    [names[2], names[1]],
    "the oldest was removed",
  );
  assert.deepEqual(fs.readdirSync(backups).sort(), [names[1], names[2]].sort());
  for (const b of listed) {
    assert.equal(b.status, "Success");
    assert.equal(b.size_bytes, fs.statSync(path.join(backups, b.name)).size);
    assert.equal(fs.statSync(path.join(backups, b.name)).mode & 0o777, 0o600);
  }
  // Administrators only.
  const refused = await call(h, bob, "GET", "/api/v1.1/backups/");
  assert.equal(refused.status, 403);
  assert.equal(refused.body.code, "admin_only");

  // The newest restores with the same passphrase.
  const target = path.join(dir, "restored");
  const out: string[] = [];
  const err: string[] = [];
  const status = await admin(
    ["restore", path.join(backups, names[2]!), "--passphrase-file", passphrase],
    {
      BERTH_DATA_DIR: target,
    },
    { out: (l) => out.push(l), err: (l) => err.push(l) },
  );
  assert.equal(status, 0, err.join("\n"));

  // A failing backup (its secret file gone) is a 409 with the reason, and listed as Failed.
  fs.renameSync(passphrase, `${passphrase}.away`);
  try {
    const failed = await call(h, h.admin, "POST", "/api/v1.1/backups/");
    assert.equal(failed.status, 409, failed.raw);
    assert.equal(failed.body.code, "backup_failed");
    assert.match(failed.body.error, /BERTH_BACKUP_PASSPHRASE_FILE: \S+ cannot be read/);
    const now = (await call(h, h.admin, "GET", "/api/v1.1/backups/")).body.objects;
    assert.equal(now[0].status, "Failed");
    assert.match(now[0].error, /cannot be read/);
    assert.equal(now.length, 3);
  } finally {
    fs.renameSync(`${passphrase}.away`, passphrase);
  }
});
