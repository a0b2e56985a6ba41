// The backups page in a real Chromium (issue 31): a service's volumes backed up from the page,
// listed with state and size, restored and deleted from their row; an administrator's control-
// plane backups listed with "Back up now"; a backup target added (its secret key never shown on
// the page again) and deleted; a user who is not an administrator sees only volume backups.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import S3rver from "s3rver";
import { ADMIN_PASSWORD, browserSuite, browserUnavailable, openPage, signInAs } from "./browser.ts";
import { simulatedCluster, startedService, until } from "./fixtures.ts";

const unavailable = browserUnavailable();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-web-backups-"));
fs.writeFileSync(path.join(dir, "passphrase"), "web backups passphrase\n", { mode: 0o600 });
after(() => fs.rmSync(dir, { recursive: true, force: true }));

describe("backups page in Chromium", { skip: unavailable }, () => {
  const suite = browserSuite(["carol"], {
    BERTH_BACKUP_DIR: path.join(dir, "backups"),
    BERTH_BACKUP_PASSPHRASE_FILE: path.join(dir, "passphrase"),
    BERTH_BACKUP_KEEP_DAILY: "7",
    BERTH_BACKUP_TARGET_ALLOW: "127.0.0.1",
  });
  // A real S3 server on loopback for the target Berth checks before adding it.
  let s3: S3rver;
  let s3Endpoint = "";
  before(async () => {
    fs.mkdirSync(path.join(dir, "s3"));
    s3 = new S3rver({
      port: 0,
      address: "127.0.0.1",
      silent: true,
      directory: path.join(dir, "s3"),
      configureBuckets: [{ name: "berth" }],
    });
    s3Endpoint = `http://127.0.0.1:${(await s3.run()).port}`;
  });
  after(() => s3?.close());

  test("volume backups: back up, restore, delete; control-plane backups and targets for administrators", async () => {
    await simulatedCluster(suite.berth, "web-backups");
    await startedService(suite.berth, {
      name: "files",
      image: "busybox:local",
      run_command: "sleep 100000",
      bindings: [{ container_path: "/data" }],
    });
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.getByRole("link", { name: "Backups", exact: true }).click();

    const form = page.getByRole("form", { name: "Back up a service" });
    await form.getByLabel("Service name").fill("files");
    await form.getByRole("button", { name: "Back up volumes" }).click();
    const volumes = page.getByRole("table", { name: "Volume backups" });
    const row = volumes.locator("tr", { hasText: "files" });
    await row.locator(".state", { hasText: "Success" }).waitFor();
    assert.match((await row.textContent()) ?? "", /data directory/);
    await row.getByRole("button", { name: "Restore" }).click();
    await until("the restore action", async () => {
      const actions = (await suite.berth.api("GET", "/api/audit/v1/action/?order_by=-start_date&limit=5"))
        .body;
      return actions.objects.find(
        (a: { action: string; state: string }) =>
          a.action === "Service Volume Restore" && a.state === "Success",
      );
    });

    // Control-plane backups: the start-up one, then one more.
    const control = page.getByRole("table", { name: "Control-plane backups" });
    await control
      .locator("tr", { hasText: /berth-.*\.backup/ })
      .first()
      .waitFor();
    assert.match(
      (await page.getByRole("region", { name: "Control-plane backups" }).textContent()) ?? "",
      /7 daily/,
    );
    const before = await control.locator("tbody tr").count();
    await page.getByRole("button", { name: "Back up now" }).click();
    await until(
      "a second control-plane backup",
      async () => (await control.locator("tbody tr").count()) > before,
    );

    // A target: checked before it is added (a missing bucket is said at its field, and cleared
    // on edit), added, its secret never shown, deleted.
    const t = page.getByRole("form", { name: "New backup target" });
    await t.getByLabel("Name").fill("offsite");
    await t.getByLabel("Endpoint").fill(s3Endpoint);
    await t.getByLabel("Bucket").fill("no-such-bucket");
    await t.getByLabel("Access key").fill("S3RVER");
    await t.getByLabel("Secret key").fill("web-secret-key-0f3a");
    await t.getByRole("button", { name: "Add target" }).click();
    const bucketError = t.locator('[data-field="bucket"] .field-error');
    await bucketError.getByText("the bucket does not exist (NoSuchBucket)").waitFor();
    await t.getByLabel("Bucket").fill("berth");
    await bucketError.waitFor({ state: "detached" });
    await t.getByRole("button", { name: "Add target" }).click();
    const targets = page.getByRole("table", { name: "Backup targets" });
    await targets.locator("tr", { hasText: "offsite" }).waitFor();
    assert.ok(!(await page.content()).includes("web-secret-key-0f3a"));
    await targets.locator("tr", { hasText: "offsite" }).getByRole("button", { name: "Delete" }).click();
    await targets.locator("tr", { hasText: "offsite" }).waitFor({ state: "detached" });

    // The volume backup deleted from its row.
    await row.getByRole("button", { name: "Delete" }).click();
    await row.waitFor({ state: "detached" });
    // The refused target is the one failed load (Chromium logs a 4xx answer).
    assert.deepEqual(
      errors.filter((e) => !/status of 400/.test(e)),
      [],
    );
    await context.close();
  });

  test("a user who is not an administrator sees volume backups only", async () => {
    const { page, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "carol", "carol-password-1");
    await page.getByRole("link", { name: "Backups", exact: true }).click();
    await page.getByText("No volume backups.").waitFor();
    assert.equal(await page.getByRole("table", { name: "Control-plane backups" }).count(), 0);
    assert.equal(await page.getByRole("table", { name: "Backup targets" }).count(), 0);
    await context.close();
  });
});
