// The engine round trips of a service's start, stop and terminate: per container only the calls
// that do the work (create, start and a look, and one more look once it has stayed up the
// minimum time: a start tells the truth, issue 29; stop and one look; remove), and per node one
// listing of Berth's containers for the whole operation instead of one listing per container
// (issue 18: a deploy on real engines costs what raw create+start costs). And the listing being
// shared does not weaken crash safety: a container of a record made by another actor after that
// listing is found, not made twice, and an observation does not call it missing.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  createService,
  deployCluster,
  engineContainersOfService,
  operate,
  type Sim,
  startSim,
} from "./sim.ts";

/** Another actor's work on one container: the runtime's batched operations over a batch of one. */
const ONE = { perNode: 1, total: 1 };

/** How many of each call, sorted by name. */
function tally(calls: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of [...calls].sort()) out[c] = (out[c] ?? 0) + 1;
  return out;
}

/**
 * The tally with its inspections checked apart: a look right after the start and one more once
 * the container has stayed up the minimum time, which that first look already shows when the
 * machine is slow (so n to 2n of them, never more).
 */
function tallyLooks(calls: readonly string[], n: number): Record<string, number> {
  const out = tally(calls);
  const looks = out.inspectContainer ?? 0;
  assert.ok(looks >= n && looks <= 2 * n, `${looks} inspections of ${n} containers`);
  delete out.inspectContainer;
  return out;
}

describe("the engine calls of a service of 10 containers on 2 nodes", () => {
  let s: Sim;
  let service: { uuid: string; resource_uri: string };
  /** Containers of the service per node. */
  const perNode = new Map<string, number>();

  before(async () => {
    s = await startSim({ env: { BERTH_RECONCILE_INTERVAL_MS: "3600000" } });
    await deployCluster(s, { name: "pair", target_num_nodes: 2 });
    // Only the operations' own calls are counted: the reconciler (engine events, passes) is off.
    s.h.reconciler.stop();
    service = await createService(s, {
      name: "ten",
      image: "busybox:local",
      run_command: "sleep 100000",
      target_num_containers: 10,
    });
  });
  after(() => s.close());

  /** The calls each node's engine received while `op` ran on the service, by node. */
  async function callsOf(op: string): Promise<Map<string, string[]>> {
    for (const e of s.engines.values()) e.calls.length = 0;
    await operate(s, service.resource_uri, op);
    return new Map([...s.engines].map(([node, e]) => [node, [...e.calls]]));
  }

  test("start: a create, a start and two inspects per container; one listing and one image check per node", async () => {
    const calls = await callsOf("start");
    const rows = await s.h.store.services.containersOfService(service.uuid);
    assert.equal(rows.filter((c) => c.state === "Running").length, 10, "every container runs");
    for (const c of rows) perNode.set(c.node_uuid, (perNode.get(c.node_uuid) ?? 0) + 1);
    assert.equal(perNode.size, 2, "the containers are spread over both nodes");
    for (const [node, n] of perNode) {
      assert.ok(n >= 2, `node ${node} runs ${n} containers`);
      assert.deepEqual(tallyLooks(calls.get(node) ?? [], n), {
        createContainer: n,
        hasImage: 1,
        "listContainers io.berth.node": 1,
        startContainer: n,
      });
    }
  });

  test("stop: a stop and an inspect per container; one listing per node", async () => {
    const calls = await callsOf("stop");
    for (const [node, n] of perNode) {
      assert.deepEqual(tally(calls.get(node) ?? []), {
        inspectContainer: n,
        "listContainers io.berth.node": 1,
        stopContainer: n,
      });
    }
  });

  test("start again: a start and two inspects per stopped container, no create", async () => {
    const calls = await callsOf("start");
    for (const [node, n] of perNode) {
      assert.deepEqual(tallyLooks(calls.get(node) ?? [], n), {
        "listContainers io.berth.node": 1,
        startContainer: n,
      });
    }
  });

  test("redeploy: the new container made, started and inspected twice, the old one stopped and removed", async () => {
    const calls = await callsOf("redeploy");
    for (const [node, n] of perNode) {
      assert.deepEqual(tallyLooks(calls.get(node) ?? [], n), {
        createContainer: n,
        // A redeploy takes the image's current content: asked once per node.
        hasImage: 1,
        "listContainers io.berth.node": 1,
        removeContainer: n,
        startContainer: n,
        stopContainer: n,
      });
    }
    const onEngine = await engineContainersOfService(s, service.resource_uri);
    assert.equal(onEngine.length, 10, "the old containers are gone");
    assert.ok(onEngine.every((x) => x.running));
  });

  test("terminate: a remove per container; one listing per node", async () => {
    const calls = await callsOf("terminate");
    for (const [node, n] of perNode) {
      assert.deepEqual(tally(calls.get(node) ?? []), {
        "listContainers io.berth.node": 1,
        removeContainer: n,
      });
    }
    assert.deepEqual(await engineContainersOfService(s, service.resource_uri), [], "nothing is left");
  });
});

