// Volume backups through the API (issue 31), on simulated nodes whose fake engines keep
// containers' files: a backup of a service's volumes is an action; listed with size and state;
// restored into another service, whose container then holds the same bytes; retention removes the
// oldest; a schedule queues backups; another namespace sees 404s; a service without volumes is
// refused with a reason.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { simulatedCluster } from "../streams/support.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";
import { fakeEngineOf, serviceWithVolume } from "../support/volumes.ts";

let h: Harness;
let bob: Caller;
before(async () => {
  h = await startHarness();
  bob = await createUser(h, "bob");
  await simulatedCluster(h, h.admin, 1);
});
after(() => h.close());

// biome-ignore lint/suspicious/noExplicitAny: the API's JSON.
type Json = any;

async function finished(actionUri: string): Promise<Json> {
  return waitFor(
    `${actionUri} to end`,
    async () => {
      const a = (await call(h, h.admin, "GET", actionUri)).body;
      return ["Success", "Failed", "Canceled"].includes(a.state) ? a : undefined;
    },
    10_000,
  );
}

async function backUp(service: Json, body: Record<string, unknown> = {}): Promise<Json> {
  const res = await call(h, h.admin, "POST", `${service.resource_uri}volumebackup/`, body);
  assert.equal(res.status, 202, res.raw);
  assert.equal(res.body.state, "In progress");
  const action = await finished(res.headers["x-platform-action-uri"] as string);
  assert.equal(action.state, "Success", JSON.stringify(action));
  return (await call(h, h.admin, "GET", res.body.resource_uri)).body;
}

test("a backup of a service's volumes restores into a new service with the same bytes", async () => {
  const db = await serviceWithVolume(h, "db", 2);
  const bytes = [Buffer.from("first container's data\n"), Buffer.from([0, 1, 2, 255, 254])];
  for (const uri of db.containers as string[]) {
    const { engine, id, number } = await fakeEngineOf(h, uri.split("/").at(-2)!);
    engine.files.write(id, `/data/file-${number}`, bytes[number - 1]!);
  }
  const b = await backUp(db);
  assert.equal(b.state, "Success");
  assert.equal(b.service, db.resource_uri);
  assert.equal(b.archives.length, 2);
  assert.ok(b.size_bytes > 0);
  assert.match(b.action, /^\/api\/audit\/v1\/action\/[0-9a-f-]+\/$/);

  // Into a new service of the same namespace with a volume at the same path.
  const copy = await serviceWithVolume(h, "db-copy", 2);
  const restore = await call(h, h.admin, "POST", `${b.resource_uri}restore/`, { service: copy.resource_uri });
  assert.equal(restore.status, 202, restore.raw);
  assert.equal((await finished(restore.headers["x-platform-action-uri"] as string)).state, "Success");
  const copies = await Promise.all(
    (copy.containers as string[]).map((u) => fakeEngineOf(h, u.split("/").at(-2)!)),
  );
  copies.sort((x, y) => x.number - y.number);
  // Container by container (by number), the same bytes at the same paths.
  for (const [rank, c] of copies.entries())
    assert.deepEqual(c.engine.files.read(c.id, `/data/file-${rank + 1}`), bytes[rank]);
  // Listed with size and state, per service and in the namespace.
  const listed = await call(h, h.admin, "GET", `${db.resource_uri}volumebackup/`);
  assert.equal(listed.status, 200);
  assert.deepEqual(
    listed.body.objects.map((x: Json) => [x.uuid, x.state, x.size_bytes]),
    [[b.uuid, "Success", b.size_bytes]],
  );
  const all = await call(h, h.admin, "GET", `/api/app/v1/volumebackup/?service=${db.uuid}`);
  assert.equal(all.body.meta.total_count, 1);
});

