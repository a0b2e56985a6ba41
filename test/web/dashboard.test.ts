// The dashboard in a real Chromium against a Berth server process: sign in, a node cluster on a
// simulated provider reaching Deployed live, a stack from a pasted YAML file turning Running
// live, a container's log line, cancel and retry, a registration command for a server of one's own
// and the attach form's refusal, namespaces kept apart, sign-out.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Browser } from "playwright-core";
import {
  ADMIN_PASSWORD,
  type BerthProcess,
  browserUnavailable,
  ensureBuilt,
  launchChromium,
  openPage,
  row,
  SCREENSHOTS,
  screenshot,
  signInAs,
  startBerth,
} from "./browser.ts";

const unavailable = browserUnavailable();

describe("dashboard in Chromium", { skip: unavailable }, () => {
  let berth: BerthProcess;
  let browser: Browser;

  before(async () => {
    await ensureBuilt();
    berth = await startBerth();
    browser = await launchChromium();
    process.stdout.write(`screenshots: ${SCREENSHOTS}\n`);
  });
  after(async () => {
    await browser?.close();
    await berth?.stop();
  });

  test("sign in, deploy a node cluster on a simulated provider and see it reach Deployed without reloading", async () => {
    const { page, errors, context } = await openPage(browser, berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await screenshot(page, "overview");
    let navigations = 0;
    page.on("framenavigated", (f) => {
      if (f === page.mainFrame() && !f.url().includes("#")) navigations++;
    });
    await page.getByRole("link", { name: "Node clusters", exact: true }).click();
    await page.getByRole("link", { name: "Create node cluster" }).click();
    await page.getByLabel("Name", { exact: true }).fill("sim1");
    await page.locator('select[name="provider"]').selectOption("/api/infra/v1/provider/digitalocean/");
    await page.locator('select[name="region"] option').nth(1).waitFor({ state: "attached" });
    const region = await page.locator('select[name="region"] option').nth(1).getAttribute("value");
    await page.locator('select[name="region"]').selectOption(region!);
    await page.locator('select[name="node_type"] option').nth(1).waitFor({ state: "attached" });
    const type = await page.locator('select[name="node_type"] option').nth(1).getAttribute("value");
    await page.locator('select[name="node_type"]').selectOption(type!);
    await page.getByLabel("Nodes").fill("2");
    await screenshot(page, "nodecluster-create");
    await page.getByRole("button", { name: "Create", exact: true }).click();
    await page.getByRole("heading", { name: "Node cluster sim1" }).waitFor();
    // The state badge changes from Deploying to Deployed from the events stream.
    await page.locator(".ops .state", { hasText: /^Deployed$/ }).waitFor({ timeout: 30_000 });
    await page.locator("tr", { hasText: "Deployed" }).nth(1).waitFor();
    assert.equal(navigations, 0, "the page was never reloaded");
    await screenshot(page, "nodecluster-deployed");
    // The operation that the state table forbids is disabled, with the API's sentence as the reason.
    const deploy = page.getByRole("button", { name: "Deploy" });
    assert.equal(await deploy.isDisabled(), true);
    assert.match(
      (await page.locator(".op", { has: deploy }).getAttribute("title")) ?? "",
      /is Deployed; deploy is allowed in Init/,
    );
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("a stack from a pasted YAML stack file starts and every service turns Running live; a container's log shows its line", async () => {
    const { page, errors, context } = await openPage(browser, berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.getByRole("link", { name: "Stacks", exact: true }).click();
    await page.getByRole("link", { name: "Create stack" }).click();
    await page.getByLabel("Stack name").fill("shop");
    await page
      .getByLabel("Stack file (YAML or JSON)")
      .fill(
        [
          "db:",
          "  image: busybox:local",
          '  command: sh -c "echo db-ready-for-berth; httpd -f -p 5432"',
          "  expose:",
          '    - "5432"',
          "web:",
          "  image: busybox:local",
          '  command: sh -c "echo web-says-hello; httpd -f -p 80"',
          "  links:",
          "    - db:database",
          "  target_num_containers: 2",
          "",
        ].join("\n"),
      );
    await page.getByRole("button", { name: "Create stack" }).click();
    await page.getByRole("heading", { name: "Stack shop" }).waitFor();
    await row(page, "db").locator(".state", { hasText: "Not running" }).waitFor();
    await page.getByRole("button", { name: "Start" }).click();
    for (const name of ["db", "web"]) {
      await row(page, name)
        .locator(".state", { hasText: /^Running$/ })
        .waitFor({ timeout: 30_000 });
    }
    await page.locator(".ops .state", { hasText: /^Running$/ }).waitFor({ timeout: 15_000 });
    await screenshot(page, "stack-running");
    // A container of web: its log shows the line it printed.
    await row(page, "web").getByRole("link", { name: "web", exact: true }).click();
    await page.getByRole("heading", { name: "Service web" }).waitFor();
    await page.locator(".log-lines", { hasText: "web-says-hello" }).waitFor({ timeout: 15_000 });
    await screenshot(page, "service");
    await page.getByRole("link", { name: "web-1" }).click();
    await page.getByRole("heading", { name: "Container web-1" }).waitFor();
    await page.locator(".log-lines", { hasText: "web-says-hello" }).waitFor({ timeout: 15_000 });
    await screenshot(page, "container");
    // Pause holds new lines back; the view stays as it is.
    await page.getByRole("button", { name: "Pause" }).click();
    await page.getByRole("button", { name: /Resume/ }).click();
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("a Pending action is canceled and a Failed one retried from its page, with its live log", async () => {
    const work = async (id: string, params: Record<string, unknown>) => {
      const res = await fetch(`${berth.url}/api/app/v1/widget/${id}/work/`, {
        method: "POST",
        headers: { authorization: berth.adminAuth },
        body: JSON.stringify(params),
      });
      assert.equal(res.status, 202);
      return res.headers.get("x-platform-action-uri")!.split("/").filter(Boolean).at(-1)!;
    };
    const { page, errors, context } = await openPage(browser, berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);

    // Ten steps of 1.4 s: the first action runs for 14 s while the second waits Pending.
    const running = await work("w1", { steps: 10, stepMs: 1400 });
    const pending = await work("w1", { steps: 1, stepMs: 10 });
    await page.goto(`/#/actions/${pending}`);
    await page.locator(".ops .state", { hasText: /^Pending$/ }).waitFor();
    await page.locator(".log-lines", { hasText: `Waiting for action ${running}` }).waitFor();
    await screenshot(page, "action-pending");
    await page.getByRole("button", { name: "Cancel" }).click();
    await page.locator(".ops .state", { hasText: /^Canceled$/ }).waitFor();
    await page.locator("button:disabled", { hasText: "Cancel" }).waitFor();

    const failed = await work("w2", { steps: 2, stepMs: 10, failAt: 1 });
    await page.goto(`/#/actions/${failed}`);
    await page.locator(".ops .state", { hasText: /^Failed$/ }).waitFor({ timeout: 15_000 });
    await page.locator(".log-lines", { hasText: "widget broke at step 1" }).waitFor();
    await screenshot(page, "action-failed");
    await page.getByRole("button", { name: "Retry" }).click();
    await page.waitForURL((u) => !u.toString().endsWith(failed));
    const retried = page.url().split("/").at(-1)!;
    assert.notEqual(retried, failed);
    const action = await berth.api("GET", `/api/audit/v1/action/${retried}/`);
    assert.equal(action.status, 200);
    assert.equal(action.body.action, "Widget Work");
    assert.match(action.body.user_agent, /Chrome/, "an action made from the dashboard records the browser");

    await page.getByRole("link", { name: "Actions", exact: true }).click();
    await page.locator("tr", { hasText: "Widget Work" }).first().waitFor();
    await screenshot(page, "actions");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("a refused call shows the API's own sentence", async () => {
    const svc = await berth.api("POST", "/api/app/v1/service/", { image: "busybox:local", name: "lonely" });
    assert.equal(svc.status, 201);
    const { page, errors, context } = await openPage(browser, berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto("/#/services/new");
    await page.locator('input[name="image"]').fill("busybox:local");
    await page.locator('input[name="name"]').fill("lonely");
    await page.getByRole("button", { name: "Create", exact: true }).click();
    await page.locator(".error", { hasText: /lonely/ }).waitFor();
    await screenshot(page, "refused");
    // The browser logs the refused call's 409 as a failed resource load; nothing else went wrong.
    assert.deepEqual(
      errors.filter((e) => !/status of 409/.test(e)),
      [],
    );
    await context.close();
  });

  test("the nodes page makes a one-time command for a server of one's own, and lists and revokes its token", async () => {
    const { page, errors, context } = await openPage(browser, berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.getByRole("link", { name: "Nodes", exact: true }).click();
    await page.getByRole("button", { name: "Create a registration command" }).click();
    const command = (await page.getByLabel("Registration command").textContent()) ?? "";
    assert.match(command, /--token \S+/, command);
    assert.ok(command.includes(berth.url), `the command names this Berth: ${command}`);
    const tokens = page.getByRole("table", { name: "Unused registration tokens" });
    await tokens.locator("tbody tr").first().waitFor();
    assert.equal(await tokens.locator("tbody tr").count(), 1);
    await screenshot(page, "nodes-bring-your-own");
    await tokens.getByRole("button", { name: "Revoke" }).click();
    await tokens.waitFor({ state: "detached" });
    const left = await berth.api("GET", "/api/infra/v1/token/");
    assert.equal(left.body.meta.total_count, 0, "the token is revoked on the server");

    // An engine URL the API refuses shows the API's sentence on the attach form.
    await page.locator('input[name="engine_url"]').fill("ftp://nowhere");
    await page.getByRole("button", { name: "Attach engine" }).click();
    await page.locator("form .error", { hasText: /Engine URL/ }).waitFor();
    assert.deepEqual(
      errors.filter((e) => !/status of 400/.test(e)),
      [],
    );
    await context.close();
  });
});
