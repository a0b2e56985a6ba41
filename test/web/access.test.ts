// Access that ends, from the dashboard's account page (issue 26): a password change needs the
// current password and signs out the other browsers; "Sign out everywhere" ends this browser's
// session too; an administrator deactivates a user by name and that user can no longer sign in.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Page } from "playwright-core";
import {
  ADMIN_PASSWORD,
  browserSuite,
  browserUnavailable,
  openPage,
  screenshot,
  signInAs,
} from "./browser.ts";

const unavailable = browserUnavailable();

describe("access that ends, in Chromium", { skip: unavailable }, () => {
  const suite = browserSuite(["dana"]);

  const cookieOf = async (page: Page) => {
    const c = (await page.context().cookies()).find((x) => x.name === "berth_session");
    return c ? `berth_session=${c.value}` : "";
  };
  const statusWith = async (cookie: string) =>
    (await fetch(`${suite.berth.url}/api/app/v1/service/`, { headers: { cookie } })).status;

  test("a password change signs out the other suite.browser; sign out everywhere ends this one", async () => {
    const here = await openPage(suite.browser, suite.berth.url);
    const there = await openPage(suite.browser, suite.berth.url);
    await signInAs(there.page, "dana", "dana-password-1");
    const otherCookie = await cookieOf(there.page);
    await signInAs(here.page, "dana", "dana-password-1");
    await here.page.goto("/#/account");
    await here.page.getByRole("heading", { name: "Password and sessions" }).waitFor();
    await here.page.locator('input[autocomplete="current-password"]').fill("dana-password-1");
    await here.page.locator('input[autocomplete="new-password"]').nth(0).fill("dana-password-2");
    await here.page.locator('input[autocomplete="new-password"]').nth(1).fill("dana-password-2");
    await here.page.getByRole("button", { name: "Change password" }).click();
    await here.page.getByText("1 other session(s) and 0 access token(s) ended.").waitFor();
    await screenshot(here.page, "account-password");
    assert.equal(await statusWith(otherCookie), 401, "the other browser's session ended");
    assert.equal(await statusWith(await cookieOf(here.page)), 200, "this browser's session stays");

    await here.page.getByRole("button", { name: "Sign out everywhere" }).click();
    await here.page.getByRole("button", { name: "Sign in" }).waitFor();
    await signInAs(here.page, "dana", "dana-password-2");
    assert.deepEqual(here.errors, []);
    await here.context.close();
    await there.context.close();
  });

  test("an administrator deactivates a user from the users page; the user can no longer sign in", async () => {
    const admin = await openPage(suite.browser, suite.berth.url);
    await signInAs(admin.page, "admin", ADMIN_PASSWORD);
    await admin.page.goto("/#/users");
    await admin.page.getByRole("searchbox", { name: "Search" }).fill("dana");
    const row = admin.page.getByRole("table", { name: "Users" }).locator("tr", { hasText: "dana" });
    await row.getByRole("button", { name: "Deactivate", exact: true }).click();
    await row.locator(".state", { hasText: "Deactivated" }).waitFor();
    const signin = await fetch(`${suite.berth.url}/api/session/`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ username: "dana", password: "dana-password-2" }),
    });
    assert.equal(signin.status, 401);
    await row.getByRole("button", { name: "Activate", exact: true }).click();
    await row.locator(".state", { hasText: /^Active$/ }).waitFor();
    const dana = await openPage(suite.browser, suite.berth.url);
    await signInAs(dana.page, "dana", "dana-password-2");
    await dana.context.close();
    assert.deepEqual(admin.errors, []);
    await admin.context.close();
  });
});
