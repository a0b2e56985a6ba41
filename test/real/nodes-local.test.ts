// The real-engine tier for nodes, through the API: a cluster of the `local` provider deploys real
// Docker engines on this host, scales, carries cross-node container traffic, goes Unreachable when
// an engine dies and comes back, upgrades an engine, and leaves nothing behind when terminated.
//
// Needs root, dockerd, iproute2, iptables and busybox-static. Without them the file is skipped
// locally, but fails when CI=true so a CI run never passes by skipping.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { Engine } from "../../src/drivers/engine.ts";
import { BUSYBOX_IMAGE } from "../../src/drivers/local/index.ts";
import type { NodeRow } from "../../src/store/nodes.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";
import { deployLocalCluster, localNodesUnavailable, tearDownLocalLab } from "../support/local-lab.ts";
import { actionUuidOf, execIn } from "../support/real-api.ts";

// A lab range and bridge of this file's own: never the provider test's (10.229, berth-t0) nor a
// real install's (10.231, berth0), so they can run side by side.
const LAB_RANGE = "10.227.0.0/16";
const LAB_PREFIX = "10.227.";
const BRIDGE = "berth-r0";
const GRACE_MS = 1500;
const HEALTH_INTERVAL_MS = 500;
const TEST_LABEL = { "berth.test": "nodes-local" };

const unavailable = await localNodesUnavailable({ labRange: LAB_RANGE, bridgeName: BRIDGE });

interface ClusterView {
  uuid: string;
  resource_uri: string;
  state: string;
  nodes: string[];
  target_num_nodes: number;
  current_num_nodes: number;
}

interface NodeView {
  uuid: string;
  resource_uri: string;
  state: string;
  node_cluster: string | null;
  public_ip: string;
  engine_version: string;
  engine_graphdriver: string;
  cpu: number;
  memory: number;
  last_seen: string | null;
  deployed_datetime: string | null;
  destroyed_datetime: string | null;
}

function ip(args: string[]): string {
  return execFileSync("ip", args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** The host's iptables, and the legacy one when its tables are in use (listing it then creates nothing). */
function iptablesInUse(): string[] {
  let legacyLive = false;
  try {
    legacyLive = readFileSync("/proc/net/ip_tables_names", "utf8").split("\n").includes("filter");
  } catch {
    // No legacy tables.
  }
  return ["iptables", ...(legacyLive ? ["iptables-legacy"] : [])];
}

/** Every pid whose command line mentions one of the needles. */
function processesMentioning(needles: string[]): string[] {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
        return needles.some((needle) => cmdline.includes(needle));
      } catch {
        return false; // Exited while we looked.
      }
    });
}

