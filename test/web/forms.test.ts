// Forms that help, in a real Chromium against a Berth server process: a refused field's problem
// shown once, next to that field, and gone once the field is edited; the node cluster form's
// default disk is one its provider accepts, and a cluster created with it is made; terminated
// objects hidden from lists (unless asked for) and from the overview's counts.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ADMIN_PASSWORD, browserSuite, browserUnavailable, openPage, signInAs } from "./browser.ts";

const unavailable = browserUnavailable();

describe("dashboard forms in Chromium", { skip: unavailable }, () => {
  const suite = browserSuite();

  test("a bad image: its problem once, next to the Image field, gone after the field is edited", async () => {
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto("/#/services/new");
    const image = page.locator('input[name="image"]');
    await image.fill("not an image");
    await page.getByRole("button", { name: "Create", exact: true }).click();
    const problem = page.locator('[data-field="image"] .field-error');
    await problem.waitFor();
    assert.match(await problem.innerText(), /must be an image name/);
    const text = await page.locator("main, body").first().innerText();
    assert.equal(text.split("must be an image name").length - 1, 1, `printed once: ${text}`);
    assert.match(await page.locator("p.error").innerText(), /Correct the field marked above/);
    await image.fill("busybox:local");
    await problem.waitFor({ state: "detached" });
    assert.equal(await page.locator("p.error").count(), 0, "nothing left under the form");
    assert.deepEqual(
      errors.filter((e) => !/status of 400/.test(e)),
      [],
    );
    await context.close();
  });

  test("the SoftLayer cluster form's default disk is one of its sizes, and creating with it works", async () => {
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto("/#/nodeclusters/new");
    await page.getByLabel("Name", { exact: true }).fill("fixed-sizes");
    await page.locator('select[name="provider"]').selectOption("/api/infra/v1/provider/softlayer/");
    await page.locator('select[name="region"] option').nth(1).waitFor({ state: "attached" });
    const region = await page.locator('select[name="region"] option').nth(1).getAttribute("value");
    await page.locator('select[name="region"]').selectOption(region!);
    await page.locator('select[name="node_type"] option').nth(1).waitFor({ state: "attached" });
    const type = await page.locator('select[name="node_type"] option').nth(1).getAttribute("value");
    await page.locator('select[name="node_type"]').selectOption(type!);
    const first = page.locator('select[name="disk"] option').first();
    assert.equal(await first.innerText(), "default (75)");
    await page.getByRole("button", { name: "Create", exact: true }).click();
    await page.getByRole("heading", { name: "Node cluster fixed-sizes" }).waitFor();
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("a terminated cluster: hidden from the list and the overview's count until Hide terminated is unticked", async () => {
    const gone = await suite.berth.api("POST", "/api/infra/v1/nodecluster/", {
      name: "gone",
      region: "/api/infra/v1/region/digitalocean/nyc1/",
      node_type: "/api/infra/v1/nodetype/digitalocean/1gb/",
    });
    assert.equal(gone.status, 201);
    assert.equal((await suite.berth.api("DELETE", gone.body.resource_uri)).status, 202);
    for (let i = 0; (await suite.berth.api("GET", gone.body.resource_uri)).body.state !== "Terminated"; i++) {
      assert.ok(i < 200, "the cluster to be Terminated");
      await new Promise((r) => setTimeout(r, 50));
    }
    const live = (await suite.berth.api("GET", "/api/infra/v1/nodecluster/?state__not=Terminated")).body.meta
      .total_count;
    const all = (await suite.berth.api("GET", "/api/infra/v1/nodecluster/")).body.meta.total_count;
    assert.equal(all, live + 1);
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    const tile = page.locator("a.tile", { hasText: "Node clusters" });
    await tile.waitFor();
    assert.equal(await tile.locator(".tile-n").innerText(), String(live));
    await page.getByRole("link", { name: "Node clusters", exact: true }).first().click();
    await page.getByRole("link", { name: "fixed-sizes", exact: true }).waitFor();
    assert.equal(await page.getByRole("link", { name: "gone", exact: true }).count(), 0);
    await page.getByLabel("Hide terminated").uncheck();
    await page.getByRole("link", { name: "gone", exact: true }).waitFor();
    assert.deepEqual(errors, []);
    await context.close();
  });
});
