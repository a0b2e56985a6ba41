// Daily and weekly retention tiers (issue 31, domain/retention.ts), with an injected clock that
// jumps days ahead: besides the newest `keep`, the newest backup of each of the last N days and N
// weeks stays; the others are deleted — control-plane backups on an S3 target (s3rver, loopback
// allowed explicitly) and volume backups in the data directory and on the target.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import S3rver from "s3rver";
import { retained } from "../../src/domain/retention.ts";
import { inState, simulatedCluster } from "../streams/support.ts";
import { call, type Harness, startHarness, waitFor } from "../support/harness.ts";

// biome-ignore lint/suspicious/noExplicitAny: the API's JSON.
type Json = any;

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** The next Monday, 10:00 UTC: after the real time (a start compares engine times with the clock). */
const BASE = (() => {
  const today = Math.floor(Date.now() / DAY);
  const sinceMonday = (((today - 4) % 7) + 7) % 7; // 1970-01-05 (day 4) was a Monday
  return (today - sinceMonday + 7) * DAY + 10 * HOUR;
})();
/** When the backups are made, from BASE: A, B (day 0), C (1), D, E (2), F (8, the next week), G (9). */
const TIMES = [0, 6 * HOUR, DAY, 2 * DAY, 2 * DAY + 6 * HOUR, 8 * DAY, 9 * DAY];
/** What keep 1, daily 2, weekly 2 leaves after the last: G (newest, day 9, week 2), F (day 8), E (week 1). */
const LEFT = [9 * DAY, 8 * DAY, 2 * DAY + 6 * HOUR];

test("retention keeps the newest N, then the newest of each of the last days and weeks", () => {
  const backups = TIMES.map((t, i) => ({ id: "ABCDEFG"[i]!, time: BASE + t }));
  const keep = (last: number, daily: number, weekly: number) =>
    [...retained(backups, { last, daily, weekly })].sort().join("");
  assert.equal(keep(1, 2, 2), "EFG");
  assert.equal(keep(1, 0, 0), "G");
  assert.equal(keep(0, 4, 0), "CEFG", "one per day, the newest of it");
  assert.equal(keep(0, 0, 5), "EG", "weeks start on Monday");
  assert.equal(keep(2, 1, 1), "FG");
  assert.equal(keep(10, 0, 0), "ABCDEFG");
});

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-retention-"));
const s3dir = path.join(dir, "s3");
let server: S3rver;
let h: Harness;
let jump = 0;
let started = 0;
const services = new Map<string, Json>();

