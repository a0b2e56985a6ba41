// Honest states in a real Chromium: a container that crashed on start shows red with its exit
// code and the last lines it printed, on its service's page, its own page and the containers list;
// a running container whose health check fails shows red with what the check printed.
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

  test("a container whose health check fails: red with why, on the containers list, its service's page and the overview", async () => {
    // A simulated node runs the check itself (drivers/fake/health.ts) at the interval the service
    // names: unhealthy after one failing check, 0.2 s after the start.
    const started = Date.now();
    const made = await suite.berth.api("POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "ailing",
      run_command: "httpd -f -p 80",
      health_check: {
        type: "command",
        command: "echo cannot reach the database >&2; exit 1",
        interval: 0.2,
        timeout: 1,
        retries: 1,
      },
    });
    assert.equal(made.status, 201);
    await suite.berth.api("POST", `${made.body.resource_uri}start/`);
    const c = await until(
      "the container unhealthy",
      async () => {
        const [one] = await containersOf(suite.berth, made.body.resource_uri);
        return one?.health === "unhealthy" && one.state === "Running" ? one : undefined;
      },
      20_000,
    );
    const tookMs = Date.now() - started;
    assert.ok(tookMs < 20_000, `unhealthy after ${tookMs} ms`);

    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto("/#/containers");
    const listed = row(page, c.name);
    await listed.locator(".state.bad", { hasText: "unhealthy" }).waitFor();
    await listed.locator(".health-why", { hasText: "cannot reach the database" }).waitFor();

    await page.goto(`/#/services/${made.body.uuid}`);
    await page.getByRole("heading", { name: "Service ailing" }).waitFor();
    const mine = row(page, c.name);
    await mine.locator(".state.bad", { hasText: "unhealthy" }).waitFor();
    await mine.locator(".health-why", { hasText: "cannot reach the database" }).waitFor();

    await page.goto("/#/");
    await page
      .getByRole("region", { name: "Failing now" })
      .locator("li", { hasText: "containers" })
      .getByText(/\d+ unhealthy/)
      .waitFor();
    await page
      .locator("a.tile", { hasText: "Containers" })
      .locator(".part.bad", { hasText: /[1-9]\d* failing/ })
      .waitFor();
    assert.deepEqual(errors, []);
    await context.close();
  });
});