describe("a container made after the start's listing of its node", () => {
  let s: Sim;

  before(async () => {
    s = await startSim({ env: { BERTH_RECONCILE_INTERVAL_MS: "3600000" } });
    await deployCluster(s, { name: "one", target_num_nodes: 1 });
  });
  after(() => s.close());

  test("is found by its name and recorded, not made a second time", async () => {
    const svc = await createService(s, {
      name: "three",
      image: "busybox:local",
      run_command: "sleep 100000",
      target_num_containers: 3,
    });
    const [engine] = [...s.engines.values()];
    assert.ok(engine);
    let madeMeanwhile: string | undefined;
    // Another actor (a run of the step that overlapped this one after its lease lapsed) makes the
    // engine container of one record just after the start has listed the node.
    engine.afterNodeListing = async () => {
      const [c] = await s.h.store.services.containersOfService(svc.uuid);
      assert.ok(c);
      const errors = await s.h.runtime.ensureRunningMany([c], { limits: ONE, log: async () => {} });
      assert.deepEqual(errors, []);
      madeMeanwhile = (await s.h.store.services.findContainer(c.uuid))?.engine_id ?? undefined;
    };
    const a = await operate(s, svc.resource_uri, "start");
    assert.ok(madeMeanwhile, "the other actor made its container after the listing");

    const onEngine = await engineContainersOfService(s, svc.resource_uri);
    assert.equal(onEngine.length, 3, "one engine container per record");
    assert.ok(onEngine.every((x) => x.running));
    const rows = await s.h.store.services.containersOfService(svc.uuid);
    assert.deepEqual(
      rows.map((c) => c.state),
      ["Running", "Running", "Running"],
    );
    assert.ok(
      rows.some((c) => c.engine_id === madeMeanwhile),
      "the record holds the container made meanwhile",
    );
    assert.ok(
      a.log.some((l) => /^Found three-\d made meanwhile$/.test(l)),
      a.log.join("\n"),
    );
    assert.ok(onEngine.every((x) => rows.some((c) => c.engine_id === x.id)));
  });
});

describe("an observation of a node with a container made after its listing", () => {
  let s: Sim;

  before(async () => {
    s = await startSim({ env: { BERTH_RECONCILE_INTERVAL_MS: "3600000" } });
    await deployCluster(s, { name: "one", target_num_nodes: 1 });
  });
  after(() => s.close());

  test("leaves that container's record as the actor that made it wrote it, and marks a gone one missing", async () => {
    const svc = await createService(s, {
      name: "pair",
      image: "busybox:local",
      run_command: "sleep 100000",
      target_num_containers: 2,
    });
    await operate(s, svc.resource_uri, "start");
    const [engine] = [...s.engines.values()];
    assert.ok(engine);
    // Both records as an observer reads them; then both engine containers go (a user's `docker rm`).
    const read = await s.h.store.services.containersOfService(svc.uuid);
    assert.deepEqual(
      read.map((c) => c.state),
      ["Running", "Running"],
    );
    for (const c of read) await engine.removeContainer(c.engine_id!, { force: true, removeVolumes: false });
    const [remade, gone] = read;
    assert.ok(remade && gone);
    // Just after the observer lists the node, another actor makes the first record's container
    // again and records it.
    let made: string | undefined;
    engine.afterNodeListing = async () => {
      const errors = await s.h.runtime.ensureRunningMany([remade], { limits: ONE, log: async () => {} });
      assert.deepEqual(errors, []);
      made = (await s.h.store.services.findContainer(remade.uuid))?.engine_id ?? undefined;
    };
    await s.h.runtime.observeMany(read, { perNode: 4 });
    assert.ok(made, "the other actor made its container after the listing");

    const rows = new Map((await s.h.store.services.containersOfService(svc.uuid)).map((c) => [c.uuid, c]));
    assert.equal(rows.get(remade.uuid)?.state, "Running", "the container made meanwhile runs");
    assert.equal(rows.get(remade.uuid)?.engine_id, made, "its record still holds it");
    assert.equal(rows.get(gone.uuid)?.engine_id, null, "the container that is gone is missing");
    assert.notEqual(rows.get(gone.uuid)?.state, "Running");
  });
});
