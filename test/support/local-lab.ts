// Shared setup and teardown of the real-engine tier: whether `local` nodes can run here, a cluster
// of them deployed through the API, and a lab taken down without anything dialling its addresses.
// Each test file keeps its own lab range and bridge so the files can run side by side.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { LocalProvider } from "../../src/drivers/local/index.ts";
import { allowPrivileges, type Caller, call, type Harness, waitFor } from "./harness.ts";

/** The region and node type of the `local` provider, for a node cluster's body. */
export const LOCAL_NODE_TYPE = {
  region: "/api/infra/v1/region/local/host/",
  node_type: "/api/infra/v1/nodetype/local/standard/",
};

export interface LabOptions {
  labRange: string;
  bridgeName: string;
}

/** Runs a host tool and answers its standard output, or undefined when it is missing or fails. */
function tool(file: string, args: string[]): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile(file, args, (error, stdout) => resolve(error ? undefined : stdout));
  });
}

/**
 * Removes what an earlier run of the same test file left behind when it was killed before its
 * `after()` (a bridge, its forward rules, its lab's unreachable route): the provider rightly refuses
 * to take over a bridge it did not record, and a killed run never records anything again. The names
 * and ranges are this file's own, so nothing else on the host is touched.
 */
export async function clearStaleLab(opts: LabOptions): Promise<string[]> {
  const removed: string[] = [];
  if ((await tool("ip", ["link", "show", "dev", opts.bridgeName])) !== undefined) {
    await tool("ip", ["link", "del", opts.bridgeName]);
    removed.push(`bridge ${opts.bridgeName}`);
  }
  if ((await tool("ip", ["route", "del", "unreachable", opts.labRange])) !== undefined) {
    removed.push(`route unreachable ${opts.labRange}`);
  }
  const comment = `berth-lab-${opts.bridgeName}`;
  for (const binary of ["iptables", "iptables-legacy", "iptables-nft"]) {
    const rules = (await tool(binary, ["-S", "FORWARD"])) ?? "";
    for (const rule of rules.split("\n").filter((r) => r.startsWith("-A ") && r.includes(comment))) {
      await tool(binary, ["-D", ...rule.slice(3).split(" ")]);
      removed.push(`${binary} rule ${rule}`);
    }
  }
  return removed;
}

/**
 * Why local nodes cannot run here, or undefined when they can: the same check the platform makes
 * at start-up, on a throwaway state directory.
 */
export async function localNodesUnavailableReason(opts: LabOptions): Promise<string | undefined> {
  for (const leftover of await clearStaleLab(opts)) console.error(`removed a killed run's ${leftover}`);
  const probeDir = mkdtempSync(path.join(tmpdir(), "berth-probe-"));
  try {
    const prerequisites = await new LocalProvider({
      stateDir: probeDir,
      labRange: opts.labRange,
      bridgeName: opts.bridgeName,
    }).prerequisites();
    return prerequisites.available ? undefined : `local nodes unavailable here: ${prerequisites.reason}`;
  } finally {
    rmSync(probeDir, { recursive: true, force: true });
  }
}

/** Under CI=true a missing prerequisite is a failing test, so a CI run never passes by skipping. */
export function requirePrerequisitesInCi(
  unavailable: string | undefined,
  name = "local node prerequisites are present (required in CI)",
): void {
  if (unavailable && process.env.CI === "true") {
    test(name, () => {
      assert.fail(unavailable);
    });
  }
}

/**
 * Whether local nodes are unavailable here (the reason, for `describe`'s skip); fails under CI=true
 * instead of skipping.
 */
export async function localNodesUnavailable(opts: LabOptions): Promise<string | undefined> {
  const unavailable = await localNodesUnavailableReason(opts);
  requirePrerequisitesInCi(unavailable);
  return unavailable;
}

export interface DeployOptions {
  name: string;
  targetNumNodes: number;
  tags?: { name: string }[];
  /** How long the deploy action may take (default 90 s); the cluster then has 5 s to read Deployed. */
  timeoutMs?: number;
  intervalMs?: number;
}

type CallResult = Awaited<ReturnType<typeof call>>;

