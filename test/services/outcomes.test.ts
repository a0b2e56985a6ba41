// Outcomes that say what happened (issue 14 item 2), on simulated nodes: a start whose pulls fail
// ends Failed, its log says why per container, and no record is left of a container that never
// reached its engine; the service shows the state its containers really have.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { call, createService, deployCluster, finished, type Sim, startSim } from "./sim.ts";

let s: Sim;

before(async () => {
  s = await startSim();
  await deployCluster(s, { name: "pool", target_num_nodes: 1 });
});
after(() => s.close());

test("a start whose image cannot be pulled ends Failed, leaves no container record, and says why", async () => {
  const svc = await createService(s, {
    image: "registry.invalid/nobody/missing:1",
    name: "ghost",
    target_num_containers: 2,
  });
  const res = await call(s.h, s.alice, "POST", `${svc.resource_uri}start/`);
  assert.equal(res.status, 202, res.raw);
  const a = await finished(s, res);
  assert.equal(a.state, "Failed", a.log.join("\n"));
  assert.ok(
    a.log.some((l) => /ghost-1 never reached its engine/.test(l)),
    a.log.join("\n"),
  );
  const after = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
  assert.deepEqual(after.containers, [], "no record of a container that never ran");
  assert.equal(after.state, "Not running");
  const listed = await call(s.h, s.alice, "GET", `/api/app/v1/container/?service=${svc.resource_uri}`);
  assert.ok(
    listed.body.objects.every((c: { state: string }) => c.state === "Terminated"),
    JSON.stringify(listed.body.objects.map((c: { state: string }) => c.state)),
  );
});
