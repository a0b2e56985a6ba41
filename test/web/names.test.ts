// Names, not ids, in a real Chromium: regions and node types by their labels, and services,
// stacks, nodes, clusters and link targets by their names, each linked to its page; no uuid prefix
// or API URI in their place.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ADMIN_PASSWORD, browserSuite, browserUnavailable, openPage, row, signInAs } from "./browser.ts";
import { simulatedCluster, until } from "./fixtures.ts";

const unavailable = browserUnavailable();

describe("names in Chromium", { skip: unavailable }, () => {
  const suite = browserSuite();

  test("regions, node types, clusters, stacks, services and link targets by name, linked", async () => {
    const cluster = await simulatedCluster(suite.berth, "named");
    const stack = await suite.berth.api("POST", "/api/app/v1/stack/", {
      name: "shop",
      services: [
        { name: "db", image: "busybox:local", run_command: "httpd -f -p 5432" },
        { name: "web", image: "busybox:local", run_command: "httpd -f -p 80", links: ["db:database"] },
      ],
    });
    assert.equal(stack.status, 201, JSON.stringify(stack.body));
    assert.equal((await suite.berth.api("POST", `${stack.body.resource_uri}start/`)).status, 202);
    await until(
      "the stack Running",
      async () => (await suite.berth.api("GET", stack.body.resource_uri)).body.state === "Running",
    );
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    const uuidLike = /\b[0-9a-f]{8}\b|\/api\//;

    await page.goto(`/#/nodeclusters/${cluster.split("/").filter(Boolean).at(-1)}`);
    await page.locator(".facts", { hasText: "New York 1" }).waitFor();
    await page.locator(".facts", { hasText: "1 GB" }).first().waitFor();

    await page.goto("/#/services");
    await row(page, "web").getByRole("link", { name: "shop", exact: true }).waitFor();
    await page.goto("/#/containers");
    const web1 = row(page, "web-1");
    await web1.getByRole("link", { name: "web", exact: true }).waitFor();
    await web1.locator('td[data-label="Node"] a').waitFor();
    await page.waitForFunction(
      () => !document.querySelector('tr td[data-label="Node"] a')?.textContent?.includes("…"),
    );
    const nodes = (await suite.berth.api("GET", "/api/infra/v1/node/")).body.objects as {
      external_fqdn: string;
    }[];
    const nodeName = await web1.locator('td[data-label="Node"] a').innerText();
    assert.ok(
      nodes.some((n) => n.external_fqdn === nodeName),
      `the node by its name: ${nodeName}`,
    );
    assert.doesNotMatch(await web1.locator('td[data-label="Service"]').innerText(), uuidLike);

    await web1.getByRole("link", { name: "web", exact: true }).click();
    await page.getByRole("heading", { name: "Service web" }).waitFor();
    const facts = page.locator(".facts");
    await facts.getByRole("link", { name: "shop", exact: true }).waitFor();
    await facts.getByRole("link", { name: "db", exact: true }).waitFor();
    assert.match(await facts.innerText(), /database → db/);
    await facts.getByRole("link", { name: "db", exact: true }).click();
    await page.getByRole("heading", { name: "Service db" }).waitFor();
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("a stack's topology: its services as boxes and an arrow for each link, named", async () => {
    const stack = (await suite.berth.api("GET", "/api/app/v1/stack/?name=shop")).body.objects[0];
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto(`/#/stacks/${stack.uuid}`);
    const topo = page.getByRole("figure", { name: "Topology" });
    const web = topo.locator('[data-service="web"]');
    const db = topo.locator('[data-service="db"]');
    await web.getByRole("link", { name: "web" }).waitFor();
    await db.getByRole("link", { name: "db" }).waitFor();
    assert.equal(await topo.locator(".edge").count(), 1);
    assert.equal(await topo.locator(".edge-label").textContent(), "database");
    const [w, d] = [await web.boundingBox(), await db.boundingBox()];
    assert.ok(w && d && w.x < d.x, "web, which links to db, is drawn left of it");
    await web.getByRole("link", { name: "web" }).click();
    await page.getByRole("heading", { name: "Service web" }).waitFor();
    assert.deepEqual(errors, []);
    await context.close();
  });
});
