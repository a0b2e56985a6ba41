// `npm run screenshots`: the dashboard's pages as a person sees them, into docs/screenshots/ —
// the overview, a service, a container with its terminal, the actions page and a form with an
// error, at 1366 px and 390 px, light and dark. A Berth process with a simulated cluster, a stack
// (web linked to db) and a service that crashed on start is set up first, as a trial user's would be.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import {
  ADMIN_PASSWORD,
  type BerthProcess,
  ensureBuilt,
  launchChromium,
  signInAs,
  startBerth,
} from "../test/web/browser.ts";
import { containersOf, simulatedCluster, until } from "../test/web/fixtures.ts";

const OUT = path.resolve(import.meta.dirname, "..", "docs", "screenshots");
const SIZES = [
  { name: "1366", viewport: { width: 1366, height: 860 } },
  { name: "390", viewport: { width: 390, height: 844 } },
] as const;
const SCHEMES = ["light", "dark"] as const;

async function setUp(berth: BerthProcess): Promise<{ web: string; container: string }> {
  await simulatedCluster(berth, "demo", 2);
  const stack = await berth.api("POST", "/api/app/v1/stack/", {
    name: "shop",
    services: [
      { name: "db", image: "busybox:local", run_command: 'sh -c "echo db ready; httpd -f -p 5432"' },
      {
        name: "web",
        image: "busybox:local",
        run_command: 'sh -c "echo listening on 80; httpd -f -p 80"',
        links: ["db:database"],
        target_num_containers: 2,
      },
    ],
  });
  assert.equal(stack.status, 201, JSON.stringify(stack.body));
  await berth.api("POST", `${stack.body.resource_uri}start/`);
  await until(
    "the stack Running",
    async () => (await berth.api("GET", stack.body.resource_uri)).body.state === "Running",
    60_000,
  );
  const crash = await berth.api("POST", "/api/app/v1/service/", {
    image: "busybox:local",
    name: "worker",
    run_command: 'sh -c "echo missing QUEUE_URL; exit 3"',
  });
  await berth.api("POST", `${crash.body.resource_uri}start/`);
  await until(
    "the crash",
    async () => (await containersOf(berth, crash.body.resource_uri))[0]?.exit_code === 3,
  );
  const web = (await berth.api("GET", "/api/app/v1/service/?name=web")).body.objects[0];
  const [container] = await containersOf(berth, web.resource_uri);
  return { web: web.uuid, container: container.uuid };
}

async function shoot(page: Page, name: string): Promise<void> {
  await page.waitForTimeout(400);
  await page.screenshot({ path: path.join(OUT, `${name}.png`) });
  process.stdout.write(`docs/screenshots/${name}.png\n`);
}

async function pages(browser: Browser, berth: BerthProcess, ids: { web: string; container: string }) {
  for (const size of SIZES) {
    for (const scheme of SCHEMES) {
      const context = await browser.newContext({
        viewport: size.viewport,
        colorScheme: scheme,
        baseURL: berth.url,
        deviceScaleFactor: 1,
      });
      const page = await context.newPage();
      const suffix = `${size.name}-${scheme}`;
      await signInAs(page, "admin", ADMIN_PASSWORD);
      await page.locator("a.tile .tile-parts").first().waitFor();
      await shoot(page, `overview-${suffix}`);

      await page.goto(`/#/services/${ids.web}`);
      await page.locator(".log-lines", { hasText: "listening on 80" }).waitFor({ timeout: 15_000 });
      await shoot(page, `service-${suffix}`);

      await page.goto(`/#/containers/${ids.container}`);
      await page.getByRole("heading", { name: /^Container /, level: 1 }).waitFor();
      // xterm draws only while it is on screen.
      await page.locator(".terminal").scrollIntoViewIfNeeded();
      await page.getByRole("button", { name: "Open terminal" }).click();
      await page.locator(".log-status", { hasText: "connected" }).waitFor();
      await page.locator(".xterm-rows div", { hasText: "/ #" }).first().waitFor();
      await page.keyboard.type("echo hello from the terminal");
      await page.keyboard.press("Enter");
      await page.keyboard.type("hostname");
      await page.keyboard.press("Enter");
      await page.locator(".xterm-rows div", { hasText: "hello from the terminal" }).first().waitFor();
      await page.locator(".xterm-host").scrollIntoViewIfNeeded();
      await shoot(page, `container-terminal-${suffix}`);

      await page.goto("/#/actions");
      await page.locator("table tbody tr").first().waitFor();
      await shoot(page, `actions-${suffix}`);

      await page.goto("/#/services/new");
      await page.locator('input[name="image"]').fill("not an image");
      await page.getByRole("button", { name: "Create", exact: true }).click();
      await page.locator('[data-field="image"] .field-error').waitFor();
      await page.locator('[data-field="image"]').scrollIntoViewIfNeeded();
      await shoot(page, `form-error-${suffix}`);
      await context.close();
    }
  }
}

fs.mkdirSync(OUT, { recursive: true });
await ensureBuilt();
const berth = await startBerth({ BERTH_SIM_DELAY_FACTOR: "0.1" });
const browser = await launchChromium();
try {
  await pages(browser, berth, await setUp(berth));
} finally {
  await browser.close();
  await berth.stop();
}
