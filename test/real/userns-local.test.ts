// Engines Berth starts remap user namespaces (issue 26, item 1): on a real `local` node, a container
// of the administrator's namespace that binds the host's `/` at `/host` is root inside (`id -u` is
// 0) but an unprivileged uid on the host: a file it creates under /host/tmp belongs to the remapped
// uid (≥ 100000) and a 0600 root-owned host file cannot be read. A container on the host network
// (which a remapping engine runs only in the host's user namespace) still starts.
//
// Needs root, dockerd, iproute2, iptables and busybox-static, like every file of this tier;
// skipped without them locally, failing under CI=true.
import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { DockerEngine } from "../../src/drivers/docker/index.ts";
import type { Engine } from "../../src/drivers/engine.ts";
import { LocalProvider } from "../../src/drivers/local/index.ts";
import { call, type Harness, startHarness, waitFor } from "../support/harness.ts";
import { deployLocalCluster, localNodesUnavailable, tearDownLocalLab } from "../support/local-lab.ts";
import { execIn } from "../support/real-api.ts";

const LAB_RANGE = "10.213.0.0/16";
const BRIDGE = "berth-u0";

// A second lab, for nodes whose engine cannot remap (a data directory it cannot pass through).
const STUCK = { labRange: "10.212.0.0/16", bridgeName: "berth-u1" };

const unavailable =
  (await localNodesUnavailable({ labRange: LAB_RANGE, bridgeName: BRIDGE })) ??
  (await localNodesUnavailable(STUCK));

describe("user-namespace remapping on a real local node", { skip: unavailable ?? false }, () => {
  let h: Harness;
  const nodeUuids: string[] = [];
  let deployLog = "";
  const tag = randomBytes(4).toString("hex");
  const secretFile = `/tmp/berth-userns-${tag}.secret`;
  const madeFile = `/tmp/berth-userns-${tag}.made`;

  before(async () => {
    h = await startHarness({
      env: {
        BERTH_LOCAL_LAB_RANGE: LAB_RANGE,
        BERTH_LOCAL_BRIDGE: BRIDGE,
        BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
        BERTH_RECONCILE_INTERVAL_MS: "300",
      },
    });
    writeFileSync(secretFile, "only root may read this\n", { mode: 0o600 });
    const startedAtMs = Date.now();
    const cluster = await deployLocalCluster(h, h.admin, { name: "remapped", targetNumNodes: 1 });
    console.error(`# one remapped local node deployed in ${Date.now() - startedAtMs} ms`);
    nodeUuids.push(...cluster.nodeUuids);
    const actionUuid = String(cluster.deploy.headers["x-platform-action-uri"])
      .split("/")
      .filter(Boolean)
      .at(-1)!;
    deployLog = (await h.store.actions.actionLogTail(actionUuid, 500)).map((l) => l.line).join("\n");
  });

  after(async () => {
    rmSync(secretFile, { force: true });
    rmSync(madeFile, { force: true });
    await tearDownLocalLab(h, { nodeUuids });
  });

  /** Creates and starts a service in the admin's namespace; answers its container's engine and id. */
  async function running(body: Record<string, unknown>): Promise<{ engine: Engine; id: string }> {
    const created = await call(h, h.admin, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      ...body,
    });
    assert.equal(created.status, 201, created.raw);
    const started = await call(h, h.admin, "POST", `${created.body.resource_uri}start/`);
    assert.equal(started.status, 202, started.raw);
    const container = await waitFor(
      `${body.name} Running`,
      async () => {
        const s = (await call(h, h.admin, "GET", created.body.resource_uri)).body;
        if (s.state !== "Running") return undefined;
        const uuid = String(s.containers[0]).split("/").filter(Boolean).at(-1)!;
        return h.store.services.findContainer(uuid);
      },
      60_000,
      200,
    );
    const node = await h.store.nodes.findNode(container.node_uuid!);
    assert.ok(node && container.engine_id);
    return { engine: h.engines.forNode(node), id: container.engine_id };
  }

  test("the deploy says the node's containers run in user namespaces, as which host uid", () => {
    assert.match(
      deployLog,
      /Containers run in user namespaces: their root is host uid (\d+) \(subordinate ids of berth-remap\)/,
    );
    const uid = Number(/host uid (\d+)/.exec(deployLog)![1]);
    assert.ok(uid >= 100_000, `remapped uid ${uid}`);
    // The subordinate ranges Berth provisioned (or found) for its remap user.
    assert.match(readFileSync("/etc/subuid", "utf8"), new RegExp(`^berth-remap:${uid}:65536$`, "m"));
    assert.match(readFileSync("/etc/subgid", "utf8"), /^berth-remap:\d+:65536$/m);
  });

  test("root in a container binding / is an unprivileged uid on the host", async () => {
    const { engine, id } = await running({
      name: "rooted",
      run_command: "sleep 3600",
      bindings: [{ host_path: "/", container_path: "/host" }],
    });
    const who = await execIn(engine, id, ["id", "-u"], 10_000);
    assert.equal(who.output.trim(), "0", "root inside the container");

    const touched = await execIn(engine, id, ["touch", `/host${madeFile}`], 10_000);
    assert.equal(touched.exitCode, 0, touched.output);
    const owner = statSync(madeFile).uid;
    assert.ok(owner >= 100_000, `the file it made on the host belongs to uid ${owner}, not root`);
    assert.equal(owner, Number(/host uid (\d+)/.exec(deployLog)![1]));

    const read = await execIn(engine, id, ["cat", `/host${secretFile}`], 10_000);
    assert.notEqual(read.exitCode, 0, read.output);
    assert.match(read.output, /Permission denied/);
    assert.doesNotMatch(read.output, /only root may read this/);
  });

  test("a container on the host network runs in the host's user namespace only", async () => {
    const { engine, id } = await running({ name: "hostnet", run_command: "sleep 3600", net: "host" });
    const map = await execIn(engine, id, ["cat", "/proc/self/uid_map"], 10_000);
    assert.match(
      map.output,
      /^\s*0\s+0\s+4294967295\s*$/m,
      "not remapped: the engine refuses the host network otherwise",
    );
    const rooted = (
      await execIn(
        engine,
        (
          await running({ name: "plain", run_command: "sleep 3600" })
        ).id,
        ["cat", "/proc/self/uid_map"],
        10_000,
      )
    ).output;
    assert.match(rooted, /^\s*0\s+\d{6,}\s+65536\s*$/m, "an ordinary container is remapped");
  });
});

