// Daily chores in a real Chromium: ticking services and stopping or starting them together (each
// only where its state allows), and a log's search, timestamps and download.
import assert from "node:assert/strict";
import fs from "node:fs";
import { describe, test } from "node:test";
import { ADMIN_PASSWORD, browserSuite, browserUnavailable, openPage, row, signInAs } from "./browser.ts";
import { simulatedCluster, startedService } from "./fixtures.ts";

const unavailable = browserUnavailable();

describe("bulk operations and logs in Chromium", { skip: unavailable }, () => {
  const suite = browserSuite();

  test("tick two services, stop both, then start both; a third is left alone", async () => {
    await simulatedCluster(suite.berth, "bulk");
    for (const name of ["bulk-a", "bulk-b", "other"])
      await startedService(suite.berth, { image: "busybox:local", name, run_command: "httpd -f -p 80" });
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto("/#/services");
    await page.getByRole("searchbox", { name: "Search" }).fill("bulk-");
    await page.waitForFunction(() => document.querySelectorAll("table tbody tr").length === 2);
    await page.getByLabel("Select all on this page").check();
    const bar = page.getByRole("toolbar", { name: "Selected" });
    await bar.getByText("2 selected").waitFor();
    await bar.getByRole("button", { name: "Stop" }).click();
    await page.getByText("Stop: 2 stopped.").waitFor();
    for (const name of ["bulk-a", "bulk-b"])
      await row(page, name)
        .locator(".state", { hasText: /^Stopped$/ })
        .waitFor({ timeout: 20_000 });
    await row(page, "bulk-a").getByLabel("Select").check();
    await row(page, "bulk-b").getByLabel("Select").check();
    await bar.getByRole("button", { name: "Start" }).click();
    await page.getByText("Start: 2 started.").waitFor();
    for (const name of ["bulk-a", "bulk-b"])
      await row(page, name)
        .locator(".state", { hasText: /^Running$/ })
        .waitFor({ timeout: 20_000 });
    const other = (await suite.berth.api("GET", "/api/app/v1/service/?name=other")).body.objects[0];
    assert.equal(other.state, "Running", "the service not ticked was left alone");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("a log: find a line, show timestamps, download the lines", async () => {
    const svc = await startedService(suite.berth, {
      image: "busybox:local",
      name: "chatty",
      run_command: 'sh -c "echo alpha line; echo beta line; httpd -f -p 80"',
    });
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto(`/#/services/${svc.uuid}`);
    const log = page.locator(".log-lines");
    await log.locator("div", { hasText: "beta line" }).waitFor({ timeout: 15_000 });
    await page.locator('input[name="log-find"]').fill("BETA");
    await log.locator("mark", { hasText: "beta" }).waitFor();
    assert.equal(await log.locator("div", { hasText: "alpha line" }).count(), 0, "only matching lines");
    await page.locator('input[name="log-find"]').fill("");
    await page.locator('input[name="log-times"]').check();
    assert.match(await log.locator("div").first().innerText(), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d /);
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("button", { name: "Download" }).click(),
    ]);
    assert.equal(download.suggestedFilename(), "service-logs.log");
    const text = fs.readFileSync((await download.path())!, "utf8");
    assert.match(text, /alpha line/);
    assert.match(text, /beta line/);
    assert.deepEqual(errors, []);
    await context.close();
  });
});