before(async () => {
  fs.writeFileSync(path.join(dir, "passphrase"), "retention tiers passphrase\n", { mode: 0o600 });
  fs.mkdirSync(s3dir);
  server = new S3rver({
    port: 0,
    address: "127.0.0.1",
    silent: true,
    directory: s3dir,
    configureBuckets: [{ name: "berth" }],
  });
  const { port } = await server.run();
  started = Date.now();
  h = await startHarness({
    clock: { now: () => BASE + (Date.now() - started) + jump },
    env: {
      BERTH_BACKUP_TARGET: "s3",
      BERTH_BACKUP_PASSPHRASE_FILE: path.join(dir, "passphrase"),
      BERTH_BACKUP_KEEP: "1",
      BERTH_BACKUP_KEEP_DAILY: "2",
      BERTH_BACKUP_KEEP_WEEKLY: "2",
      BERTH_BACKUP_EVERY_HOURS: "8760",
      BERTH_BACKUP_TARGET_ALLOW: "127.0.0.1",
    },
  });
  const made = await call(h, h.admin, "POST", "/api/v1.1/backuptargets/", {
    name: "s3",
    endpoint: `http://127.0.0.1:${port}`,
    bucket: "berth",
    access_key: "S3RVER",
    secret_key: "S3RVER",
  });
  assert.equal(made.status, 201, made.raw);
  await simulatedCluster(h, h.admin, 1);
  // The services first: the clock only moves forward after this.
  for (const name of ["tiers-local", "tiers-s3"]) {
    const made = await call(h, h.admin, "POST", "/api/app/v1/service/", {
      name,
      image: "busybox:local",
      run_command: "sleep 100000",
      bindings: [{ container_path: "/data" }],
    });
    await call(h, h.admin, "POST", `${made.body.resource_uri}start/`);
    services.set(name, await inState(h, h.admin, made.body.resource_uri, "Running"));
  }
});
after(async () => {
  await h.close();
  await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Sets the clock to BASE + t (plus the few seconds the test has run). */
const at = (t: number) => {
  jump = t - (Date.now() - started);
};

/** Hours from `from` (BASE plus a test's own start) to an ISO time. */
const hoursOf = (iso: string, from = 0) => Math.floor((Date.parse(iso) - BASE - from) / HOUR);

test("control-plane backups on an S3 target keep 1, 2 daily and 2 weekly", async () => {
  for (const t of TIMES) {
    at(t);
    const r = await call(h, h.admin, "POST", "/api/v1.1/backups/");
    assert.equal(r.status, 201, r.raw);
  }
  const list = (await call(h, h.admin, "GET", "/api/v1.1/backups/")).body;
  assert.equal(list.keep_daily, 2);
  assert.equal(list.keep_weekly, 2);
  const ok = list.objects.filter((o: Json) => o.status === "Success");
  assert.deepEqual(
    ok.map((o: Json) => hoursOf(o.created_datetime)),
    LEFT.map((t) => t / HOUR),
    JSON.stringify(ok),
  );
  const objects = fs.readdirSync(path.join(s3dir, "berth", "control")).filter((n) => n.endsWith("_object"));
  assert.deepEqual(objects.sort(), ok.map((o: Json) => `${o.name}._S3rver_object`).sort());
});

async function finished(actionUri: string): Promise<Json> {
  return waitFor(`${actionUri} to end`, async () => {
    const a = (await call(h, h.admin, "GET", actionUri)).body;
    return ["Success", "Failed", "Canceled"].includes(a.state) ? a : undefined;
  });
}

for (const [i, target] of [null, "s3"].entries()) {
  test(`volume backups ${target ? "on an S3 target" : "in the data directory"} keep 1, 2 daily and 2 weekly`, async () => {
    // Each test starts whole weeks later than the one before (the clock never goes back).
    const from = (i + 1) * 28 * DAY;
    const s = services.get(target ? "tiers-s3" : "tiers-local");
    const uuids: string[] = [];
    for (const t of TIMES) {
      at(from + t);
      const r = await call(h, h.admin, "POST", `${s.resource_uri}volumebackup/`, {
        keep: 1,
        keep_daily: 2,
        keep_weekly: 2,
        ...(target ? { target } : {}),
      });
      assert.equal(r.status, 202, r.raw);
      assert.equal((await finished(r.headers["x-platform-action-uri"] as string)).state, "Success");
      uuids.push(r.body.uuid);
    }
    const left = (await call(h, h.admin, "GET", `${s.resource_uri}volumebackup/`)).body.objects;
    assert.deepEqual(
      left.map((b: Json) => hoursOf(b.created_datetime, from)),
      LEFT.map((t) => t / HOUR),
    );
    assert.deepEqual(
      left.map((b: Json) => b.uuid),
      [uuids[6], uuids[5], uuids[4]],
    );
    // The removed ones' archives are gone where they were kept.
    const where = target
      ? path.join(s3dir, "berth", "volumes", "admin")
      : path.join(h.dataDir, "volume-backups");
    const held = fs.existsSync(where) ? fs.readdirSync(where).filter((n) => !n.startsWith(".")) : [];
    assert.deepEqual(held.sort(), [uuids[4], uuids[5], uuids[6]].sort());
  });
}
