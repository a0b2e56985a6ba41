// The dashboard's exec terminal on a real engine: a container on a `local` node (a Docker engine
// on this host), its page in Chromium, a terminal (xterm.js over the exec stream, on a TTY), and
// the output of a command typed into it read back from the screen.
//
// Needs root, dockerd, iproute2, iptables, busybox-static and Chromium; under CI=true a missing
// one fails the file instead of skipping it.
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import type { Browser } from "playwright-core";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";
import { deployLocalCluster, localNodesUnavailable, tearDownLocalLab } from "../support/local-lab.ts";
import {
  browserUnavailable,
  ensureBuilt,
  launchChromium,
  openPage,
  screenshot,
  signInAs,
} from "../web/browser.ts";

// A lab range and bridge of this file's own (see the other files of test/real/).
const LAB_RANGE = "10.219.0.0/16";
const BRIDGE = "berth-w0";

const unavailable =
  (await localNodesUnavailable({ labRange: LAB_RANGE, bridgeName: BRIDGE })) ?? browserUnavailable();

describe("the dashboard's terminal on a real engine", { skip: unavailable ?? false }, () => {
  let h: Harness;
  let alice: Caller;
  let browser: Browser | undefined;
  let base = "";
  const nodeUuids: string[] = [];

  before(async () => {
    await ensureBuilt();
    h = await startHarness({
      env: {
        BERTH_LOCAL_LAB_RANGE: LAB_RANGE,
        BERTH_LOCAL_BRIDGE: BRIDGE,
        BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
      },
    });
    alice = await createUser(h, "alice");
    await h.app.listen({ host: "127.0.0.1", port: 0 });
    base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  });

  after(async () => {
    await browser?.close();
    await tearDownLocalLab(h, { nodeUuids });
  });

  test("a command typed into the terminal prints its output on the screen", {
    timeout: 180_000,
  }, async () => {
    const deployed = await deployLocalCluster(h, alice, { name: "term", targetNumNodes: 1, intervalMs: 200 });
    nodeUuids.push(...deployed.nodeUuids);
    const service = await call(h, alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "shell",
      run_command: "httpd -f -p 80",
    });
    assert.equal(service.status, 201, service.raw);
    assert.equal((await call(h, alice, "POST", `${service.body.resource_uri}start/`)).status, 202);
    const container = await waitFor(
      "a Running container",
      async () => {
        const list = await call(
          h,
          alice,
          "GET",
          `/api/app/v1/container/?service=${service.body.resource_uri}`,
        );
        return list.body.objects.find((c: { state: string }) => c.state === "Running");
      },
      60_000,
      200,
    );

    browser = await launchChromium();
    const { page, errors, context } = await openPage(browser, base);
    await signInAs(page, "alice", alice.password);
    await page.goto(`/#/containers/${container.uuid}`);
    await page.getByRole("heading", { name: `Container ${container.name}` }).waitFor();
    await page.getByRole("button", { name: "Open terminal" }).click();
    await page.locator(".terminal .log-status", { hasText: "connected" }).waitFor({ timeout: 20_000 });
    await page.locator(".xterm-helper-textarea").focus();
    // The output differs from the typed line, so only the shell's answer can match.
    await page.keyboard.type("printf 'dash%sboard\\n' -real-");
    await page.keyboard.press("Enter");
    await page.locator(".xterm-rows", { hasText: "dash-real-board" }).waitFor({ timeout: 20_000 });
    await screenshot(page, "terminal-real-engine");
    await page.keyboard.type("exit 3");
    await page.keyboard.press("Enter");
    await page
      .locator(".terminal .log-status", { hasText: "exited with code 3" })
      .waitFor({ timeout: 20_000 });
    assert.deepEqual(errors, []);
    await context.close();
  });
});