describe("an engine that cannot remap", { skip: unavailable ?? false }, () => {
  // The state directory sits under a directory that is not Berth's and lets no one else pass:
  // the remapped root could not reach the data-root, so the engine cannot remap here.
  const root = mkdtempSync(path.join(tmpdir(), "berth-stuck-"));
  const stateDir = path.join(root, "closed", "local-nodes");
  mkdirSync(stateDir, { recursive: true });
  chmodSync(path.join(root, "closed"), 0o700);
  const lines: string[] = [];
  const provider = (mode: "required" | "optional") =>
    new LocalProvider({ ...STUCK, stateDir, usernsRemap: mode, log: (l) => lines.push(l) });
  const nodeIds = [randomUUID(), randomUUID()];

  after(async () => {
    const p = provider("optional");
    for (const id of nodeIds)
      await p.terminateNode(id).catch((e: Error) => console.error(`cleanup: ${e.message}`));
    await p.teardownHost().catch((e: Error) => console.error(`cleanup: ${e.message}`));
    rmSync(root, { recursive: true, force: true });
  });

  test("fails the node with the reason unless an administrator allows running without", async () => {
    const p = provider("required");
    await assert.rejects(p.deployNode({ nodeId: nodeIds[0]!, index: 1 }), (err: Error) => {
      assert.match(
        err.message,
        /the engine cannot run with user-namespace remapping: .*closed does not let other users pass through it \(o\+x\)/,
      );
      assert.match(err.message, /BERTH_LOCAL_USERNS_REMAP=optional/);
      return true;
    });
    await p.terminateNode(nodeIds[0]!);
  });

  test("with BERTH_LOCAL_USERNS_REMAP=optional the node runs without remapping and says so", async () => {
    const p = provider("optional");
    const node = await p.deployNode({ nodeId: nodeIds[1]!, index: 2 });
    assert.equal(node.usernsRemap, undefined);
    assert.match(node.usernsRemapSkipped ?? "", /does not let other users pass through it/);
    assert.ok(
      lines.some((l) => /running WITHOUT user-namespace remapping \(container root is host root\)/.test(l)),
    );
    const engine = new DockerEngine({ endpoint: node.engineUrl });
    const id = await engine.createContainer({ image: "busybox:local", cmd: ["sleep", "60"], name: "plain" });
    await engine.startContainer(id);
    const map = await execIn(engine, id, ["cat", "/proc/self/uid_map"], 10_000);
    assert.match(map.output, /^\s*0\s+0\s+4294967295\s*$/m, "container root is host root here");
  });
});
