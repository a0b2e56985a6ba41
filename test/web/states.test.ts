// Honest states in a real Chromium: a container that crashed on start shows red with its exit
// code and the last lines it printed, on its service's page, its own page and the containers list;
// a crash-looping container's restarts show in the lists; a running container's stats are drawn
// by uPlot and grow with the live stream, readable in light and dark; a running container whose
// health check fails shows red with what the check printed.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Page } from "playwright-core";
import {
  ADMIN_PASSWORD,
  browserSuite,
  browserUnavailable,
  openPage,
  row,
  screenshot,
  signInAs,
} from "./browser.ts";
import { containersOf, simulatedCluster, startedService, until } from "./fixtures.ts";

const unavailable = browserUnavailable();

describe("honest states in Chromium", { skip: unavailable }, () => {
  // Stats every 2 s (a live point arrives within the test; an hour is 1,800 points, under 2,000).
  const suite = browserSuite([], { BERTH_STATS_INTERVAL_MS: "2000" });

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

  test("restarts in the lists; a running container's charts drawn by uPlot, live, in light and dark", async () => {
    await simulatedCluster(suite.berth, "charts");
    const steady = await startedService(suite.berth, {
      image: "busybox:local",
      name: "steady",
      run_command: "httpd -f -p 80",
    });
    const flapper = await suite.berth.api("POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "flapper",
      autorestart: "ALWAYS",
      run_command: 'sh -c "exit 1"',
    });
    assert.equal(flapper.status, 201);
    assert.equal((await suite.berth.api("POST", `${flapper.body.resource_uri}start/`)).status, 202);
    const flapped = await until("two restarts", async () => {
      const [one] = await containersOf(suite.berth, flapper.body.resource_uri);
      return one && one.restart_count >= 2 ? one : undefined;
    });
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    const atLeastTwo = /^([2-9]|\d{2,})$/;
    await page.goto("/#/containers");
    await row(page, flapped.name).locator('td[data-label="Restarts"]', { hasText: atLeastTwo }).waitFor();
    await row(page, `${steady.name}-1`).locator('td[data-label="Restarts"]', { hasText: /^0$/ }).waitFor();
    await page.goto("/#/services");
    await row(page, "flapper").locator('td[data-label="Restarts"]', { hasText: atLeastTwo }).waitFor();
    await row(page, "flapper")
      .locator('td[data-label="Health"]', { hasText: /^crashing$/ })
      .waitFor();
    await page.goto(`/#/services/${flapper.body.uuid}`);
    await page.getByRole("heading", { name: "Service flapper" }).waitFor();
    await row(page, flapped.name).locator('td[data-label="Restarts"]', { hasText: atLeastTwo }).waitFor();

    const [c] = await containersOf(suite.berth, steady.resource_uri);
    await page.goto(`/#/containers/${c.uuid}`);
    await page.getByRole("heading", { name: `Container ${c.name}` }).waitFor();
    const charts = page.locator(".stats figure.chart");
    // Four uPlot charts, each a canvas, with their lines (CPU one; memory, network, block I/O two).
    await charts.nth(3).locator(".uplot canvas").waitFor();
    assert.equal(await page.locator(".stats .uplot canvas").count(), 4);
    const series = await charts.evaluateAll((fs) => fs.map((f) => Number(f.getAttribute("data-series"))));
    assert.deepEqual(series, [1, 2, 2, 2]);
    const legends = await charts.evaluateAll((fs) =>
      fs.map((f) => [...f.querySelectorAll(".u-legend .u-series th")].map((th) => th.textContent?.trim())),
    );
    assert.deepEqual(
      legends.map((l) => l.filter(Boolean)),
      [["of a core"], ["used", "limit"], ["in", "out"], ["read", "write"]],
    );
    // A live point arrives (a round every 2 s) without reloading.
    const pointsNow = async () => Number(await charts.first().getAttribute("data-points"));
    const before = await until("a first point", async () => (await pointsNow()) || undefined, 15_000);
    await until("a live point", async () => (await pointsNow()) > before, 15_000);
    await screenshot(page, "stats-charts-light");
    // The axes' labels are drawn in the theme's muted ink: dark grey on light, light grey on dark.
    const lightInk = await mutedInk(page);
    assert.ok((await inkPixels(page, lightInk)) > 20, `axis labels in ${lightInk}`);
    await page.locator("button.theme-toggle").click(); // dark
    await page.locator("html[data-theme=dark]").waitFor({ state: "attached" });
    const darkInk = await mutedInk(page);
    assert.notEqual(darkInk, lightInk);
    await until(
      "the charts drawn again in the dark theme's ink",
      async () => (await inkPixels(page, darkInk)) > 20 && (await inkPixels(page, lightInk)) === 0,
      5_000,
    );
    await screenshot(page, "stats-charts-dark");
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

/** The theme's muted ink now, as "r,g,b". */
function mutedInk(page: Page): Promise<string> {
  return page.evaluate(() => {
    const probe = document.createElement("span");
    probe.style.color = "var(--muted)";
    document.body.append(probe);
    const rgb = (getComputedStyle(probe).color.match(/\d+/g) ?? []).slice(0, 3).join(",");
    probe.remove();
    return rgb;
  });
}

/** Opaque pixels of the CPU chart's canvas within a few levels of the colour "r,g,b". */
function inkPixels(page: Page, rgb: string): Promise<number> {
  return page.evaluate((want) => {
    const [r, g, b] = want.split(",").map(Number) as [number, number, number];
    const canvas = document.querySelector(".stats .uplot canvas") as HTMLCanvasElement;
    const data = canvas.getContext("2d")!.getImageData(0, 0, canvas.width, canvas.height).data;
    let n = 0;
    for (let i = 0; i < data.length; i += 4) {
      if (data[i + 3]! < 220) continue;
      if (Math.abs(data[i]! - r) + Math.abs(data[i + 1]! - g) + Math.abs(data[i + 2]! - b) <= 12) n++;
    }
    return n;
  }, rgb);
}
