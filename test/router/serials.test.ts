// Certificate serials outlive a restart (issue 30, router/serials.ts, migration 0037): a renewal
// is a new serial on a node's router, seen whatever the difference of expiries; the serial last
// served is in the database, so a renewal the router made while Berth was restarting is shown with
// its new expiry and an event. Before, serials were kept in memory only and the first report after
// a restart merely set the starting point: a renewal seconds from the old expiry went unseen.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { FakeRouter } from "../../src/drivers/router/fake-router.ts";
import { ServedSerials } from "../../src/router/serials.ts";
import { deployCluster, type Sim, startSim, waitFor } from "../services/sim.ts";
import { servingDomain } from "./support.ts";

let s: Sim;

before(async () => {
  s = await startSim({ env: { BERTH_ROUTER_INTERVAL_MS: "200" } });
  await deployCluster(s, { name: "pool", target_num_nodes: 1 });
});
after(() => s.close());

test("a renewal made while Berth restarted is shown with its new expiry and an event", async () => {
  const [node] = await s.h.store.nodes.liveNodes({ namespace: "alice" });
  const router: FakeRouter = await waitFor("alice's router", async () => s.h.router.fakes.get(node!.uuid));
  const { svc, certificate } = await servingDomain(s, "site", "site.test");
  const first = await waitFor("the certificate issued", async () => {
    const c = await certificate();
    return c?.state === "issued" ? c : undefined;
  });
  await waitFor("its serial stored", async () => {
    const row = await s.h.store.db
      .selectFrom("router_serials")
      .selectAll()
      .where("host", "=", "site.test")
      .executeTakeFirst();
    return row?.node_uuid === node!.uuid || undefined;
  });

  // Berth restarts (the controller's memory of serials is gone); meanwhile the router renewed, 20 s
  // after the first issue: a new serial, an expiry 20 s later.
  const records = (s.h.router.controller as unknown as { records: { serials: ServedSerials } }).records;
  records.serials = new ServedSerials(s.h.store, () => Date.now());
  const since = await s.h.store.latestRevision();
  router.renew("site.test", Date.parse(first.expires) - router.lifetimeMs + 20_000);
  const shown = await waitFor("the renewed certificate shown", async () => {
    const c = await certificate();
    return c?.expires !== first.expires ? c : undefined;
  });
  assert.equal(shown.state, "issued");
  assert.equal(Date.parse(shown.expires) - Date.parse(first.expires), 20_000);
  const events = await s.h.store.changesSince(since, 1000, ["service"]);
  assert.ok(
    events.some((e) => e.resource_uri === svc.resource_uri && e.action === "update"),
    "an update event of the service tells of the renewal",
  );
});
