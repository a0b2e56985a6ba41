// Sessions in the browser: a second user's session sees none of the first user's objects (lists,
// direct addresses, the events stream), and sign-out ends the session on the API and the
// streams. Also: the pages at phone width, keyboard navigation, and a terminal on a simulated
// node's container.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Browser } from "playwright-core";
import WebSocket from "ws";
import {
  ADMIN_PASSWORD,
  type BerthProcess,
  browserUnavailable,
  ensureBuilt,
  launchChromium,
  openPage,
  screenshot,
  signInAs,
  startBerth,
} from "./browser.ts";

const unavailable = browserUnavailable();

function upgradeStatus(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.once("open", () => {
      ws.close();
      resolve(101);
    });
    ws.once("unexpected-response", (_req, res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    ws.once("error", reject);
  });
}

describe("sessions in Chromium", { skip: unavailable }, () => {
  let berth: BerthProcess;
  let browser: Browser;
  let adminService: { uuid: string; resource_uri: string };

  before(async () => {
    await ensureBuilt();
    berth = await startBerth();
    browser = await launchChromium();
    const bob = await berth.api("POST", "/api/v1.1/users/", {
      username: "bob",
      email: "bob@example.test",
      password: "bob-password-1",
    });
    assert.equal(bob.status, 201);
    // The admin's objects: a node cluster on a simulated provider, a service running on it.
    const cluster = await berth.api("POST", "/api/infra/v1/nodecluster/", {
      name: "adminnodes",
      region: "/api/infra/v1/region/digitalocean/nyc1/",
      node_type: "/api/infra/v1/nodetype/digitalocean/1gb/",
      target_num_nodes: 1,
    });
    assert.equal(cluster.status, 201);
    assert.equal((await berth.api("POST", `${cluster.body.resource_uri}deploy/`)).status, 202);
    // The service is started by the first test: its node must be there by then (a start with no
    // node to place on fails, and the service would never run).
    await waitForState(berth, cluster.body.resource_uri, "Deployed");
    const svc = await berth.api("POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "secretapp",
      run_command: "httpd -f -p 80",
    });
    assert.equal(svc.status, 201);
    adminService = svc.body;
  });
  after(async () => {
    await browser?.close();
    await berth?.stop();
  });

  test("a second user's session sees none of the first user's objects", async () => {
    const { page, errors, context } = await openPage(browser, berth.url);
    await signInAs(page, "bob", "bob-password-1");
    const options = await page.locator('select[name="namespace"] option').allTextContents();
    assert.deepEqual(options, ["bob"]);
    await page.getByRole("link", { name: "Services", exact: true }).click();
    await page.getByText("No services in this namespace yet.").waitFor();
    await page.getByRole("link", { name: "Node clusters", exact: true }).click();
    await page.getByText("No node clusters yet.").waitFor();
    // Something the admin does now reaches no page of bob's (the events stream is bob's own).
    const frames: string[] = [];
    page.on("websocket", (ws) => ws.on("framereceived", (f) => frames.push(String(f.payload))));
    await page.reload();
    await page.getByText("No node clusters yet.").waitFor();
    await page.locator(".live.live").waitFor();
    assert.equal((await berth.api("POST", `${adminService.resource_uri}start/`)).status, 202);
    // The admin's address typed in: the same 404 sentence as for a missing object.
    await page.goto(`/#/services/${adminService.uuid}`);
    await page.locator(".error").waitFor();
    assert.match((await page.locator(".error").textContent()) ?? "", /not found|no such|does not exist/i);
    await page.waitForTimeout(1500);
    assert.deepEqual(
      frames.filter((f) => f.includes("/admin/")),
      [],
      "no event of the admin's namespace reached bob's page",
    );
    await screenshot(page, "second-user");
    assert.deepEqual(
      errors.filter((e) => !/status of 404/.test(e)),
      [],
    );
    await context.close();
  });

  test("sign-out ends the session: the cookie no longer works on the API or a stream", async () => {
    const { page, errors, context } = await openPage(browser, berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    const cookie = (await context.cookies()).find((c) => c.name === "berth_session");
    assert.ok(cookie, "the session cookie is set");
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, "Strict");
    assert.equal(await page.evaluate(() => document.cookie), "", "the page's script cannot read it");
    assert.equal(
      await page.evaluate(() => JSON.stringify(localStorage)),
      "{}",
      "nothing kept in localStorage",
    );
    const headers = { cookie: `berth_session=${cookie.value}` };
    const wsUrl = `${berth.url.replace("http", "ws")}/api/audit/v1/events/`;
    assert.equal((await fetch(`${berth.url}/api/app/v1/service/`, { headers })).status, 200);
    assert.equal(await upgradeStatus(wsUrl, { ...headers, origin: berth.url }), 101);

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("button", { name: "Sign in" }).waitFor();
    await screenshot(page, "signin");
    assert.equal((await fetch(`${berth.url}/api/app/v1/service/`, { headers })).status, 401);
    assert.equal(await upgradeStatus(wsUrl, { ...headers, origin: berth.url }), 401);
    assert.equal((await context.cookies()).filter((c) => c.name === "berth_session").length, 0);
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("at phone width the pages work through the menu, and the keyboard reaches every section", async () => {
    const { page, errors, context } = await openPage(browser, berth.url, { width: 390, height: 844 });
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.getByRole("button", { name: "Menu" }).click();
    await page.getByRole("link", { name: "Services", exact: true }).click();
    await page.locator("tr", { hasText: "secretapp" }).waitFor();
    await screenshot(page, "phone-services");
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 390, `the page fits the phone's width (${width}px)`);

    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto("/#/");
    await page.locator(".tile").first().waitFor();
    // Tab from the top reaches the navigation; Enter on a link opens its section.
    let reached = false;
    for (let i = 0; i < 40 && !reached; i++) {
      await page.keyboard.press("Tab");
      reached = (await page.evaluate(() => document.activeElement?.textContent)) === "Account";
    }
    assert.ok(reached, "the Account link is reachable with Tab");
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Account" }).waitFor();
    await page.getByRole("heading", { name: "API keys" }).waitFor();
    await page.getByLabel("Label").fill("laptop");
    await page.getByRole("button", { name: "Create key" }).click();
    await page.locator(".secret-once code.secret").waitFor();
    const key = (await page.locator(".secret-once code.secret").textContent()) ?? "";
    const auth = `Basic ${Buffer.from(`admin:${key}`).toString("base64")}`;
    assert.equal((await fetch(`${berth.url}/auth/`, { headers: { authorization: auth } })).status, 200);
    await screenshot(page, "account");
    await page.getByRole("button", { name: "Done" }).click();
    assert.equal(await page.locator("code.secret").count(), 0, "the key is shown once");
    await page.goto("/#/registries");
    await page.getByRole("heading", { name: "Registries and repositories" }).waitFor();
    await screenshot(page, "registries");
    await page.goto("/#/nodes");
    await page.locator("tr", { hasText: "Deployed" }).first().waitFor({ timeout: 20_000 });
    await screenshot(page, "nodes");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("a terminal without a TTY (line mode) on a simulated node's container runs a typed command", async () => {
    await waitForState(berth, adminService.resource_uri, "Running");
    const list = await berth.api("GET", `/api/app/v1/container/?service=${adminService.resource_uri}`);
    const container = list.body.objects[0];
    const { page, errors, context } = await openPage(browser, berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto(`/#/containers/${container.uuid}`);
    // The simulated engine has no terminal line discipline: the dashboard edits the line itself.
    // The page renders again once the container's live data arrives: uncheck once it has settled.
    await page.getByRole("button", { name: "Open terminal" }).waitFor();
    for (let attempt = 0; (await page.getByLabel("TTY").isChecked()) && attempt < 5; attempt++) {
      await page
        .getByLabel("TTY")
        .uncheck({ timeout: 2_000 })
        .catch(() => undefined);
    }
    assert.equal(await page.getByLabel("TTY").isChecked(), false, "line mode chosen");
    await page.getByRole("button", { name: "Open terminal" }).click();
    await page.locator(".terminal .log-status", { hasText: "connected" }).waitFor({ timeout: 20_000 });
    await page.locator(".xterm-helper-textarea").focus();
    await page.keyboard.type("printf 'sim%sterm\\n' -fake-");
    await page.keyboard.press("Enter");
    await page.locator(".xterm-rows", { hasText: "sim-fake-term" }).waitFor({ timeout: 20_000 });
    await screenshot(page, "terminal");
    assert.deepEqual(errors, []);
    await context.close();
  });
});

async function waitForState(berth: BerthProcess, uri: string, state: string): Promise<void> {
  let last = "";
  for (let i = 0; i < 200; i++) {
    last = (await berth.api("GET", uri)).body.state;
    if (last === state) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${uri} did not reach ${state} (still ${last})`);
}
