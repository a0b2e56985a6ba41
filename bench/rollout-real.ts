// Rolling redeploys on real engines under load (issue 29), `npm run bench -- rollout-real`: `local`
// nodes (real Docker engines Berth starts in namespaces of their own, Caddy on each as its
// router), a service of 4 busybox httpd containers with an HTTP health check, a plain-HTTP domain
// (`tls: "off"`) and `rollout: {order: start-first, max_surge: 2, failure_action: rollback}`.
// Steady keep-alive load by 6 clients goes through the first node's router (its :80, Host:
// rollout.test), with the router tier's client (test/support/http-load.ts: a request whose
// connection closed before any answer is sent again once, as clients do for idempotent ones).
// Three measurements in one run, each line with its ratio to the first:
//   1. baseline: the load for a few seconds while nothing changes (requests/s, longest gap between
//      successful answers);
//   2. a redeploy to a new definition (an environment variable changed): requests sent, failed and
//      sent again, the longest gap, and the redeploy's time until its action ended;
//   3. a redeploy to a broken definition (httpd on another port: its check fails): the time until
//      the action ended Failed "rolled back to revision N", requests failed meanwhile, the longest gap.
// The figures are the machine's (2 cores shared with the engines, Caddy and the load): no threshold.
// The client runs in Berth's process (as in the router tier): each line gives the longest stall of
// that event loop, so a gap the client caused by waiting for Berth's work reads as such.
// Lab range 10.246.0.0/16, bridge berth-rb0. Needs root, dockerd, iproute2, iptables,
// busybox-static and caddy; prints one line saying why and measures nothing without them.
import { monitorEventLoopDelay } from "node:perf_hooks";
import { findExecutable } from "../src/drivers/local/host-tools.ts";
import { BUSYBOX_IMAGE } from "../src/drivers/local/index.ts";
import {
  type Caller,
  call,
  createUser,
  type Harness,
  startHarness,
  waitFor,
} from "../test/support/harness.ts";
import { type LoadFigures, request, steadyLoad } from "../test/support/http-load.ts";
import {
  deployLocalCluster,
  localNodesUnavailableReason,
  tearDownLocalLab,
} from "../test/support/local-lab.ts";
import { ratio, sleep } from "./support.ts";

const LAB = { labRange: "10.246.0.0/16", bridgeName: "berth-rb0" };
const HOST = "rollout.test";
const CONTAINERS = 4;
const MAX_SURGE = 2;

async function unavailableReason(): Promise<string | undefined> {
  try {
    const reason = await localNodesUnavailableReason(LAB);
    if (reason) return reason;
  } catch (err) {
    return `local nodes unavailable here: ${(err as Error).message}`;
  }
  return findExecutable("caddy") ? undefined : "caddy is not installed: the router of local nodes needs it";
}

export async function runRolloutReal(
  opts: { nodes: number; baselineSeconds: number },
  out: (line: string) => void,
): Promise<void> {
  const unavailable = await unavailableReason();
  if (unavailable) {
    out(`rollout-real: skipped (${unavailable})`);
    return;
  }
  let h: Harness | undefined;
  let nodeUuids: string[] = [];
  try {
    h = await startHarness({
      env: {
        BERTH_LOCAL_LAB_RANGE: LAB.labRange,
        BERTH_LOCAL_BRIDGE: LAB.bridgeName,
        BERTH_RECONCILE_INTERVAL_MS: "1000",
        BERTH_ROUTER_INTERVAL_MS: "1000",
        BERTH_START_MIN_UP_MS: "1000",
        BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
      },
      stepTimeoutMs: 120_000,
      checkAnswers: false,
    });
    await measure(h, opts, out, (uuids) => {
      nodeUuids = uuids;
    });
  } finally {
    await tearDownLocalLab(h, { nodeUuids });
  }
}

