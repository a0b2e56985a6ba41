// The dashboard at 390 px in a real Chromium, and what every page shares: no cell one character per
// line and no page wider than the phone; a title per page; the focus on the page's heading after a
// navigation; times relative, with the exact time (one format) on hover.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Page } from "playwright-core";
import { ADMIN_PASSWORD, browserSuite, browserUnavailable, openPage, signInAs } from "./browser.ts";
import { containersOf, simulatedCluster, startedService } from "./fixtures.ts";

const unavailable = browserUnavailable();

/** Cells and facts squeezed into a column too narrow for their words. */
function squeezed(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const out: string[] = [];
    for (const el of document.querySelectorAll<HTMLElement>("main td, main dd")) {
      const text = (el.innerText ?? "").trim();
      if (text.length < 10) continue;
      const lh = Number.parseFloat(getComputedStyle(el).lineHeight) || 20;
      const lines = Math.round(el.getBoundingClientRect().height / lh);
      if (lines > 2 && text.length / lines < 8) out.push(`${text.slice(0, 40)} (${lines} lines)`);
    }
    return out;
  });
}

describe("layout at 390 px in Chromium", { skip: unavailable }, () => {
  const suite = browserSuite();

  test("no cell one character per line, no page wider than 390 px, a title per page, focus on the heading, one date format", async () => {
    await simulatedCluster(suite.berth, "phone");
    const svc = await startedService(suite.berth, {
      image: "busybox:local",
      name: "mobile",
      run_command: "httpd -f -p 80",
      container_ports: [{ inner_port: 80, protocol: "tcp", published: true }],
    });
    const [c] = await containersOf(suite.berth, svc.resource_uri);
    const actions = (await suite.berth.api("GET", "/api/audit/v1/action/?order_by=-start_date&limit=1")).body
      .objects;
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url, {
      width: 390,
      height: 844,
    });
    await signInAs(page, "admin", ADMIN_PASSWORD);
    const titles = new Set<string>();
    for (const [path, heading] of [
      ["/#/", "Namespace admin"],
      [`/#/services/${svc.uuid}`, "Service mobile"],
      [`/#/containers/${c.uuid}`, `Container ${c.name}`],
      ["/#/actions", "Actions"],
      [`/#/actions/${actions[0].uuid}`, `Action ${actions[0].action}`],
      ["/#/nodes", "Nodes"],
    ] as const) {
      await page.goto(path);
      await page.getByRole("heading", { name: heading, level: 1 }).waitFor();
      await page.waitForTimeout(300);
      assert.deepEqual(await squeezed(page), [], `${path}: squeezed cells`);
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(width <= 391, `${path}: the page is ${width} px wide`);
      assert.equal(await page.title(), `${heading} · Berth`);
      titles.add(await page.title());
    }
    assert.equal(titles.size, 6, "a title per page");

    // A navigation by the menu leaves the focus on the new page's heading.
    await page.getByRole("button", { name: "Menu" }).click();
    await page.getByRole("link", { name: "Containers", exact: true }).click();
    await page.getByRole("heading", { name: "Containers", level: 1 }).waitFor();
    await page.waitForFunction(() => document.activeElement?.tagName === "H1");
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Containers");

    // Times: relative words, the exact time in one format on hover; no RFC 2822 date anywhere.
    await page.goto("/#/actions");
    const time = page.locator("main time").first();
    await time.waitFor();
    assert.match(await time.innerText(), /ago$|^just now$/);
    assert.match((await time.getAttribute("title")) ?? "", /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
    for (const path of [`/#/containers/${c.uuid}`, `/#/services/${svc.uuid}`, "/#/nodes"]) {
      await page.goto(path);
      await page.locator("main h1").waitFor();
      await page.waitForTimeout(200);
      assert.doesNotMatch(
        await page.locator("main").innerText(),
        /\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d \w{3} \d{4}/,
      );
    }
    assert.deepEqual(errors, []);
    await context.close();
  });
});
