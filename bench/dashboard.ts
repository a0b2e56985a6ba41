// `npx tsx bench/dashboard.ts [--containers N]`: the dashboard's first load and time to
// interactive, in Chromium against a Berth process, with N containers (default 1,000, services of
// 100) on simulated nodes. Prints bytes over the wire (compressed, as the browser received
// them) and times, with the API's own list call in the same run as the baseline. Figures, not
// a test: nothing fails on a slow machine.
import { parseArgs } from "node:util";
import {
  ADMIN_PASSWORD,
  type BerthProcess,
  CHROMIUM,
  ensureBuilt,
  launchChromium,
  startBerth,
} from "../test/web/browser.ts";

const { values } = parseArgs({ options: { containers: { type: "string" }, nodes: { type: "string" } } });
const containers = Number(values.containers ?? 1000);
const nodes = Number(values.nodes ?? 10);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

async function until(what: string, fn: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await fn()) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function populate(berth: BerthProcess): Promise<void> {
  const cluster = await berth.api("POST", "/api/infra/v1/nodecluster/", {
    name: "bench",
    region: "/api/infra/v1/region/aws/us-east-1/",
    node_type: "/api/infra/v1/nodetype/aws/m4.xlarge/",
    target_num_nodes: nodes,
  });
  if (cluster.status !== 201) throw new Error(`cluster: ${JSON.stringify(cluster.body)}`);
  await berth.api("POST", `${cluster.body.resource_uri}deploy/`);
  await until(
    "the nodes",
    async () => (await berth.api("GET", cluster.body.resource_uri)).body.state === "Deployed",
    120_000,
  );
  // A service holds at most 100 containers: services of 100 make up the count.
  const started = Date.now();
  for (let i = 0; i * 100 < containers; i++) {
    const svc = await berth.api("POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: `many-${i + 1}`,
      run_command: "httpd -f -p 80",
      target_num_containers: Math.min(100, containers - i * 100),
    });
    if (svc.status !== 201) throw new Error(`service: ${JSON.stringify(svc.body)}`);
    await berth.api("POST", `${svc.body.resource_uri}start/`);
  }
  await until(
    `${containers} containers running`,
    async () =>
      (await berth.api("GET", "/api/app/v1/container/?state=Running&limit=1")).body.meta.total_count >=
      containers,
    900_000,
  );
  process.stdout.write(
    `setup: ${containers} containers on ${nodes} simulated nodes started in ${Date.now() - started} ms\n`,
  );
}