test("another namespace sees 404s; a service without volumes, or without a volume at the path, is refused with the reason", async () => {
  const db = (await call(h, h.admin, "GET", "/api/app/v1/service/?name=db")).body.objects[0];
  const b = (await call(h, h.admin, "GET", `${db.resource_uri}volumebackup/`)).body.objects[0];
  for (const [method, url] of [
    ["GET", b.resource_uri.replace("/admin/", "/")],
    ["GET", b.resource_uri],
    ["POST", `${b.resource_uri}restore/`],
    ["DELETE", b.resource_uri],
    ["POST", `${db.resource_uri}volumebackup/`],
  ] as const) {
    const r = await call(h, bob, method, url, method === "POST" ? {} : undefined);
    assert.equal(r.status, 404, `${method} ${url}: ${r.raw}`);
  }
  const plain = await call(h, h.admin, "POST", "/api/app/v1/service/", {
    name: "plain",
    image: "busybox:local",
  });
  const refused = await call(h, h.admin, "POST", `${plain.body.resource_uri}volumebackup/`, {});
  assert.equal(refused.status, 409);
  assert.equal(refused.body.code, "no_volumes");
  assert.match(refused.body.error, /service plain has no volumes to back up/);
  const into = await call(h, h.admin, "POST", `${b.resource_uri}restore/`, {
    service: plain.body.resource_uri,
  });
  assert.equal(into.status, 409);
  assert.match(into.body.error, /service plain has no volume at \/data/);
  const bad = await call(h, h.admin, "POST", `${db.resource_uri}volumebackup/`, { keep: 0 });
  assert.equal(bad.status, 400);
});

test("retention keeps the newest backups and removes the oldest with their files; a schedule queues backups", async () => {
  const db = (await call(h, h.admin, "GET", "/api/app/v1/service/?name=db")).body.objects[0];
  const before = (await call(h, h.admin, "GET", `${db.resource_uri}volumebackup/`)).body.objects as Json[];
  const made: Json[] = [];
  for (let i = 0; i < 3; i++) made.push(await backUp(db, { keep: 2 }));
  const now = (await call(h, h.admin, "GET", `${db.resource_uri}volumebackup/`)).body.objects as Json[];
  assert.deepEqual(
    now.map((x) => x.uuid),
    [made[2].uuid, made[1].uuid],
    "the two newest are kept, the oldest ones removed",
  );
  for (const gone of [...before, made[0]])
    assert.ok(!fs.existsSync(path.join(h.dataDir, "volume-backups", gone.uuid)), "its files are gone");
  assert.ok(fs.existsSync(path.join(h.dataDir, "volume-backups", made[2].uuid)));
  assert.equal((await call(h, h.admin, "GET", made[0].resource_uri)).status, 404);

  const schedule = await call(h, h.admin, "PUT", `${db.resource_uri}volumebackupschedule/`, {
    every_hours: 24,
    keep: 2,
  });
  assert.equal(schedule.status, 200, schedule.raw);
  assert.equal(schedule.body.every_hours, 24);
  // Due now: the schedule runner queues one backup (once, whichever replica claims it).
  await h.db.kysely.updateTable("volume_backup_schedules").set({ next_at: 0 }).execute();
  assert.equal(
    await h.volumeBackups.runSchedules(h.actions, {
      method: "POST",
      path: "",
      user: "berth",
      userAgent: "t",
      ip: "",
    }),
    1,
  );
  assert.equal(
    await h.volumeBackups.runSchedules(h.actions, {
      method: "POST",
      path: "",
      user: "berth",
      userAgent: "t",
      ip: "",
    }),
    0,
  );
  const scheduled = await waitFor("the scheduled backup", async () => {
    const list = (await call(h, h.admin, "GET", `${db.resource_uri}volumebackup/`)).body.objects as Json[];
    return list.find((x) => x.trigger === "schedule" && x.state === "Success");
  });
  assert.ok(scheduled);
  assert.equal((await call(h, h.admin, "DELETE", `${db.resource_uri}volumebackupschedule/`)).status, 204);
  assert.equal((await call(h, h.admin, "GET", `${db.resource_uri}volumebackupschedule/`)).status, 404);
});
