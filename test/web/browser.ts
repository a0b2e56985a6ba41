// Browser tests' support: the dashboard built once, a Berth server process on loopback, and a real
// Chromium (Debian's, driven by playwright-core). Under CI=true a missing browser fails the
// tests; elsewhere they are skipped with the reason.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { buildDashboard } from "../../web/build.ts";
import { basic, waitFor } from "../support/harness.ts";

export const CHROMIUM = process.env.BERTH_CHROMIUM ?? "/usr/bin/chromium";
const root = path.resolve(import.meta.dirname, "../..");
export const SCREENSHOTS = path.join(root, ".tmp", "screenshots");

/** Why browser tests cannot run here, or undefined. Under CI=true the reason is a failing test. */
export function browserUnavailable(): string | undefined {
  const reason = fs.existsSync(CHROMIUM)
    ? undefined
    : `no Chromium at ${CHROMIUM} (apt-get install chromium)`;
  if (reason && process.env.CI === "true") {
    test("Chromium is installed (required in CI)", () => assert.fail(reason));
  }
  return reason;
}

let built: Promise<unknown> | undefined;
/** Builds the dashboard into web/dist once per test process (browser files run one at a time). */
export function ensureBuilt(): Promise<unknown> {
  built ??= buildDashboard();
  return built;
}

export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export interface BerthProcess {
  url: string;
  adminAuth: string;
  dataDir: string;
  /** Calls the API as the administrator (API key). */
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON.
  api(method: string, p: string, body?: unknown, auth?: string): Promise<{ status: number; body: any }>;
  stop(): Promise<void>;
}

export const ADMIN_KEY = "web-test-admin-key-0123456789";
export const ADMIN_PASSWORD = "admin-password-1";

/**
 * Starts the real server entry as its own process on a free loopback port, on a fresh database
 * (with the test-only widget action kind, whose steps take as long as a test asks).
 */
export async function startBerth(env: Record<string, string> = {}): Promise<BerthProcess> {
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-web-"));
  const proc: ChildProcess = spawn(
    process.execPath,
    ["--import", "tsx", "test/support/server-with-test-kinds.ts"],
    {
      cwd: root,
      env: {
        ...process.env,
        BERTH_LISTEN: `127.0.0.1:${port}`,
        BERTH_DATA_DIR: dataDir,
        BERTH_ADMIN_USERNAME: "admin",
        BERTH_ADMIN_PASSWORD: ADMIN_PASSWORD,
        BERTH_ADMIN_API_KEY: ADMIN_KEY,
        BERTH_AUTO_ATTACH_ENGINE: "false",
        BERTH_SIM_DELAY_FACTOR: "0.3",
        BERTH_ACTION_POLL_MS: "100",
        BERTH_EVENTS_POLL_MS: "200",
        BERTH_LOG_LEVEL: "warn",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let output = "";
  proc.stdout?.on("data", (d) => (output += d));
  proc.stderr?.on("data", (d) => (output += d));
  const url = `http://127.0.0.1:${port}`;
  const adminAuth = basic("admin", ADMIN_KEY);
  await waitFor(
    `Berth on ${url}`,
    async () => {
      if (proc.exitCode !== null) throw new Error(`server exited: ${output}`);
      return (await fetch(`${url}/auth/`, { headers: { authorization: adminAuth } })).status === 200;
    },
    60_000,
    100,
  );
  return {
    url,
    adminAuth,
    dataDir,
    async api(method, p, body, auth = adminAuth) {
      const res = await fetch(`${url}${p}`, {
        method,
        headers: { authorization: auth, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined };
    },
    async stop() {
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGTERM");
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
        if (proc.exitCode === null) proc.kill("SIGKILL");
      }
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * A page of its own (own cookies) that fails the test on any console error or uncaught
 * exception; `errors` lists them.
 */
export async function openPage(
  browser: Browser,
  baseUrl: string,
  viewport = { width: 1280, height: 800 },
): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const context = await browser.newContext({ viewport, baseURL: baseUrl });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
  page.on("dialog", (d) => void d.accept());
  return { context, page, errors };
}

export async function signInAs(page: Page, username: string, password: string): Promise<void> {
  await page.goto("/");
  await page.getByLabel("Username").fill(username);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("button", { name: "Sign out" }).waitFor();
}

export async function screenshot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/**
 * The row of a table whose Name cell links to `name` exactly (an object's row: its name links to
 * it). Not any row with such a link: a row may link to another object ("web" links to "db").
 */
export function row(page: Page, name: string) {
  return page.locator("tr", {
    has: page.locator('td[data-label="Name"]').getByRole("link", { name, exact: true }),
  });
}

/**
 * The hooks every browser file's suite needs: builds the dashboard, starts a Berth process and a
 * Chromium before its tests (creating each named user, password `<name>-password-1`), and stops both
 * after. The returned object's fields are set once the `before` hook ran.
 */
export function browserSuite(
  users: string[] = [],
  env: Record<string, string> = {},
): { berth: BerthProcess; browser: Browser } {
  const suite = {} as { berth: BerthProcess; browser: Browser };
  before(async () => {
    await ensureBuilt();
    suite.berth = await startBerth(env);
    suite.browser = await launchChromium();
    for (const username of users) {
      const made = await suite.berth.api("POST", "/api/v1.1/users/", {
        username,
        email: `${username}@example.test`,
        password: `${username}-password-1`,
      });
      assert.equal(made.status, 201, `user ${username}`);
    }
  });
  after(async () => {
    await suite.browser?.close();
    await suite.berth?.stop();
  });
  return suite;
}
