// Honest states in a real Chromium: a container that crashed on start shows red with its exit
// code and the last lines it printed, on its service's page, its own page and the containers list.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ADMIN_PASSWORD, browserSuite, browserUnavailable, openPage, row, signInAs } from "./browser.ts";
import { containersOf, simulatedCluster, until } from "./fixtures.ts";

const unavailable = browserUnavailable();

describe("honest states in Chromium", { skip: unavailable }, () => {
  const suite = browserSuite();

  test("a container that crashed on start: red, exit 3 and its last line, on the service and container pages", async () => {
    await simulatedCluster(suite.berth, "crash");
    const made = await suite.berth.api("POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "crasher",
      run_command: 'sh -c "echo missing DATABASE_URL; exit 3"',
    });
    assert.equal(made.status, 201);
    assert.equal((await suite.berth.api("POST", `${made.body.resource_uri}start/`)).status, 202);
    const c = await until("the container to exit", async () => {
      const [one] = await containersOf(suite.berth, made.body.resource_uri);
      return one && one.exit_code === 3 && one.state !== "Running" ? one : undefined;
    });
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto(`/#/services/${made.body.uuid}`);
    await page.getByRole("heading", { name: "Service crasher" }).waitFor();
    await page.locator(".ops .state.bad").first().waitFor();
    const panel = page.getByRole("alert", { name: "Crashed" });
    await panel.getByText(`${c.name} exited with code 3`).waitFor();
    await panel.locator(".crash-lines", { hasText: "missing DATABASE_URL" }).waitFor();
    await row(page, c.name).locator(".state.bad", { hasText: "exit 3" }).waitFor();

    await page.getByRole("link", { name: c.name, exact: true }).first().click();
    await page.getByRole("heading", { name: `Container ${c.name}` }).waitFor();
    await page.locator(".ops .state.bad", { hasText: "exit 3" }).waitFor();
    await page
      .getByRole("alert", { name: "Crashed" })
      .locator(".crash-lines", { hasText: "missing DATABASE_URL" })
      .waitFor();

    await page.goto("/#/containers");
    await row(page, c.name).locator(".state.bad", { hasText: "exit 3" }).waitFor();
    assert.deepEqual(errors, []);
    await context.close();
  });
});
