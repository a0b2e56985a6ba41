// A service's health check, redeploy strategy and revisions in the dashboard, in a real Chromium
// against a Berth server process with a simulated node (issue 29): the form sets an HTTP check and
// a start-first strategy, the service page lists both revisions, and Roll back (confirmed first)
// goes back to the first one through an action that ends Success.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ADMIN_PASSWORD, browserSuite, browserUnavailable, openPage, signInAs } from "./browser.ts";
import { simulatedCluster, startedService, until } from "./fixtures.ts";

const unavailable = browserUnavailable();

describe("service revisions in Chromium", { skip: unavailable }, () => {
  const suite = browserSuite([], { BERTH_START_MIN_UP_MS: "150", BERTH_SIM_DELAY_FACTOR: "0.01" });

  test("the form sets a health check and a strategy; Roll back returns to the first revision", async () => {
    await simulatedCluster(suite.berth, "revs");
    const svc = await startedService(suite.berth, {
      image: "busybox:local",
      name: "site",
      run_command: "httpd -f -p 8080",
    });
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    const dialogs: string[] = [];
    page.on("dialog", (d) => dialogs.push(d.message()));
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto(`/#/services/${svc.uuid}/edit`);
    await page.locator('select[name="health_type"]').selectOption("http");
    await page.locator('input[name="health_port"]').fill("8080");
    await page.locator('input[name="health_interval"]').fill("0.2");
    await page.locator('select[name="rollout_order"]').selectOption("start-first");
    await page.locator('input[name="rollout_max_surge"]').fill("1");
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await page.getByRole("heading", { name: "Service site" }).waitFor();
    const saved = (await suite.berth.api("GET", svc.resource_uri)).body;
    assert.deepEqual(
      [saved.health_check.type, saved.health_check.port, saved.health_check.interval],
      ["http", 8080, 0.2],
    );
    assert.equal(saved.rollout.order, "start-first");
    await page.getByText("start-first, 1 extra at a time, on failure rollback").waitFor();

    const revisions = page.getByRole("table", { name: "Revisions of the service" });
    await revisions.getByText("2 (current)").waitFor();
    assert.match(await revisions.innerText(), /health_check, rollout/);
    await revisions.getByRole("button", { name: "Roll back to 1" }).click();
    await page.getByText("Roll back to 1: accepted.").waitFor();
    assert.match(dialogs[0] ?? "", /^Roll service site back to revision 1 \(busybox:local\)\?/);
    await revisions.getByText("1 (current)").waitFor();
    const action = await until("the rollback to end", async () => {
      const list = (
        await suite.berth.api(
          "GET",
          `/api/audit/v1/action/?object=${encodeURIComponent(svc.resource_uri)}&order_by=-start_date`,
        )
      ).body.objects;
      const a = list.find((x: { action: string }) => x.action === "Service Rollback");
      return a && ["Success", "Failed"].includes(a.state) ? a : undefined;
    });
    assert.equal(action.state, "Success");
    const after = (await suite.berth.api("GET", svc.resource_uri)).body;
    assert.equal(after.health_check, null);
    assert.equal(after.rollout, null);
    assert.deepEqual(errors, []);
    await context.close();
  });
});