export interface DeployedCluster {
  /** The cluster as the create answered it. */
  created: CallResult["body"];
  /** The deploy's response (202, naming its action). */
  deploy: CallResult;
  /** The cluster once Deployed. */
  cluster: CallResult["body"];
  /** Its nodes' uuids, in the cluster's order. */
  nodeUuids: string[];
}

/** Creates a cluster of `local` nodes through the API, deploys it and waits until it is Deployed. */
export async function deployLocalCluster(
  h: Harness,
  caller: Caller,
  opts: DeployOptions,
): Promise<DeployedCluster> {
  // Local nodes run on the Berth host: an administrator allows the caller's namespace first.
  if (caller.username !== h.admin.username) await allowPrivileges(h, caller.username, { local_nodes: true });
  const created = await call(h, caller, "POST", "/api/infra/v1/nodecluster/", {
    name: opts.name,
    ...LOCAL_NODE_TYPE,
    target_num_nodes: opts.targetNumNodes,
    ...(opts.tags ? { tags: opts.tags } : {}),
  });
  assert.equal(created.status, 201, created.raw);
  const uri = created.body.resource_uri as string;
  const deploy = await call(h, caller, "POST", `${uri}deploy/`);
  assert.equal(deploy.status, 202, deploy.raw);
  // Always wait for the deploy action, so that a failure shows its log (a node that failed to
  // deploy is logged there) instead of a bare timeout.
  const actionUri = deploy.headers["x-platform-action-uri"];
  assert.equal(typeof actionUri, "string", "the response names its action");
  const actionUuid = (actionUri as string).split("/").filter(Boolean).at(-1)!;
  const action = await waitFor(
    `action ${actionUuid}`,
    async () => {
      const a = await h.store.actions.findAction(actionUuid);
      return a && ["Success", "Failed", "Canceled"].includes(a.state) ? a : undefined;
    },
    opts.timeoutMs ?? 90_000,
    100,
  );
  const log = (await h.store.actions.actionLogTail(actionUuid, 500)).map((l) => l.line).join("\n");
  assert.equal(action.state, "Success", log);
  let cluster: Record<string, unknown> & { nodes: string[] };
  try {
    cluster = await waitFor(
      `cluster ${opts.name} Deployed`,
      async () => {
        const c = (await call(h, caller, "GET", uri)).body;
        return c.state === "Deployed" ? c : undefined;
      },
      5_000,
      opts.intervalMs ?? 100,
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; the deploy action's log:\n${log}`);
  }
  const nodeUuids = (cluster.nodes as string[]).map((n) => n.split("/").filter(Boolean).at(-1)!);
  return { created: created.body, deploy, cluster, nodeUuids };
}

/**
 * Stops the background workers: the reconciler first (it dials node addresses, and once the lab's
 * guard route is gone a packet to a lab address would take the default route off the machine),
 * then health checks, then the action queue.
 */
export async function stopWorkers(h: Harness): Promise<void> {
  h.reconciler.stop();
  h.health.stop();
  await h.actions.stop();
}

/**
 * Terminates every local node known to the test, the provider or the store (terminate is
 * idempotent), then tears down the host's lab. Call after stopWorkers.
 */
export async function terminateLab(h: Harness, nodeUuids: readonly string[] = []): Promise<void> {
  const known = new Set([
    ...nodeUuids,
    ...h.local.listNodes().map((n) => n.nodeId),
    ...(await h.store.nodes.liveNodes({ provider: "local" })).map((n) => n.uuid),
  ]);
  for (const uuid of known) {
    await h.local.terminateNode(uuid).catch((error: Error) => console.error(`cleanup: ${error.message}`));
  }
  await h.local.teardownHost().catch((error: Error) => console.error(`cleanup: ${error.message}`));
}

/**
 * The whole `after()` of a real-engine file: runs even when a test failed, so no worker may act on
 * the engines while they are taken down; then the lab goes and the harness closes.
 */
export async function tearDownLocalLab(
  h: Harness | undefined,
  opts: { nodeUuids?: readonly string[] } = {},
): Promise<void> {
  if (!h) return;
  await stopWorkers(h);
  await terminateLab(h, opts.nodeUuids);
  await h.close();
}
