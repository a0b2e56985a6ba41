// The administrators' users page in a real Chromium: every user listed and searchable, a new user
// (a refused field next to it, gone after an edit), deactivate and activate from the user's row;
// a user who is not an administrator has no such page in the menu.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ADMIN_PASSWORD, browserSuite, browserUnavailable, openPage, signInAs } from "./browser.ts";

const unavailable = browserUnavailable();

describe("users page in Chromium", { skip: unavailable }, () => {
  const suite = browserSuite(["carol"]);

  test("list, search, create (with a refused field), deactivate and activate", async () => {
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.getByRole("link", { name: "Users", exact: true }).click();
    const table = page.getByRole("table", { name: "Users" });
    await table.locator("tr", { hasText: "carol" }).waitFor();
    await page.getByRole("searchbox", { name: "Search" }).fill("CAR");
    await page.waitForFunction(
      () => document.querySelectorAll('table[aria-label="Users"] tbody tr').length === 1,
    );

    const form = page.getByRole("form", { name: "New user" });
    await form.getByLabel("Username").fill("dave");
    await form.getByLabel("Email").fill("dave@example.test");
    await form.getByLabel("Password").fill("short");
    await form.getByRole("button", { name: "Create user" }).click();
    const problem = form.locator('[data-field="password"] .field-error');
    await problem.waitFor();
    await form.getByLabel("Password").fill("dave-password-1");
    await problem.waitFor({ state: "detached" });
    await form.getByRole("button", { name: "Create user" }).click();
    await page.getByRole("searchbox", { name: "Search" }).fill("dave");
    const dave = table.locator("tr", { hasText: "dave" });
    await dave.locator(".state", { hasText: "Active" }).waitFor();
    await dave.getByRole("button", { name: "Deactivate" }).click();
    await dave.locator(".state.bad", { hasText: "Deactivated" }).waitFor();
    const signIn = await fetch(`${suite.berth.url}/api/session/`, {
      method: "POST",
      body: JSON.stringify({ username: "dave", password: "dave-password-1" }),
    });
    assert.equal(signIn.status, 401, "a deactivated user cannot sign in");
    await dave.getByRole("button", { name: "Activate" }).click();
    await dave.locator(".state", { hasText: /^Active$/ }).waitFor();
    assert.deepEqual(
      errors.filter((e) => !/status of 400/.test(e)),
      [],
    );
    await context.close();
  });

  test("no users page in the menu of a user who is not an administrator", async () => {
    const { page, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "carol", "carol-password-1");
    await page.getByRole("link", { name: "Services", exact: true }).waitFor();
    assert.equal(await page.getByRole("link", { name: "Users", exact: true }).count(), 0);
    await context.close();
  });
});
