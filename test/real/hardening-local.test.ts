// Honest outcomes on real engines (issue 14): on a cluster of 2 `local` nodes, a service with a
// fixed published port scaled past the node count ends Failed naming the port, with the containers
// that fit Running and no engine container or record left that never ran; a service asking for more
// memory than any node has is refused with the figures and leaves nothing behind; and a cluster
// deploy whose every node fails (its host bridge name is taken by an interface Berth did not create)
// ends Failed with the cluster `Empty cluster`, never Success.
//
// Needs root, dockerd, iproute2, iptables and busybox-static, like every file of this tier;
// skipped without them locally, failing under CI=true.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { LABELS } from "../../src/domain/service.ts";
import {
  allowPrivileges,
  type Caller,
  call,
  createUser,
  type Harness,
  startHarness,
  waitFor,
} from "../support/harness.ts";
import {
  deployLocalCluster,
  LOCAL_NODE_TYPE,
  localNodesUnavailable,
  tearDownLocalLab,
} from "../support/local-lab.ts";
import { finishedAction, getter } from "../support/real-api.ts";

const run = promisify(execFile);

// Lab ranges and bridges of this file's own: the working lab, and one whose bridge name is taken.
const LAB = { labRange: "10.217.0.0/16", bridgeName: "berth-h0" };
const TAKEN = { labRange: "10.216.0.0/16", bridgeName: "berth-h1" };
const USER = "alice";

const unavailable = (await localNodesUnavailable(LAB)) ?? (await localNodesUnavailable(TAKEN));

interface ServiceView {
  uuid: string;
  resource_uri: string;
  state: string;
  containers: string[];
}

interface ContainerView {
  state: string;
  node: string;
}

const labEnv = (lab: typeof LAB) => ({
  BERTH_LOCAL_LAB_RANGE: lab.labRange,
  BERTH_LOCAL_BRIDGE: lab.bridgeName,
  BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
  BERTH_RECONCILE_INTERVAL_MS: "300",
});

