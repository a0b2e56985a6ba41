// The reconciler's controllers (src/orchestrator/controllers/) through what a tenant sees: work an
// engine refused is tried again after a back-off, not at the next periodic pass (an hour here), and
// a service's state follows its containers through the change feed, whichever replica wrote them.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Store } from "../../src/store/store.ts";
import {
  call,
  containersOf,
  deployCluster,
  engineContainer,
  operate,
  runningService,
  type Sim,
  startSim,
  until,
  waitFor,
} from "./sim.ts";

let s: Sim;

before(async () => {
  // No periodic pass during the tests: only events, the change feed and back-offs bring work.
  s = await startSim({ env: { BERTH_RECONCILE_INTERVAL_MS: "3600000" } });
  await deployCluster(s, { name: "pool", target_num_nodes: 2 });
  await s.h.reconciler.resync();
});
after(() => s.close());

describe("controllers", () => {
  test("a link host rewrite the engine refused is tried again after a back-off, not at the next pass", async () => {
    const web = await runningService(s, {
      name: "web",
      container_ports: [{ protocol: "tcp", inner_port: 80 }],
    });
    const lb = await runningService(s, {
      name: "lb",
      linked_to_service: [{ to_service: web.resource_uri, name: "web" }],
    });
    const lbContainer = lb.containers[0] as string;
    const { engine, id } = await engineContainer(s, lbContainer);
    // The engine refuses the next rewrite of the client's host entries once (busy, say).
    const replace = engine.replaceHostEntries.bind(engine);
    let refused = 0;
    engine.replaceHostEntries = async (target, entries) => {
      if (target === id && refused === 0) {
        refused += 1;
        throw new Error("the engine is busy");
      }
      return replace(target, entries);
    };
    assert.equal(
      (await call(s.h, s.alice, "PATCH", web.resource_uri, { target_num_containers: 2 })).status,
      200,
    );
    await operate(s, web.resource_uri, "scale");
    const [, web2] = await containersOf(s, (await call(s.h, s.alice, "GET", web.resource_uri)).body);
    await waitFor(
      "web-2's host entry in lb-1 after the refused rewrite",
      async () => engine.hostEntries(id).includes(`web-2:${web2!.private_ip}`),
      10_000,
    );
    assert.equal(refused, 1);
  });

  test("a container change another replica committed settles its service once it is announced", async () => {
    const svc = await runningService(s, { name: "remote", target_num_containers: 2 });
    const [c] = await containersOf(s, svc);
    // Another replica on the same database observed the container exit (its commits do not wake
    // this process's followers until its notification arrives).
    const other = new Store(s.h.store.db, s.h.store.dialect);
    await other.mutate("container", c!.uuid, () => ({ observed: "exited" as const, exit_code: 1 }));
    s.h.store.announceRemoteChange("container");
    const partly = await until(s, svc.resource_uri, "Partly running");
    assert.equal(partly.stopped_num_containers, 1);
  });
});
