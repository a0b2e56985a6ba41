// Honest outcomes of actions in a real Chromium: Cancel shows at once that the action stops after
// its current step, and then the real outcome (the work done when the cancel came during the last
// step); Retry is offered only where it can succeed (not on the start of a terminated service).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ADMIN_PASSWORD, browserSuite, browserUnavailable, openPage, signInAs } from "./browser.ts";
import { until } from "./fixtures.ts";

const unavailable = browserUnavailable();

describe("action outcomes in Chromium", { skip: unavailable }, () => {
  // A widget of one step: a cancel during it comes during the last step.
  const suite = browserSuite([], { BERTH_TEST_WIDGET_STEPS: "1" });

  const work = async (id: string, params: Record<string, unknown>) => {
    const res = await fetch(`${suite.berth.url}/api/app/v1/widget/${id}/work/`, {
      method: "POST",
      headers: { authorization: suite.berth.adminAuth },
      body: JSON.stringify(params),
    });
    assert.equal(res.status, 202);
    return res.headers.get("x-platform-action-uri")!.split("/").filter(Boolean).at(-1)!;
  };

  test("a cancel during the last step: Canceling at once, then Success — the work was done", async () => {
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    const uuid = await work("c1", { steps: 1, stepMs: 1400 });
    await page.goto(`/#/actions/${uuid}`);
    await page.locator(".ops .state", { hasText: /^In progress$/ }).waitFor();
    await page.getByRole("button", { name: "Cancel" }).click();
    const clicked = Date.now();
    await page.locator(".ops .state", { hasText: /^Canceling$/ }).waitFor({ timeout: 1000 });
    await page.getByText("Cancel requested: the action stops after its current step").waitFor();
    assert.ok(Date.now() - clicked < 1000);
    await page.locator(".ops .state", { hasText: /^Success$/ }).waitFor({ timeout: 15_000 });
    await page.getByText("The cancel came too late: the work was done.").waitFor();
    const a = await suite.berth.api("GET", `/api/audit/v1/action/${uuid}/`);
    assert.equal(a.body.state, "Success", "the API says the same");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("Retry of a service's start is not offered once the service is terminated", async () => {
    const svc = await suite.berth.api("POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "gone",
    });
    assert.equal(svc.status, 201);
    const started = await fetch(`${suite.berth.url}${svc.body.resource_uri}start/`, {
      method: "POST",
      headers: { authorization: suite.berth.adminAuth },
    });
    const start = started.headers.get("x-platform-action-uri")!.split("/").filter(Boolean).at(-1)!;
    await until("the start to end", async () =>
      ["Success", "Failed"].includes(
        (await suite.berth.api("GET", `/api/audit/v1/action/${start}/`)).body.state,
      ),
    );
    assert.equal((await suite.berth.api("DELETE", svc.body.resource_uri)).status, 202);
    await until(
      "the service Terminated",
      async () => (await suite.berth.api("GET", svc.body.resource_uri)).body.state === "Terminated",
    );
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto(`/#/actions/${start}`);
    const retry = page.getByRole("button", { name: "Retry" });
    await retry.waitFor();
    await page.locator('.op[title="service gone is Terminated"]').waitFor();
    assert.equal(await retry.isDisabled(), true);
    assert.deepEqual(errors, []);
    await context.close();
  });
});