describe("local nodes through the API: real engines on this host", { skip: unavailable ?? false }, () => {
  let h: Harness;
  let alice: Caller;
  let stateDir: string;
  let cluster: ClusterView;
  /** In deploy order: nodes 1 and 2 from the deploy, node 3 from the scale. */
  const nodeUuids: string[] = [];

  const get = async <T>(uri: string): Promise<T> => {
    const res = await call(h, alice, "GET", uri);
    assert.equal(res.status, 200, res.raw);
    return res.body as T;
  };
  const nodeUri = (uuid: string) => `/api/infra/v1/node/${uuid}/`;
  const row = async (uuid: string): Promise<NodeRow> => {
    const found = await h.store.nodes.findNode(uuid);
    assert.ok(found, `node ${uuid} is in the store`);
    return found;
  };
  const engineOf = async (uuid: string): Promise<Engine> => h.engines.forNode(await row(uuid));
  const settledCluster = (state: string, timeoutMs: number) =>
    waitFor(
      `cluster ${state}`,
      async () => {
        const c = await get<ClusterView>(cluster.resource_uri);
        return c.state === state ? c : undefined;
      },
      timeoutMs,
      100,
    );
  const nodeInState = (uuid: string, state: string, timeoutMs: number) =>
    waitFor(
      `node ${uuid} ${state}`,
      async () => {
        const n = await get<NodeView>(nodeUri(uuid));
        return n.state === state ? n : undefined;
      },
      timeoutMs,
      50,
    );

  before(async () => {
    h = await startHarness({
      env: {
        BERTH_LOCAL_LAB_RANGE: LAB_RANGE,
        BERTH_LOCAL_BRIDGE: BRIDGE,
        BERTH_NODE_UNREACHABLE_GRACE_MS: String(GRACE_MS),
        BERTH_NODE_HEALTH_INTERVAL_MS: String(HEALTH_INTERVAL_MS),
      },
    });
    stateDir = path.join(h.dataDir, "local-nodes");
    alice = await createUser(h, "alice");
  });

  after(async () => {
    // Runs even when a test failed: no worker may deploy while we clean up, then whatever is
    // recorded (or known to the store) is terminated; terminate is idempotent.
    await tearDownLocalLab(h, { nodeUuids });
  });

  test("the local provider is available", async () => {
    const provider = await get<{ name: string; available: boolean; label: string }>(
      "/api/infra/v1/provider/local/",
    );
    assert.equal(provider.available, true, provider.label);
  });

  test("a cluster of 2 deploys real engines with addresses in the lab range", {
    timeout: 60_000,
  }, async (t) => {
    const startedAtMs = Date.now();
    const deployed = await deployLocalCluster(h, alice, {
      name: "real",
      targetNumNodes: 2,
      timeoutMs: 50_000,
    });
    assert.equal((deployed.created as ClusterView).state, "Init");
    assert.equal((deployed.deploy.body as ClusterView).state, "Deploying");
    const deployAction = actionUuidOf(deployed.deploy.headers);

    cluster = deployed.cluster as ClusterView;
    t.diagnostic(`2 nodes deployed in ${Date.now() - startedAtMs} ms`);
    assert.equal(cluster.nodes.length, 2);
    assert.equal(cluster.current_num_nodes, 2);

    const addresses = new Set<string>();
    for (const uri of cluster.nodes) {
      const n = await get<NodeView>(uri);
      nodeUuids.push(n.uuid);
      assert.equal(n.state, "Deployed");
      assert.equal(n.node_cluster, cluster.resource_uri);
      assert.ok(n.public_ip.startsWith(LAB_PREFIX), `public_ip ${n.public_ip} is in ${LAB_RANGE}`);
      addresses.add(n.public_ip);
      assert.match(n.engine_version, /^\d+\.\d+/, "engine_version from the real engine");
      assert.ok(n.engine_graphdriver.length > 0, "storage driver from the real engine");
      assert.ok(n.cpu >= 1, `cpu ${n.cpu} from the real engine`);
      assert.ok(n.memory > 100, `memory ${n.memory} MB from the real engine`);
      assert.notEqual(n.last_seen, null);
      assert.notEqual(n.deployed_datetime, null);
      await (await engineOf(n.uuid)).ping();
    }
    assert.equal(addresses.size, 2, "each node has an address of its own");
    // Each engine is its own: distinct engine ids.
    const ids = await Promise.all(nodeUuids.map(async (uuid) => (await row(uuid)).engine_id));
    assert.equal(new Set(ids).size, 2, `distinct engine ids: ${ids.join(", ")}`);

    const action = await h.store.actions.findAction(deployAction);
    assert.equal(action?.state, "Success");
    const lines = (await h.store.actions.actionLogTail(deployAction, 200)).map((l) => l.line);
    for (const line of lines) t.diagnostic(`deploy log: ${line}`);
    assert.ok(lines.length > 0, "the deploy has a log");
    for (const line of lines) {
      assert.ok(line.trim().length > 0, "no empty log lines");
      assert.doesNotMatch(line, /\[object |undefined/, `readable: ${line}`);
    }
    for (const uuid of nodeUuids) {
      assert.ok(
        lines.some((l) => l.includes(uuid) && l.includes("is Deployed")),
        `the log says node ${uuid} is Deployed`,
      );
    }
    assert.ok(lines.some((l) => /Engine answers at tcp:\/\/10\.227\.\d+\.\d+:2375/.test(l)));
  });

  test("scaling to 3 adds a third real node", { timeout: 60_000 }, async (t) => {
    const startedAtMs = Date.now();
    const scale = await call(h, alice, "PATCH", cluster.resource_uri, { target_num_nodes: 3 });
    assert.equal(scale.status, 202, scale.raw);
    assert.equal((scale.body as ClusterView).state, "Scaling");
    cluster = await settledCluster("Deployed", 50_000);
    t.diagnostic(`scaled to 3 in ${Date.now() - startedAtMs} ms`);
    assert.equal(cluster.nodes.length, 3);
    assert.equal(cluster.current_num_nodes, 3);
    assert.equal(cluster.target_num_nodes, 3);
    const added = cluster.nodes.map((uri) => uri.split("/").at(-2)!).filter((u) => !nodeUuids.includes(u));
    assert.equal(added.length, 1);
    nodeUuids.push(added[0]!);
    const third = await get<NodeView>(nodeUri(added[0]!));
    assert.equal(third.state, "Deployed");
    assert.ok(third.public_ip.startsWith(LAB_PREFIX));
    await (await engineOf(third.uuid)).ping();
    assert.equal(h.local.listNodes().length, 3);
  });

  test("a container on node 1 reaches a container on node 3 by its private IP", {
    timeout: 60_000,
  }, async (t) => {
    const [first, , third] = nodeUuids as [string, string, string];
    const serverEngine = await engineOf(third);
    const clientEngine = await engineOf(first);
    const made: [Engine, string][] = [];
    try {
      const server = await serverEngine.createContainer({
        image: BUSYBOX_IMAGE,
        cmd: ["httpd", "-f", "-p", "80"],
        labels: TEST_LABEL,
      });
      made.push([serverEngine, server]);
      await serverEngine.startContainer(server);
      const client = await clientEngine.createContainer({
        image: BUSYBOX_IMAGE,
        cmd: ["sleep", "600"],
        labels: TEST_LABEL,
      });
      made.push([clientEngine, client]);
      await clientEngine.startContainer(client);

      const serverIp = (await serverEngine.inspectContainer(server))?.ipAddress ?? "";
      const subnet = (await row(third)).private_subnet;
      const subnetPrefix = subnet.split(".").slice(0, 3).join(".");
      assert.ok(
        serverIp.startsWith(`${subnetPrefix}.`),
        `server ${serverIp} is in node 3's subnet ${subnet}`,
      );

      // No `wget -T`: busybox-static segfaults with it; each attempt is bounded here instead, and
      // attempts repeat while httpd may still be starting.
      const startedAtMs = Date.now();
      let last = { exitCode: -1, output: "" };
      while (Date.now() - startedAtMs < 20_000) {
        try {
          last = await execIn(clientEngine, client, ["wget", "-qO-", `http://${serverIp}/`], 5_000);
        } catch (error) {
          last = { exitCode: -1, output: (error as Error).message };
        }
        if (last.exitCode === 0) break;
        await sleep(200);
      }
      t.diagnostic(`cross-node fetch answered after ${Date.now() - startedAtMs} ms`);
      assert.equal(last.exitCode, 0, last.output);
      assert.match(last.output, /Served by busybox httpd/, "node 3's page, fetched from node 1");
    } finally {
      // Gone before the engine upgrade below: a graceful engine stop waits for each container.
      for (const [engine, id] of made) {
        await engine.removeContainer(id, { force: true }).catch(() => {});
      }
      for (const engine of [serverEngine, clientEngine]) {
        assert.deepEqual(await engine.listContainers({ labels: TEST_LABEL, all: true }), []);
      }
    }
  });

  test("a killed engine makes its node Unreachable; health-check shows it back once it runs", {
    timeout: 60_000,
  }, async (t) => {
    const second = nodeUuids[1]!;
    await h.local.killEngine(second);
    const killedAtMs = Date.now();
    assert.equal(h.local.engineRunning(second), false);
    await assert.rejects((await engineOf(second)).ping());

    const down = await nodeInState(second, "Unreachable", GRACE_MS + 5_000);
    const seenDownAtMs = Date.now();
    t.diagnostic(
      `Unreachable ${seenDownAtMs - killedAtMs} ms after the kill (grace ${GRACE_MS} ms, interval ${HEALTH_INTERVAL_MS} ms)`,
    );
    assert.notEqual(down.last_seen, null, "last_seen keeps the last answer");
    // Not on the first failed ping: only once the engine has been silent for the grace.
    const lastSeenMs = (await row(second)).last_seen;
    assert.ok(lastSeenMs !== null && lastSeenMs <= killedAtMs, "last_seen is from before the kill");
    assert.ok(seenDownAtMs - lastSeenMs >= GRACE_MS, `silent for ${seenDownAtMs - lastSeenMs} ms`);
    // The other nodes stay Deployed.
    for (const uuid of [nodeUuids[0]!, nodeUuids[2]!]) {
      assert.equal((await get<NodeView>(nodeUri(uuid))).state, "Deployed");
    }

    const stillDown = await call(h, alice, "POST", `${nodeUri(second)}health-check/`);
    assert.equal(stillDown.status, 200, stillDown.raw);
    assert.equal((stillDown.body as NodeView).state, "Unreachable");

    // The watcher would notice the engine on its own; stopped here, so the user's health-check
    // is what brings the node back.
    h.health.stop();
    try {
      await h.local.startEngine(second);
      assert.equal(h.local.engineRunning(second), true);
      const back = await call(h, alice, "POST", `${nodeUri(second)}health-check/`);
      assert.equal(back.status, 200, back.raw);
      assert.equal((back.body as NodeView).state, "Deployed");
      assert.ok(Date.parse((back.body as NodeView).last_seen ?? "") >= killedAtMs - 1000, "last_seen moved");
    } finally {
      h.health.start();
    }
    await (await engineOf(second)).ping();
    const again = await call(h, alice, "POST", `${nodeUri(second)}health-check/`);
    assert.equal(again.status, 409, "a Deployed node is not health-checked");
  });

  test("engine-upgrade restarts node 1's engine and it answers again", { timeout: 60_000 }, async (t) => {
    const first = nodeUuids[0]!;
    const pidBefore = h.local.findNode(first)?.dockerdPid;
    assert.ok(pidBefore, "node 1's engine runs");
    const startedAtMs = Date.now();
    const upgrade = await call(h, alice, "POST", `${nodeUri(first)}engine-upgrade/`);
    assert.equal(upgrade.status, 202, upgrade.raw);
    assert.equal((upgrade.body as NodeView).state, "Upgrading");
    const actionUuid = actionUuidOf(upgrade.headers);
    await waitFor(
      "engine-upgrade finished",
      async () => {
        const a = await h.store.actions.findAction(actionUuid);
        return a && ["Success", "Failed"].includes(a.state) ? a : undefined;
      },
      45_000,
      100,
    );
    t.diagnostic(`engine-upgrade took ${Date.now() - startedAtMs} ms`);
    assert.equal((await h.store.actions.findAction(actionUuid))?.state, "Success");
    const n = await nodeInState(first, "Deployed", 5_000);
    assert.match(n.engine_version, /^\d+\.\d+/);
    const pidAfter = h.local.findNode(first)?.dockerdPid;
    assert.ok(pidAfter && pidAfter !== pidBefore, `a new dockerd (${pidBefore} → ${pidAfter})`);
    await (await engineOf(first)).ping();
  });

  test("deleting the cluster terminates every node and leaves nothing on the host", {
    timeout: 60_000,
  }, async (t) => {
    const recorded = h.local.listNodes();
    assert.equal(recorded.length, 3);
    // What must go is there now, so the checks below look at the right things.
    const labForwardRules = () =>
      iptablesInUse()
        .map((binary) =>
          execFileSync(binary, ["-w", "-S", "FORWARD"], {
            encoding: "utf8",
            stdio: ["ignore", "pipe", "ignore"],
          }),
        )
        .join("\n")
        .split("\n")
        .filter((line) => line.includes(`berth-lab-${BRIDGE}`));
    const mentioning = [stateDir, ...recorded.map((n) => `/run/${n.netnsName}`)];
    for (const n of recorded) assert.match(ip(["netns", "list"]), new RegExp(`^${n.netnsName}\\b`, "m"));
    assert.match(ip(["-o", "link", "show"]), new RegExp(`\\b${BRIDGE}\\b`));
    assert.ok(labForwardRules().length > 0, "the lab's host forward rules exist");
    assert.ok(processesMentioning(mentioning).length >= 3, "the nodes' engines run");
    const startedAtMs = Date.now();
    const del = await call(h, alice, "DELETE", cluster.resource_uri);
    assert.equal(del.status, 202, del.raw);
    assert.equal((del.body as ClusterView).state, "Terminating");
    cluster = await settledCluster("Terminated", 50_000);
    t.diagnostic(`3 nodes terminated in ${Date.now() - startedAtMs} ms`);
    assert.deepEqual(cluster.nodes, [], "no live node listed");
    for (const uuid of nodeUuids) {
      const n = await get<NodeView>(nodeUri(uuid));
      assert.equal(n.state, "Terminated");
      assert.notEqual(n.destroyed_datetime, null);
    }

    // Nothing of it is left on the host.
    assert.deepEqual(h.local.listNodes(), []);
    const namespaces = ip(["netns", "list"]);
    const links = ip(["-o", "link", "show"]);
    for (const n of recorded) {
      assert.doesNotMatch(namespaces, new RegExp(`^${n.netnsName}\\b`, "m"), `netns ${n.netnsName}`);
      assert.doesNotMatch(links, new RegExp(`bv-${n.netnsName.slice("berth-".length)}`), "host veth");
      assert.equal(existsSync(`/run/${n.netnsName}`), false, "no exec root under /run");
      for (const hierarchy of readdirSync("/sys/fs/cgroup")) {
        assert.equal(
          existsSync(path.join("/sys/fs/cgroup", hierarchy, n.netnsName)),
          false,
          `cgroup ${hierarchy}`,
        );
      }
    }
    assert.doesNotMatch(links, new RegExp(`\\b${BRIDGE}\\b`), `bridge ${BRIDGE}`);
    const labRoutes = ip(["-4", "route", "show", "table", "all"])
      .split("\n")
      .filter((line) => line.includes(LAB_PREFIX));
    assert.ok(
      labRoutes.every((line) => line.trim().startsWith(`unreachable ${LAB_RANGE}`)),
      `no route into the lab range but the guard: ${labRoutes.join("; ")}`,
    );
    assert.deepEqual(labRoutes, [], "the last node took the host lab (and its guard route) with it");
    assert.deepEqual(labForwardRules(), [], "no host forward rule of the lab");
    assert.deepEqual(
      processesMentioning(mentioning),
      [],
      "no dockerd, containerd or shim of the nodes is left",
    );
    const nodesDir = path.join(stateDir, "nodes");
    assert.deepEqual(existsSync(nodesDir) ? readdirSync(nodesDir) : [], [], "no node state directory");
  });
});
