// Removing engine containers unknown to Berth through Berth (issue 31): after a restore, containers
// made after the backup carry Berth's labels for records it does not hold; Berth reports them and
// never removes them by itself. Their node's users list them and remove one with an action in the
// audit log (API, and `berth node unknown ls|rm`); a container Berth holds is never removed this
// way (404, still running); another namespace sees 404s.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { LABELS } from "../../src/domain/service.ts";
import { FakeEngine } from "../../src/drivers/fake/fake-engine.ts";
import { berth } from "../cli/support.ts";
import { runningService, simulatedCluster } from "../streams/support.ts";
import { type Caller, call, createUser, type Harness, startHarness } from "../support/harness.ts";

let h: Harness;
let bob: Caller;
before(async () => {
  h = await startHarness();
  bob = await createUser(h, "bob");
});
after(() => h.close());

test("an unknown engine container is listed and removed through Berth, with an action; known ones are not", async () => {
  await simulatedCluster(h, h.admin, 1);
  const web = await runningService(h, h.admin, { name: "web", target_num_containers: 1 });
  const known = (await h.store.services.containersOfService(web.uuid))[0]!;
  const node = (await h.store.nodes.findNode(known.node_uuid))!;
  const engine = h.engines.forNode(node);
  assert.ok(engine instanceof FakeEngine);
  // What a restore of an older backup leaves: a container made after it, under a record now gone.
  const ghost = await engine.createContainer({
    name: "web-2",
    image: "busybox:local",
    labels: {
      [LABELS.container]: "0b0b0b0b-0000-4000-8000-000000000002",
      [LABELS.service]: web.uuid,
      [LABELS.namespace]: node.namespace,
      [LABELS.node]: node.uuid,
    },
  });
  await engine.startContainer(ghost);
  const nodeUri = `/api/infra/v1/${node.namespace}/node/${node.uuid}/`;

  const listed = await call(h, h.admin, "GET", `${nodeUri}unknowncontainer/`);
  assert.equal(listed.status, 200, listed.raw);
  assert.deepEqual(
    listed.body.objects.map((c: { id: string; container: string }) => [c.id, c.container]),
    [[ghost, "0b0b0b0b-0000-4000-8000-000000000002"]],
  );
  for (const [method, url] of [
    ["GET", `${nodeUri}unknowncontainer/`],
    ["DELETE", `${nodeUri}unknowncontainer/${ghost}/`],
  ] as const)
    assert.equal((await call(h, bob, method, url)).status, 404, `${method} ${url}`);

  // A container Berth holds: 404, left running.
  const refused = await call(h, h.admin, "DELETE", `${nodeUri}unknowncontainer/${known.engine_id}/`);
  assert.equal(refused.status, 404, refused.raw);
  assert.equal((await engine.inspectContainer(known.engine_id!))?.state, "running");
  assert.equal((await call(h, h.admin, "DELETE", `${nodeUri}unknowncontainer/not-an-id/`)).status, 400);

  // The unknown one, by its short id: removed, with an action on the node saying which and why.
  const removed = await call(h, h.admin, "DELETE", `${nodeUri}unknowncontainer/${ghost.slice(0, 12)}/`);
  assert.equal(removed.status, 200, removed.raw);
  assert.equal(removed.body.id, ghost);
  assert.equal(await engine.inspectContainer(ghost), undefined);
  const action = (await call(h, h.admin, "GET", removed.headers["x-platform-action-uri"] as string)).body;
  assert.equal(action.action, "Node Unknown Container Remove");
  assert.equal(action.state, "Success");
  assert.equal(action.object, nodeUri);
  const log = (await h.store.actions.actionLogTail(action.uuid, 10)).map((l) => l.line).join("\n");
  assert.match(
    log,
    new RegExp(
      `Removed engine container ${ghost.slice(0, 12)} \\(web-2, \\w+\\) from node ${node.uuid}: it carried Berth.s labels for container 0b0b0b0b`,
    ),
  );
  assert.deepEqual((await call(h, h.admin, "GET", `${nodeUri}unknowncontainer/`)).body.objects, []);
  assert.equal((await call(h, h.admin, "DELETE", `${nodeUri}unknowncontainer/${ghost}/`)).status, 404);

  // An engine that does not answer: a 409 that says so, never a server error.
  engine.setReachable(false);
  try {
    for (const [method, url] of [
      ["GET", `${nodeUri}unknowncontainer/`],
      ["DELETE", `${nodeUri}unknowncontainer/${ghost}/`],
    ] as const) {
      const down = await call(h, h.admin, method, url);
      assert.equal(down.status, 409, `${method} ${url}: ${down.raw}`);
      assert.equal(down.body.code, "node_unreachable");
      assert.match(down.body.error, /did not answer .*unreachable/);
    }
  } finally {
    engine.setReachable(true);
  }
});

test("berth node unknown ls and rm", async () => {
  const node = (await h.store.nodes.liveNodes())[0]!;
  const engine = h.engines.forNode(node) as FakeEngine;
  const ghost = await engine.createContainer({
    name: "web-3",
    image: "busybox:local",
    labels: {
      [LABELS.container]: "0b0b0b0b-0000-4000-8000-000000000003",
      [LABELS.namespace]: node.namespace,
      [LABELS.node]: node.uuid,
    },
  });
  const address = await h.app.listen({ port: 0, host: "127.0.0.1" });
  const env = { BERTH_URL: address, BERTH_USER: "admin", BERTH_APIKEY: h.admin.key };
  const ls = await berth(["node", "unknown", "ls", node.uuid], { env });
  assert.equal(ls.code, 0, ls.stderr);
  assert.match(
    ls.stdout,
    new RegExp(`${ghost.slice(0, 12)}\\s+web-3\\s+\\w+\\s+0b0b0b0b-0000-4000-8000-000000000003`),
  );
  const rm = await berth(["node", "unknown", "rm", node.uuid, ghost.slice(0, 12)], { env });
  assert.equal(rm.code, 0, rm.stderr);
  assert.equal(rm.stdout.trim(), `removed engine container ${ghost.slice(0, 12)} (web-3)`);
  assert.equal(await engine.inspectContainer(ghost), undefined);
  const again = await berth(["node", "unknown", "rm", node.uuid, ghost.slice(0, 12)], { env });
  assert.notEqual(again.code, 0);
});
