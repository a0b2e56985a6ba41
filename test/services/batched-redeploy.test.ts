// Redeploying a service of many containers works on its nodes in parallel, a few containers at a
// time on each node (one at a time in all with sequential_deployment), and every container ends
// up with a new engine container of the current definition; a node that fails fails the action,
// which names it, while the containers elsewhere are redeployed.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  call,
  deployCluster,
  engineContainersOfService,
  finished,
  runningService,
  type Sim,
  startSim,
  until,
  waitFor,
} from "./sim.ts";

/** Engine containers per node at once in an action (Orchestrator's default parallelism). */
const PER_NODE = 4;

describe("redeploying a service of many containers", () => {
  let s: Sim;

  before(async () => {
    s = await startSim();
    await deployCluster(s, { name: "pool", target_num_nodes: 4 });
  });
  after(() => s.close());

  const rowsOf = (uuid: string) => s.h.store.services.containersOfService(uuid);
  const waitingOnEngines = () => [...s.engines.values()].map((e) => e.waiting);

  /** Holds every engine's creates, stops and removes; the returned function lets them all go. */
  function holdEngines(): () => void {
    const releases = [...s.engines.values()].map((e) => e.hold());
    return () => {
      for (const release of releases) release();
    };
  }

  test("every container gets a new engine container, a few at a time on each node, all nodes at once", async () => {
    const svc = await runningService(s, { name: "fleet", target_num_containers: 24 });
    const before = await rowsOf(svc.uuid);
    assert.equal(before.length, 24);
    // Spread evenly: six containers on each of the four nodes.
    assert.deepEqual(
      [...s.engines.keys()].map((node) => before.filter((c) => c.node_uuid === node).length),
      [6, 6, 6, 6],
    );
    const release = holdEngines();
    const res = await call(s.h, s.alice, "POST", `${svc.resource_uri}redeploy/`);
    assert.equal(res.status, 202, res.raw);
    try {
      // Each node's engine is asked for PER_NODE containers at once, every node at the same time.
      await waitFor("every node working on its first containers", async () =>
        waitingOnEngines().every((n) => n === PER_NODE) ? true : undefined,
      );
      await s.h.reconciler.settle();
      assert.deepEqual(waitingOnEngines(), [PER_NODE, PER_NODE, PER_NODE, PER_NODE], "never more per node");
    } finally {
      release();
    }
    const a = await finished(s, res);
    assert.equal(a.state, "Success", a.log.join("\n"));
    const redeployed = await until(s, svc.resource_uri, "Running");
    assert.equal(redeployed.synchronized, true);

    const rows = await rowsOf(svc.uuid);
    const old = new Map(before.map((c) => [c.uuid, c]));
    for (const c of rows) {
      assert.equal(c.state, "Running", `${c.name} runs`);
      assert.notEqual(c.engine_id, old.get(c.uuid)!.engine_id, `${c.name} has a new engine container`);
      assert.notEqual(c.generation, old.get(c.uuid)!.generation);
      assert.equal(c.node_uuid, old.get(c.uuid)!.node_uuid, `${c.name} stays on its node`);
      assert.ok(
        a.log.includes(`Created ${c.name} with the volumes of its previous container`),
        `the log tells ${c.name} was made again:\n${a.log.join("\n")}`,
      );
    }
    // The old engine containers are gone: one engine container per record, the recorded one.
    const onEngines = await engineContainersOfService(s, svc.resource_uri);
    assert.deepEqual(onEngines.map((x) => x.id).sort(), rows.map((c) => c.engine_id).sort());
    assert.ok(onEngines.every((x) => x.running));
  });

  test("a node's next container is replaced while the ones before it wait to count as started and for their old containers to go", async () => {
    const svc = await runningService(s, { name: "relay", target_num_containers: 24 });
    const before = await rowsOf(svc.uuid);
    const perNode = [...s.engines.keys()].map((node) => before.filter((c) => c.node_uuid === node).length);
    assert.ok(
      perNode.some((n) => n > PER_NODE),
      `a node holds more containers than it works on at once: ${perNode}`,
    );
    // Every removal of an old engine container waits until the test lets it go.
    let letGo = () => {};
    const gate = new Promise<void>((resolve) => {
      letGo = resolve;
    });
    const restore = [...s.engines.values()].map((e) => {
      const original = e.removeContainer;
      e.removeContainer = async (id, opts) => {
        await gate;
        return original.call(e, id, opts);
      };
      return () => {
        e.removeContainer = original;
      };
    });
    const made = () => [...s.engines.values()].reduce((n, e) => n + e.created.length, 0);
    const madeBefore = made();
    let res: Awaited<ReturnType<typeof call>>;
    try {
      res = await call(s.h, s.alice, "POST", `${svc.resource_uri}redeploy/`);
      assert.equal(res.status, 202, res.raw);
      // Every record gets its new engine container, running, while no old one has gone yet: the
      // slot of a node is the engine's work, not the wait that follows it.
      await waitFor(
        "every new engine container running while the old ones wait to be removed",
        async () => {
          if (made() - madeBefore < before.length) return undefined;
          const running = (await engineContainersOfService(s, svc.resource_uri)).filter((x) => x.running);
          return running.length === before.length || undefined;
        },
        20_000,
      );
      const during = (await call(s.h, s.alice, "GET", res.headers["x-platform-action-uri"] as string)).body;
      assert.equal(during.state, "In progress", "the redeploy ends only once its old containers are gone");
    } finally {
      letGo();
      for (const r of restore) r();
    }
    const a = await finished(s, res);
    assert.equal(a.state, "Success", a.log.join("\n"));
    const rows = await rowsOf(svc.uuid);
    const onEngines = await engineContainersOfService(s, svc.resource_uri);
    assert.deepEqual(onEngines.map((x) => x.id).sort(), rows.map((c) => c.engine_id).sort());
  });

  test("sequential_deployment redeploys one container after the other", async () => {
    const svc = await runningService(s, {
      name: "inline",
      target_num_containers: 4,
      sequential_deployment: true,
    });
    const before = await rowsOf(svc.uuid);
    const release = holdEngines();
    const res = await call(s.h, s.alice, "POST", `${svc.resource_uri}redeploy/`);
    assert.equal(res.status, 202, res.raw);
    try {
      await waitFor("the first container being redeployed", async () =>
        waitingOnEngines().some((n) => n > 0) ? true : undefined,
      );
      await s.h.reconciler.settle();
      assert.equal(
        waitingOnEngines().reduce((x, y) => x + y),
        1,
        "one engine call at a time over all nodes",
      );
      const rows = await rowsOf(svc.uuid);
      assert.equal(
        rows.filter((c) => c.generation !== before.find((b) => b.uuid === c.uuid)!.generation).length,
        1,
        "only the container being redeployed has moved to a new generation",
      );
    } finally {
      release();
    }
    const a = await finished(s, res);
    assert.equal(a.state, "Success", a.log.join("\n"));
    const created = a.log.filter((l) => l.startsWith("Created "));
    assert.deepEqual(
      created,
      before.map((c) => `Created ${c.name} with the volumes of its previous container`),
      "in the containers' order",
    );
  });

  test("a node that fails ends the action Failed naming it; the containers on the other nodes are redeployed", async () => {
    const svc = await runningService(s, { name: "partial", target_num_containers: 8 });
    const before = await rowsOf(svc.uuid);
    const [broken, engine] = [...s.engines].find(([node]) => before.some((c) => c.node_uuid === node))!;
    const node = (await s.h.store.nodes.findNode(broken))!;
    const nodeName = node.nickname || node.external_fqdn;
    const onBroken = before.filter((c) => c.node_uuid === broken);
    engine.setReachable(false);
    try {
      const res = await call(s.h, s.alice, "POST", `${svc.resource_uri}redeploy/`);
      assert.equal(res.status, 202, res.raw);
      const a = await finished(s, res);
      assert.equal(a.state, "Failed", a.log.join("\n"));
      const failure = a.log.find((l) => l.startsWith('Step "redeploy" failed'));
      assert.ok(failure, a.log.join("\n"));
      for (const c of onBroken) {
        assert.ok(
          failure.includes(`${c.name} on node ${nodeName}`),
          `names ${c.name} and its node: ${failure}`,
        );
      }
      for (const c of before.filter((x) => x.node_uuid !== broken)) {
        assert.ok(!failure.includes(`${c.name} on node`), `${c.name} did not fail: ${failure}`);
      }
      const rows = new Map((await rowsOf(svc.uuid)).map((c) => [c.uuid, c]));
      for (const c of before.filter((x) => x.node_uuid !== broken)) {
        const now = rows.get(c.uuid)!;
        assert.equal(now.state, "Running", `${c.name} runs`);
        assert.notEqual(now.engine_id, c.engine_id, `${c.name} was redeployed`);
      }
    } finally {
      engine.setReachable(true);
    }
  });
});
