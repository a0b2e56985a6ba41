// The exec terminal in a real Chromium on a simulated node, in its default TTY mode: a command
// runs on Enter, each on its own line; no terminal is offered on a terminated container.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ADMIN_PASSWORD, browserSuite, browserUnavailable, openPage, signInAs } from "./browser.ts";
import { containersOf, simulatedCluster, startedService, until } from "./fixtures.ts";

const unavailable = browserUnavailable();

describe("exec terminal in Chromium", { skip: unavailable }, () => {
  const suite = browserSuite();

  test("TTY on a simulated node: Enter runs the command, and the lines stay apart", async () => {
    await simulatedCluster(suite.berth, "term");
    const svc = await startedService(suite.berth, {
      image: "busybox:local",
      name: "shell",
      run_command: "httpd -f -p 80",
    });
    const [c] = await containersOf(suite.berth, svc.resource_uri);
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto(`/#/containers/${c.uuid}`);
    await page.getByRole("heading", { name: `Container ${c.name}` }).waitFor();
    assert.equal(await page.getByLabel("TTY").isChecked(), true, "TTY is the default");
    await page.getByRole("button", { name: "Open terminal" }).click();
    await page.locator(".log-status", { hasText: "connected" }).waitFor();
    const rows = page.locator(".xterm-rows");
    await rows.locator("div", { hasText: "/ #" }).first().waitFor();
    await page.keyboard.type("echo first-line");
    await page.keyboard.press("Enter");
    await page.keyboard.type("echo second-line");
    await page.keyboard.press("Enter");
    const lines = await until("both outputs", async () => {
      const all = (await rows.locator(":scope > div").allInnerTexts()).map((l) => l.replace(/\s+$/, ""));
      return all.includes("second-line") ? all : undefined;
    });
    assert.ok(lines.includes("first-line"), lines.join("\n"));
    assert.ok(lines.includes("/ # echo first-line"), lines.join("\n"));
    assert.ok(lines.includes("/ # echo second-line"), lines.join("\n"));
    await page.keyboard.type("exit 3");
    await page.keyboard.press("Enter");
    await page.locator(".log-status", { hasText: "exited with code 3" }).waitFor();

    // Terminated: no terminal.
    assert.equal((await suite.berth.api("DELETE", c.resource_uri)).status, 202);
    await page.locator(".ops .state", { hasText: /^Terminated$/ }).waitFor({ timeout: 20_000 });
    assert.equal(await page.getByRole("button", { name: /Open terminal|Restart/ }).count(), 0);
    await page.getByText("The terminal opens on a running container.").waitFor();
    assert.deepEqual(errors, []);
    await context.close();
  });
});