await ensureBuilt();
const berth = await startBerth({ BERTH_SIM_DELAY_FACTOR: "0.01", BERTH_LOG_LEVEL: "error" });
const browser = await launchChromium();
try {
  await populate(berth);
  const signIn = await fetch(`${berth.url}/api/session/`, {
    method: "POST",
    body: JSON.stringify({ username: "admin", password: ADMIN_PASSWORD }),
  });
  const token = /berth_session=([^;]+)/.exec(signIn.headers.get("set-cookie") ?? "")![1]!;

  const apiMs: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    await berth.api("GET", "/api/app/v1/container/?limit=100");
    apiMs.push(performance.now() - t);
  }

  const runs: { bytes: number; files: number; servicesMs: number; containersMs: number }[] = [];
  for (let i = 0; i < 3; i++) {
    // A fresh context each time: an empty cache, as on a first visit.
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await context.addCookies([
      { name: "berth_session", value: token, url: berth.url, httpOnly: true, sameSite: "Strict" },
    ]);
    const page = await context.newPage();
    const firstLoad: Promise<number>[] = [];
    page.on("response", (r) => {
      const u = new URL(r.url());
      if (u.pathname === "/" || u.pathname.startsWith("/assets/"))
        firstLoad.push(
          r
            .request()
            .sizes()
            .then((s) => s.responseBodySize + s.responseHeadersSize),
        );
    });
    const t0 = performance.now();
    await page.goto(`${berth.url}/#/services`, { waitUntil: "commit", timeout: 120_000 });
    await page.locator("tr", { hasText: "many-1" }).first().waitFor({ timeout: 60_000 });
    const servicesMs = performance.now() - t0;
    const bytes = (await Promise.all(firstLoad)).reduce((a, b) => a + b, 0);
    const files = firstLoad.length;
    process.stdout.write(
      `run ${i + 1}: first load ${files} files, ${(bytes / 1024).toFixed(1)} KiB; services page interactive in ${servicesMs.toFixed(0)} ms\n`,
    );
    const t1 = performance.now();
    await page.getByRole("link", { name: "Containers", exact: true }).click();
    // A loaded machine may take long; the figure says so rather than the run failing.
    const shown = await page
      .locator("tbody tr")
      .nth(99)
      .waitFor({ timeout: 180_000 })
      .then(() => true)
      .catch(() => false);
    const containersMs = shown ? performance.now() - t1 : Number.NaN;
    process.stdout.write(
      `run ${i + 1}: containers page (100 rows) ${shown ? `in ${containersMs.toFixed(0)} ms` : "not shown within 180 s"}\n`,
    );
    runs.push({ bytes, files, servicesMs, containersMs });
    await context.close();
  }
  // API change to screen: a container stopped through the API, until its row on an open page says
  // so. Includes the API call, the action's start and the events poll (BERTH_EVENTS_POLL_MS, 200 ms
  // here); "event to screen" is the page's own part, from the frame's arrival.
  const changeMs: number[] = [];
  const eventMs: number[] = [];
  {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await context.addCookies([
      { name: "berth_session", value: token, url: berth.url, httpOnly: true, sameSite: "Strict" },
    ]);
    const page = await context.newPage();
    // When the events stream brought each container's change to the page (this process's clock).
    const frameAt = new Map<string, number>();
    page.on("websocket", (ws) =>
      ws.on("framereceived", (f) => {
        const text = typeof f.payload === "string" ? f.payload : f.payload.toString();
        let e: { type?: string; resource_uri?: string; state?: string };
        try {
          e = JSON.parse(text);
        } catch {
          return;
        }
        // The frame that says the container is no longer Running (what the row then shows).
        if (e.type === "container" && e.resource_uri && e.state !== "Running" && !frameAt.has(e.resource_uri))
          frameAt.set(e.resource_uri, performance.now());
      }),
    );
    await page.goto(`${berth.url}/#/containers`);
    await page.locator("tbody tr").nth(20).waitFor({ timeout: 120_000 });
    await page.locator(".live.live").waitFor();
    for (let i = 0; i < 7; i++) {
      const uri = (await page
        .locator("tbody tr")
        .nth(i * 2)
        .getAttribute("data-uri"))!;
      const t = performance.now();
      await berth.api("POST", `${uri}stop/`);
      await page.waitForFunction(
        (u) => {
          const badge = document.querySelector(`tr[data-uri="${u}"] .state`);
          return badge !== null && badge.textContent !== "Running";
        },
        uri,
        { polling: "raf", timeout: 30_000 },
      );
      const shown = performance.now();
      changeMs.push(shown - t);
      const key = [...frameAt.keys()].find((k) =>
        k.replace(/\/$/, "").endsWith(uri.replace(/\/$/, "").split("/").at(-1)!),
      );
      if (key) eventMs.push(shown - frameAt.get(key)!);
    }
    await context.close();
  }
  const api = median(apiMs);
  const services = median(runs.map((r) => r.servicesMs));
  const containersPage = median(runs.map((r) => r.containersMs));
  process.stdout.write(
    [
      `dashboard first load (Chromium ${CHROMIUM}): ${runs[0]!.files} files, ${(runs[0]!.bytes / 1024).toFixed(1)} KiB over the wire (compressed, with headers)`,
      `time to interactive, services page, ${containers} containers: median ${services.toFixed(0)} ms of 3 cold loads`,
      `containers page (100 of ${containers} per page), from a click: median ${containersPage.toFixed(0)} ms`,
      `API change to screen (a container stopped through the API until its row on an open page shows it): median ${median(changeMs).toFixed(0)} ms, max ${Math.max(...changeMs).toFixed(0)} ms of ${changeMs.length}`,
      `event to screen (the change's frame on the events stream until the row shows it): median ${median(eventMs).toFixed(0)} ms, max ${Math.max(...eventMs).toFixed(0)} ms of ${eventMs.length}`,
      `first load under 60 KiB compressed: ${runs[0]!.bytes < 60 * 1024 ? "yes" : "NO"}`,
      `baseline, the API's list call (GET container/?limit=100): median ${api.toFixed(1)} ms; services page ${(services / api).toFixed(1)}x, containers page ${(containersPage / api).toFixed(1)}x`,
    ].join("\n") + "\n",
  );
} finally {
  await browser.close();
  await berth.stop();
}
