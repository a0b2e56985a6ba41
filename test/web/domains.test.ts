// A service's Domains section in a real Chromium (issue 30): a domain added from the service's
// page shows its certificate once the router has it, a domain whose ACME order fails shows the
// ACME server's error there (a simulated node's router refuses names under `.invalid`, as a real
// ACME server does), and a domain is removed from the same table.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ADMIN_PASSWORD, browserSuite, browserUnavailable, openPage, signInAs } from "./browser.ts";
import { simulatedCluster, startedService } from "./fixtures.ts";

const unavailable = browserUnavailable();

describe("the Domains section in Chromium", { skip: unavailable }, () => {
  const suite = browserSuite([], { BERTH_ROUTER_INTERVAL_MS: "500" });

  test("add a domain, see its certificate issued; one whose order fails shows the error; remove it", async () => {
    await simulatedCluster(suite.berth, "edge");
    const svc = await startedService(suite.berth, {
      image: "busybox:local",
      name: "site",
      run_command: "sleep 100000",
      container_ports: [{ protocol: "tcp", inner_port: 8080 }],
    });
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto(`/#/services/${svc.uuid}`);
    await page.getByRole("heading", { name: "Service site" }).waitFor();
    const section = page.getByRole("region", { name: "Domains" });
    await section.getByText("No domain").waitFor();

    const add = async (host: string) => {
      await section.getByLabel("Host name").fill(host);
      await section.getByRole("button", { name: "Add domain" }).click();
      await section.getByRole("cell", { name: host, exact: true }).waitFor();
    };
    const rowOf = (host: string) =>
      section.locator("tr", { has: page.getByRole("cell", { name: host, exact: true }) });

    await add("shop.example.test");
    await rowOf("shop.example.test").getByRole("cell", { name: "issued", exact: true }).waitFor();

    await add("broken.invalid");
    const alert = rowOf("broken.invalid").getByRole("alert");
    await alert.waitFor();
    assert.match((await alert.textContent()) ?? "", /rejectedIdentifier.*broken\.invalid/);
    assert.match((await rowOf("broken.invalid").textContent()) ?? "", /error/);

    await section.getByRole("button", { name: "Remove broken.invalid" }).click();
    await rowOf("broken.invalid").waitFor({ state: "detached" });
    const left = (await suite.berth.api("GET", svc.resource_uri)).body.domains;
    assert.deepEqual(
      left.map((d: { host: string }) => d.host),
      ["shop.example.test"],
    );
    assert.deepEqual(errors, []);
    await context.close();
  });
});