describe("honest outcomes on real engines", { skip: unavailable ?? false }, () => {
  let h: Harness;
  let alice: Caller;
  const nodeUuids: string[] = [];

  before(async () => {
    h = await startHarness({ env: labEnv(LAB) });
    alice = await createUser(h, USER);
  });

  after(async () => {
    await tearDownLocalLab(h, { nodeUuids });
  });

  const get = <T>(uri: string) => getter(h, alice)<T>(uri);

  const createService = async (body: Record<string, unknown>): Promise<ServiceView> => {
    const res = await call(h, alice, "POST", "/api/app/v1/service/", { image: "busybox:local", ...body });
    assert.equal(res.status, 201, res.raw);
    return res.body as ServiceView;
  };

  /** Every engine container of a service on every node, with whether it runs. */
  const engineBoxes = async (service: string) => {
    const out: { node: string; running: boolean }[] = [];
    for (const n of await h.store.nodes.liveNodes({ provider: "local" })) {
      const engine = h.engines.forNode(n);
      for (const s of await engine.listContainers({ labels: { [LABELS.service]: service }, all: true })) {
        const v = await engine.inspectContainer(s.id);
        if (v) out.push({ node: n.uuid, running: v.running });
      }
    }
    return out;
  };

  test("a cluster of 2 local nodes is deployed", { timeout: 90_000 }, async () => {
    const deployed = await deployLocalCluster(h, alice, {
      name: "pair",
      targetNumNodes: 2,
      timeoutMs: 80_000,
    });
    nodeUuids.push(...deployed.nodeUuids);
    assert.equal(nodeUuids.length, 2);
  });

  test("a fixed published port scaled past the node count: Failed naming the port, the rest Running", {
    timeout: 90_000,
  }, async () => {
    const svc = await createService({
      name: "fixed",
      run_command: "sleep 100000",
      target_num_containers: 3,
      container_ports: [{ protocol: "tcp", inner_port: 80, outer_port: 18080, published: true }],
    });
    const res = await call(h, alice, "POST", `${svc.resource_uri}start/`);
    assert.equal(res.status, 202, res.raw);
    const action = await finishedAction(h, alice, res);
    assert.equal(action.state, "Failed", action.log.join("\n"));
    assert.ok(
      action.log.some((l) => /18080\/tcp already taken/.test(l)),
      `the log names the port:\n${action.log.join("\n")}`,
    );

    const after = await waitFor(
      "the service to settle Partly running",
      async () => {
        const s = await get<ServiceView>(svc.resource_uri);
        return s.state === "Partly running" ? s : undefined;
      },
      20_000,
      100,
    );
    const containers = await Promise.all(after.containers.map((uri) => get<ContainerView>(uri)));
    assert.deepEqual(
      containers.map((c) => c.state),
      ["Running", "Running"],
      "two records, both Running: none for the container that could not be placed",
    );
    assert.equal(new Set(containers.map((c) => c.node)).size, 2, "one per node");
    const boxes = await engineBoxes(svc.uuid);
    assert.equal(boxes.length, 2, `the engines hold exactly the two: ${JSON.stringify(boxes)}`);
    assert.ok(
      boxes.every((b) => b.running),
      "and both run",
    );
    assert.equal(new Set(boxes.map((b) => b.node)).size, 2);
  });

  test("more memory than any node has: refused with the figures, nothing left behind", {
    timeout: 60_000,
  }, async () => {
    const svc = await createService({ name: "huge", run_command: "sleep 100000", memory: 1_000_000 });
    const dry = await call(h, alice, "POST", `${svc.resource_uri}start/?dry_run=true`);
    assert.equal(dry.status, 200, dry.raw);
    assert.equal(dry.body.fits, false);
    assert.match(dry.body.explanation.join("\n"), /needs 1000000 MB of memory, \d+ MB of \d+ MB are free/);

    const res = await call(h, alice, "POST", `${svc.resource_uri}start/`);
    assert.equal(res.status, 202, res.raw);
    const action = await finishedAction(h, alice, res);
    assert.equal(action.state, "Failed", action.log.join("\n"));
    for (const uuid of nodeUuids) {
      assert.ok(
        action.log.some((l) => l.includes(uuid) && /needs 1000000 MB of memory/.test(l)),
        `node ${uuid} is explained:\n${action.log.join("\n")}`,
      );
    }
    const after = await get<ServiceView>(svc.resource_uri);
    assert.deepEqual(after.containers, []);
    assert.notEqual(after.state, "Running");
    assert.deepEqual(await engineBoxes(svc.uuid), []);
  });
});

describe("a cluster deploy whose nodes all fail", { skip: unavailable ?? false }, () => {
  let h: Harness;
  let alice: Caller;
  let taken = false;

  before(async () => {
    // An interface Berth did not create holds the name of the lab's host bridge.
    await run("ip", ["link", "add", TAKEN.bridgeName, "type", "bridge"]);
    taken = true;
    h = await startHarness({ env: labEnv(TAKEN) });
    alice = await createUser(h, USER);
    await allowPrivileges(h, USER, { local_nodes: true });
  });

  after(async () => {
    await tearDownLocalLab(h);
    if (taken) await run("ip", ["link", "del", TAKEN.bridgeName]).catch(() => {});
  });

  test("ends Failed, one sentence per node, and the cluster is an Empty cluster", {
    timeout: 90_000,
  }, async () => {
    const created = await call(h, alice, "POST", "/api/infra/v1/nodecluster/", {
      name: "doomed",
      ...LOCAL_NODE_TYPE,
      target_num_nodes: 2,
    });
    assert.equal(created.status, 201, created.raw);
    const res = await call(h, alice, "POST", `${created.body.resource_uri}deploy/`);
    assert.equal(res.status, 202, res.raw);
    const action = await finishedAction(h, alice, res, 80_000);
    assert.equal(action.state, "Failed", action.log.join("\n"));
    assert.ok(
      action.log.some((l) => /2 of 2 nodes? failed to deploy/.test(l)),
      action.log.join("\n"),
    );
    assert.ok(
      action.log.some((l) => l.includes(`interface ${TAKEN.bridgeName} exists`)),
      `the reason is given:\n${action.log.join("\n")}`,
    );
    const cluster = await getter(h, alice)<{ state: string }>(created.body.resource_uri);
    assert.equal(cluster.state, "Empty cluster");
    // The interface that was there before is still there: Berth did not take it over.
    await run("ip", ["link", "show", "dev", TAKEN.bridgeName]);
  });
});
