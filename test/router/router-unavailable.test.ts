// A router that cannot run on its node (issue 30: Caddy is not installed on an agent's host) is
// shown where its owner looks, never only in a log: an error on the certificate of each domain it
// would serve, with an update event of the service, gone once the router runs. The agent says so
// with a code Berth's driver turns into the same error as a local node's (RouterUnavailable).
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { AgentRouterService } from "../../src/agent/router.ts";
import { AgentRouter } from "../../src/drivers/router/agent-router.ts";
import { FakeRouter } from "../../src/drivers/router/fake-router.ts";
import { RouterUnavailable } from "../../src/drivers/router/router.ts";
import { deployCluster, type Sim, startSim, waitFor } from "../services/sim.ts";
import { servingDomain } from "./support.ts";

const NOT_INSTALLED = "Caddy is not installed: the agent's router needs it (apt-get install caddy)";
let s: Sim;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-router-unavailable-"));

before(async () => {
  s = await startSim({ env: { BERTH_ROUTER_INTERVAL_MS: "200" } });
  await deployCluster(s, { name: "pool", target_num_nodes: 1 });
});
after(async () => {
  await s.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test("a router that cannot run shows on its services' domains with an event, until it runs", async () => {
  const [node] = await s.h.store.nodes.liveNodes({ namespace: "alice" });
  const router: FakeRouter = await waitFor("alice's router", async () => s.h.router.fakes.get(node!.uuid));
  router.unavailable = NOT_INSTALLED;
  const since = await s.h.store.latestRevision();
  const { svc, certificate } = await servingDomain(s, "shop", "shop.test");
  const failed = await waitFor("the router's error on the domain", async () => {
    const c = await certificate();
    return c?.state === "error" ? c : undefined;
  });
  assert.match(failed.error, /cannot run: Caddy is not installed/);
  assert.match(failed.error, /apt-get install caddy/);
  const events = await s.h.store.changesSince(since, 1000, ["service"]);
  assert.ok(
    events.some((e) => e.resource_uri === svc.resource_uri && e.action === "update"),
    "an update event of the service tells of the error",
  );

  router.unavailable = undefined;
  const issued = await waitFor("the certificate once the router runs", async () => {
    const c = await certificate();
    return c?.state === "issued" ? c : undefined;
  });
  assert.equal(issued.error, null);
});

test("an agent whose router cannot run says so, and Berth's driver knows it from any other failure", async () => {
  const inAgent = new FakeRouter("agent");
  inAgent.unavailable = NOT_INSTALLED;
  const service = new AgentRouterService({ stateDir: dir, log: () => {}, router: inAgent });
  const socket = path.join(dir, "router.sock");
  const server = net.createServer((c) => service.take(c));
  await new Promise<void>((r) => server.listen(socket, r));
  try {
    const driver = new AgentRouter({ node: "n1", openStream: () => net.connect(socket) });
    const config = {
      routes: [],
      certificates: [],
      acme: { directory: "https://acme.invalid/dir", email: "", caRootFile: "" },
    };
    const err = await driver.apply(config).then(
      () => undefined,
      (e: Error) => e,
    );
    assert.ok(err instanceof RouterUnavailable, `a RouterUnavailable: ${err}`);
    assert.equal(err.message, NOT_INSTALLED);
  } finally {
    server.close();
  }
});