async function measure(
  h: Harness,
  opts: { nodes: number; baselineSeconds: number },
  out: (line: string) => void,
  deployed: (nodeUuids: string[]) => void,
): Promise<void> {
  const alice = await createUser(h, "alice");
  const t0 = performance.now();
  const { nodeUuids } = await deployLocalCluster(h, alice, { name: "bench", targetNumNodes: opts.nodes });
  deployed(nodeUuids);
  const address = (await h.store.nodes.findNode(nodeUuids[0]!))!.public_ip;
  const created = await call(h, alice, "POST", "/api/app/v1/service/", {
    image: BUSYBOX_IMAGE,
    name: "web",
    run_command: "httpd -f -p 80",
    target_num_containers: CONTAINERS,
    container_ports: [{ protocol: "tcp", inner_port: 80 }],
    container_envvars: [{ key: "VERSION", value: "1" }],
    domains: [{ host: HOST, tls: "off" }],
    health_check: { type: "http", port: 80, path: "/", interval: 1, timeout: 1, retries: 2 },
    rollout: { order: "start-first", max_surge: MAX_SURGE, failure_action: "rollback" },
  });
  if (created.status !== 201) throw new Error(`create: ${created.status} ${created.raw}`);
  const uri = created.body.resource_uri as string;
  const started = await operate(h, alice, uri, "start");
  if (started.state !== "Success") throw new Error(`the start ended ${started.state}: ${started.log}`);
  await routed(h, alice, uri);
  await waitFor(
    "the router answers",
    async () => (await request("http", address, HOST).catch(() => undefined))?.status === 200,
    30_000,
    100,
  );
  out(
    `rollout-real: ${CONTAINERS} busybox httpd containers with an HTTP check (interval 1 s) on ${opts.nodes} local node(s), ready in ${((performance.now() - t0) / 1000).toFixed(0)} s; 6 keep-alive clients through the router of the first (plain HTTP, Host: ${HOST})`,
  );
  const load = () => {
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    const l = steadyLoad({ scheme: "http", address, host: HOST, clients: 6 });
    return {
      async stop() {
        const figures = await l.stop();
        delay.disable();
        return { ...figures, stallMs: delay.max / 1e6 };
      },
    };
  };

  // 1. The baseline: the same load while nothing changes.
  const quiet = load();
  await sleep(opts.baselineSeconds * 1000);
  const base = await quiet.stop();
  const baseRps = rps(base);
  out(
    `rollout-real: baseline, no redeploy, ${(base.elapsedMs / 1000).toFixed(1)} s: ${describe(base)}; ${baseRps.toFixed(0)} req/s, longest gap ${base.longestGapMs.toFixed(0)} ms`,
  );

  // 2. A start-first redeploy to a new definition.
  await patch(h, alice, uri, { container_envvars: [{ key: "VERSION", value: "2" }] });
  const during = load();
  await sleep(1000);
  const redeploy = await operate(h, alice, uri, "redeploy");
  await routed(h, alice, uri);
  await sleep(1000);
  const r = await during.stop();
  out(
    `rollout-real: start-first redeploy (max_surge ${MAX_SURGE}): ${redeploy.state} in ${(redeploy.ms / 1000).toFixed(2)} s; under load ${(r.elapsedMs / 1000).toFixed(1)} s: ${describe(r)}; ${rps(r).toFixed(0)} req/s (${ratio(rps(r), baseRps)} the baseline), longest gap ${r.longestGapMs.toFixed(0)} ms (${ratio(r.longestGapMs, base.longestGapMs)})`,
  );
  if (redeploy.state !== "Success") out(`rollout-real:   its log: ${lastLines(redeploy.log)}`);
  failuresLine(r, out);

  // 3. A redeploy to a definition whose health check fails: rolled back by itself.
  await patch(h, alice, uri, { run_command: "httpd -f -p 81" });
  const broken = load();
  await sleep(1000);
  const back = await operate(h, alice, uri, "redeploy");
  await routed(h, alice, uri);
  await sleep(1000);
  const b = await broken.stop();
  const revision = /rolled back to revision (\d+)/.exec(back.log);
  const after = (await call(h, alice, "GET", uri)).body;
  out(
    `rollout-real: redeploy to a definition whose check fails: ${back.state}${revision ? ` "${revision[0]}"` : " (no rollback in its log)"} after ${(back.ms / 1000).toFixed(2)} s (${ratio(back.ms, redeploy.ms)} the good redeploy); under load ${(b.elapsedMs / 1000).toFixed(1)} s: ${describe(b)}; ${rps(b).toFixed(0)} req/s (${ratio(rps(b), baseRps)} the baseline), longest gap ${b.longestGapMs.toFixed(0)} ms (${ratio(b.longestGapMs, base.longestGapMs)}); the service's command afterwards: ${after.run_command}`,
  );
  if (!revision) out(`rollout-real:   its log: ${lastLines(back.log)}`);
  failuresLine(b, out);
}

type Figures = LoadFigures & { stallMs: number };

const rps = (f: LoadFigures) => (f.ok / f.elapsedMs) * 1000;

function describe(f: Figures): string {
  return `${f.ok + f.failures.length} sent, ${f.failures.length} failed, ${f.retried["kept-alive"] + f.retried.new} sent again after their connection closed unanswered (${f.retried["kept-alive"]} kept-alive, ${f.retried.new} new), this process's event loop stalled at most ${f.stallMs.toFixed(0)} ms`;
}

function failuresLine(f: LoadFigures, out: (line: string) => void) {
  if (f.failures.length === 0) return;
  const counts = new Map<string, number>();
  for (const x of f.failures) counts.set(x, (counts.get(x) ?? 0) + 1);
  const top = [...counts].sort((a, b) => b[1] - a[1]).slice(0, 3);
  out(`rollout-real:   failures: ${top.map(([what, n]) => `${n}× ${what.replace(/\s+/g, " ")}`).join("; ")}`);
}

const lastLines = (log: string) => log.split("\n").slice(-5).join(" | ");

async function patch(h: Harness, alice: Caller, uri: string, body: Record<string, unknown>) {
  const r = await call(h, alice, "PATCH", uri, body);
  if (r.status !== 200) throw new Error(`PATCH: ${r.status} ${r.raw}`);
}

/** Runs an operation on the service; its action's end state, its log and its time from the POST. */
async function operate(h: Harness, alice: Caller, uri: string, op: string) {
  const t0 = performance.now();
  const res = await call(h, alice, "POST", `${uri}${op}/`);
  if (res.status !== 202) throw new Error(`${op}: ${res.status} ${res.raw}`);
  const uuid = String(res.headers["x-platform-action-uri"]).split("/").filter(Boolean).at(-1)!;
  const action = await waitFor(
    `the ${op}`,
    async () => {
      const a = await h.store.actions.findAction(uuid);
      return a && ["Success", "Failed", "Canceled"].includes(a.state) ? a : undefined;
    },
    120_000,
    50,
  );
  const ms = performance.now() - t0;
  const log = (await h.store.actions.actionLogTail(uuid, 100)).map((l) => l.line).join("\n");
  return { state: action.state, log, ms };
}

/** Waits until the router's configuration names exactly the service's containers. */
async function routed(h: Harness, alice: Caller, uri: string) {
  await waitFor(
    `${CONTAINERS} upstreams`,
    async () =>
      (await call(h, alice, "GET", `${uri}routes/`)).body.objects?.[0]?.upstreams.length === CONTAINERS,
    30_000,
    200,
  );
}
