// The router controller's work per change (issue 34, no stalls): a service change in a namespace
// queues the routers of all its nodes, and what that costs must not grow with the number of nodes:
// the nodes are read in one statement when the namespace is queued (not one read per node), and
// the routers' configuration is built and serialized once per change, shared by the nodes.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { type Caller, call, createUser, type Harness, startHarness } from "../support/harness.ts";
import { fakeEngineNodeRow } from "../support/rows.ts";

let h: Harness;
let bob: Caller;
let carol: Caller;

// The controller's gathering timer does not hold the process open: this does, while the file runs.
const keepAlive = setInterval(() => {}, 1000);

before(async () => {
  h = await startHarness({
    env: { BERTH_ROUTER_INTERVAL_MS: "3600000", BERTH_RECONCILE_INTERVAL_MS: "3600000" },
  });
  bob = await createUser(h, "bob");
  carol = await createUser(h, "carol");
  const now = Date.now();
  // bob's namespace has 2 simulated nodes, carol's 40: the same change costs the same in both.
  await h.store.transaction(async (tx) => {
    for (let i = 0; i < 42; i++)
      await tx.nodes.insertNode(
        fakeEngineNodeRow(i < 2 ? "bob" : "carol", now, { public_ip: `10.7.0.${i + 1}`, slot: i }),
      );
  });
});
after(async () => {
  clearInterval(keepAlive);
  await h.close();
});

/** The statements one PATCH of the caller's service sets off until the routers took it (the fewest of 3). */
async function changeCost(who: Caller): Promise<number> {
  const created = await call(h, who, "POST", "/api/app/v1/service/", {
    image: "busybox:local",
    name: "web",
    container_ports: [{ protocol: "tcp", inner_port: 8080 }],
    domains: [{ host: `${who.username}.example.test`, tls: "off" }],
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  await h.router.controller.settle();
  let best = Number.POSITIVE_INFINITY;
  for (let round = 1; round <= 3; round++) {
    const { statements } = await h.db.statements.during(async () => {
      const r = await call(h, who, "PATCH", created.body.resource_uri, { target_num_containers: round + 1 });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      await h.router.controller.settle();
    });
    best = Math.min(best, statements);
  }
  return best;
}

test("a service change costs the routers' controller the same whether its namespace has 2 nodes or 40", async () => {
  const few = await changeCost(bob);
  const many = await changeCost(carol);
  // Every node's router took the namespace's routes (the work was done, not skipped).
  for (const n of await h.store.nodes.liveNodes({ namespace: "carol" }))
    assert.ok(
      h.router.fakes.get(n.uuid)?.current?.routes.some((r) => r.host === "carol.example.test"),
      `node ${n.uuid} routes carol.example.test`,
    );
  // A generous margin for background work; one statement per node would be 38 more.
  assert.ok(many <= few + 6, `statements per change: ${few} with 2 nodes, ${many} with 40`);
});
