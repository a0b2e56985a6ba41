// A namespace's privileges in the dashboard (issue 26): a tenant's service form shows the refusal
// of an option that reaches the node, the account page shows the namespace's privileges, and an
// administrator changes them there (a malformed host path shows the API's sentence by the form).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  ADMIN_PASSWORD,
  browserSuite,
  browserUnavailable,
  openPage,
  screenshot,
  signInAs,
} from "./browser.ts";

const unavailable = browserUnavailable();

describe("namespace privileges in Chromium", { skip: unavailable }, () => {
  const suite = browserSuite(["carol"]);

  const privilegedService = async (name: string) => {
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "carol", "carol-password-1");
    await page.goto("/#/services/new");
    await page.locator('input[name="image"]').fill("busybox:local");
    await page.locator('input[name="name"]').fill(name);
    await page.getByLabel("Privileged").check();
    await page.getByRole("button", { name: "Create", exact: true }).click();
    return { page, errors, context };
  };

  test("a tenant's privileged service is refused with the reason; an admin allows it on the account page", async () => {
    const refused = await privilegedService("root");
    await refused.page
      .locator("form .error", { hasText: /privileged: namespace carol is not allowed privileged containers/ })
      .waitFor();
    await screenshot(refused.page, "privilege-refused");
    await refused.page.goto("/#/account");
    const mine = refused.page.locator(".card", { has: refused.page.getByRole("heading", { name: "carol" }) });
    await mine.getByText("Privileged containers").waitFor();
    assert.equal(await mine.getByRole("button", { name: "Save privileges" }).count(), 0);
    assert.deepEqual(
      refused.errors.filter((e) => !/status of 403/.test(e)),
      [],
    );
    await refused.context.close();

    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto("/#/account");
    await page.getByLabel("Another namespace").fill("carol");
    await page.getByRole("button", { name: "Show privileges" }).click();
    const card = page.locator(".card", { has: page.getByRole("heading", { name: "carol" }) });
    await card.locator('input[name="host_paths"]').fill("srv/data");
    await card.getByRole("button", { name: "Save privileges" }).click();
    await card.locator(".error", { hasText: /privileges\.host_paths\[0\]/ }).waitFor();
    await card.locator('input[name="host_paths"]').fill("/srv/data");
    await card.locator('input[name="privileged"]').check();
    await card.getByRole("button", { name: "Save privileges" }).click();
    await card.locator("dd", { hasText: "/srv/data" }).waitFor();
    await screenshot(page, "privileges-allowed");
    const ns = await suite.berth.api("GET", "/api/v1.1/namespaces/carol/");
    assert.equal(ns.body.privileges.privileged, true);
    assert.deepEqual(ns.body.privileges.host_paths, ["/srv/data"]);
    assert.deepEqual(
      errors.filter((e) => !/status of 400/.test(e)),
      [],
    );
    await context.close();

    const allowed = await privilegedService("root");
    await allowed.page.waitForURL(/#\/services\/[0-9a-f-]{36}/);
    await allowed.context.close();
  });
});
