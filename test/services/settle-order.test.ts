// A service's state has one writer that derives it from containers read after the service row
// (orchestrator/settle.ts): a settle that read the containers early and wrote late used to put
// back a state another settle had already corrected (the events stream showed Partly running,
// then Running again while a container stayed stopped, until the next periodic pass). Here a
// settle is held between its read of the containers and its write while a container stops and
// its action settles the service; the held settle must not undo that.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { ServiceStore } from "../../src/store/services.ts";
import { call, deployCluster, finished, runningService, type Sim, startSim, until } from "./sim.ts";

let s: Sim;

before(async () => {
  // The periodic pass would repair the state: it must not run during the test.
  s = await startSim({ env: { BERTH_RECONCILE_INTERVAL_MS: "600000" } });
  await deployCluster(s, { name: "one", target_num_nodes: 1 });
});
after(() => s.close());

test("a settle that read the containers before a change never writes back the older state", async () => {
  const svc = await runningService(s, { name: "steady", target_num_containers: 2 });
  const since = await s.h.store.latestRevision();
  // Hold the next read of the service's containers (the settle started below) until released.
  const original = ServiceStore.prototype.containerHeadsOfService;
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  let armed = true;
  ServiceStore.prototype.containerHeadsOfService = async function (this: ServiceStore, uuid: string) {
    const rows = await original.call(this, uuid);
    if (armed && uuid === svc.uuid) {
      armed = false;
      await held;
    }
    return rows;
  };
  try {
    const early = s.h.orchestrator.settleService(svc.uuid, { keepTransitional: true });
    const stop = await call(s.h, s.alice, "POST", `${svc.containers[0]}stop/`);
    assert.equal(stop.status, 202, stop.raw);
    assert.equal((await finished(s, stop)).state, "Success");
    await until(s, svc.resource_uri, "Partly running");
    release();
    await early;
  } finally {
    ServiceStore.prototype.containerHeadsOfService = original;
    release();
  }
  const now = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
  assert.equal(now.state, "Partly running", "one of its two containers is stopped");
  const states = (await s.h.store.changesSince(since, 1000, ["service"]))
    .filter((c) => c.resource_uri === svc.resource_uri)
    .map((c) => c.state);
  assert.deepEqual(
    states,
    ["Partly running"],
    "the events stream shows the service's state once, never back",
  );
});
