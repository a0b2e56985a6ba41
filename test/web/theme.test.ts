// Dark mode in a real Chromium: the page follows the system's setting, and the toggle in the top
// bar overrides it (kept across reloads) until set back to the system's.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Page } from "playwright-core";
import { ADMIN_PASSWORD, browserSuite, browserUnavailable, signInAs } from "./browser.ts";

const unavailable = browserUnavailable();

/** The page background's brightness, 0 (black) to 255 (white). */
const brightness = (page: Page) =>
  page.evaluate(() => {
    const [r, g, b] = (getComputedStyle(document.body).backgroundColor.match(/\d+/g) ?? ["0", "0", "0"]).map(
      Number,
    );
    const bg = getComputedStyle(document.documentElement).backgroundColor;
    const [r2, g2, b2] = (bg.match(/\d+/g) ?? ["0", "0", "0"]).map(Number);
    return Math.max((r! + g! + b!) / 3, (r2! + g2! + b2!) / 3);
  });

describe("dark mode in Chromium", { skip: unavailable }, () => {
  const suite = browserSuite();

  test("follows the system (dark), the toggle chooses light and is kept, then back to the system", async () => {
    const context = await suite.browser.newContext({ colorScheme: "dark", baseURL: suite.berth.url });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await signInAs(page, "admin", ADMIN_PASSWORD);
    assert.ok((await brightness(page)) < 60, "dark, as the system says");
    const toggle = page.locator("button.theme-toggle");
    assert.equal(await toggle.getAttribute("aria-label"), "Theme: system");
    await toggle.click(); // dark
    await toggle.click(); // light
    assert.equal(await toggle.getAttribute("aria-label"), "Theme: light");
    assert.ok((await brightness(page)) > 200, "light, as chosen");
    await page.reload();
    await page.locator("button.theme-toggle").waitFor();
    assert.ok((await brightness(page)) > 200, "the choice is kept");
    await page.locator("button.theme-toggle").click(); // system
    assert.ok((await brightness(page)) < 60, "the system's again");
    assert.deepEqual(errors, []);
    await context.close();
  });
});
