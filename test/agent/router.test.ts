// A router on an agent node (issue 30), through the API as tenants use it: the real agent
// (src/agent) keeps its tunnel to Berth with a recording HTTP server in place of its engine and a
// fake router in place of Caddy (no ports taken); Berth configures that router through the tunnel
// (streams to the target `router`), and what it reports comes back: a certificate issued, an ACME
// error on the service. The agent is not trusted: certificates it reports for another tenant's host
// name are not believed. An agent's router gets only the upstreams on its own node; an agent that
// offers no router (older agents, `--no-router`) keeps working and is never sent a router stream.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { BerthAgent } from "../../src/agent/agent.ts";
import { FakeRouter } from "../../src/drivers/router/fake-router.ts";
import type { CertificateStatus } from "../../src/drivers/router/router.ts";
import { RouterStore } from "../../src/store/router.ts";
import {
  call,
  createService,
  deployCluster,
  runningService,
  type Sim,
  startSim,
  waitFor,
} from "../services/sim.ts";

/** A router that also answers for a host name it was never given (as a hostile agent would). */
class OverreachingRouter extends FakeRouter {
  asked = 0;
  override async certificates(): Promise<CertificateStatus[]> {
    this.asked += 1;
    return [
      ...(await super.certificates()),
      { host: "bob.test", state: "error", issuer: "", expiresAt: null, error: "evil" },
    ];
  }
}

/** An Engine API on a unix socket that answers what a node probe asks. */
function recordingEngine(socketPath: string, id: string): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const json = (v: unknown) =>
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(v));
      const url = req.url?.replace(/^\/v[\d.]+/, "") ?? "";
      if (url.startsWith("/_ping")) return res.end("OK");
      if (url.startsWith("/version")) return json({ Version: "20.10.24", ApiVersion: "1.41" });
      if (url.startsWith("/info"))
        return json({
          ID: id,
          Name: id,
          NCPU: 2,
          MemTotal: 2 * 1024 ** 3,
          ServerVersion: "20.10.24",
          Driver: "overlay2",
          DockerRootDir: "/var/lib/docker",
        });
      if (url.startsWith("/containers/json")) return json([]);
      if (url.startsWith("/events")) {
        res.writeHead(200, { "content-type": "application/json" });
        return;
      }
      res.writeHead(404, { "content-type": "application/json" }).end('{"message":"no such object"}');
    });
  });
  return new Promise((resolve) => server.listen(socketPath, () => resolve(server)));
}

describe("a router on an agent node", () => {
  let s: Sim & { users: Record<string, import("../support/harness.ts").Caller> };
  let dir: string;
  const servers: http.Server[] = [];
  const agents: BerthAgent[] = [];
  const router = new OverreachingRouter("agent");
  let url = "";

  async function startAgent(who: "alice" | "carol", o: { router?: FakeRouter; noRouter?: boolean }) {
    const caller = who === "alice" ? s.alice : s.users.carol!;
    const socketPath = path.join(dir, `${who}.sock`);
    servers.push(await recordingEngine(socketPath, `engine-${who}`));
    const token = (await call(s.h, caller, "POST", "/api/infra/v1/token/")).body.token as string;
    const agent = new BerthAgent({
      url,
      token,
      stateDir: path.join(dir, `${who}-state`),
      socketPath,
      tags: ["own"],
      log: () => {},
      minBackoffMs: 50,
      ...o,
    });
    agents.push(agent);
    void agent.run();
    return waitFor(
      `${who}'s agent node Deployed`,
      async () => {
        const n = (await s.h.store.nodes.liveNodes({ namespace: who })).find((x) =>
          x.engine_url.startsWith("tunnel://"),
        );
        return n?.state === "Deployed" && s.h.tunnels.isConnected(n.uuid) ? n : undefined;
      },
      20_000,
    );
  }

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "berth-agent-router-"));
    s = await startSim({ users: ["bob", "carol"], env: { BERTH_ROUTER_INTERVAL_MS: "200" } });
    await s.h.app.listen({ host: "127.0.0.1", port: 0 });
    const address = s.h.app.server.address();
    if (!address || typeof address === "string") throw new Error("no address");
    url = `http://127.0.0.1:${address.port}`;
    // Bob serves bob.test on his own simulated node.
    await deployCluster(s, { name: "bobs", target_num_nodes: 1 }, s.users.bob);
    await runningService(s, { name: "bobweb", domains: [{ host: "bob.test" }] }, s.users.bob);
  });

  after(async () => {
    for (const a of agents) a.stop();
    for (const server of servers) {
      server.closeAllConnections();
      server.close();
    }
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("Berth configures the agent's router through its tunnel, and its certificates show on the service", async () => {
    const svc = await createService(s, {
      image: "busybox:local",
      name: "shop",
      domains: [{ host: "shop.test" }, { host: "shop.invalid" }],
    });
    const node = await startAgent("alice", { router });
    await waitFor("the agent's router configured", async () =>
      router.current?.routes.some((r) => r.host === "shop.test") ? true : undefined,
    );
    assert.equal(s.h.tunnels.session(node.uuid)?.features.has("router"), true);
    assert.deepEqual(router.current!.routes.map((r) => r.host).sort(), ["shop.invalid", "shop.test"]);
    const { renewIntervalMs, renewalWindowRatio } = router.current!.acme;
    assert.deepEqual(
      { renewIntervalMs, renewalWindowRatio },
      { renewIntervalMs: 600_000, renewalWindowRatio: 1 / 3 },
      "the renewal settings reach the agent's router",
    );
    assert.equal(router.request("shop.test", "/").status, 308, "plain HTTP is redirected");
    const shown = await waitFor("the certificates on the service", async () => {
      const v = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
      const states = v.domains.map((d: { certificate: { state: string } }) => d.certificate.state);
      return states.includes("pending") ? undefined : v;
    });
    const cert = (host: string) =>
      shown.domains.find((d: { host: string }) => d.host === host).certificate as Record<string, unknown>;
    assert.equal(cert("shop.test").state, "issued");
    assert.equal(cert("shop.test").issuer, "fake ACME");
    assert.ok(cert("shop.test").expires, "its expiry is shown");
    assert.equal(cert("shop.invalid").state, "error");
    assert.match(String(cert("shop.invalid").error), /rejectedIdentifier/);

    // What it says of a host name it was not given is not believed: bob's certificate stays his.
    const asked = router.asked;
    await waitFor("two more certificate readings", async () =>
      router.asked >= asked + 2 ? true : undefined,
    );
    await s.h.router.controller.settle();
    const [bobs] = await new RouterStore(s.h.store).certificatesOf(["bob.test"]);
    assert.equal(bobs?.namespace, "bob");
    assert.equal(bobs?.error, null);
    assert.equal(bobs?.state, "issued");
  });

  test("the agent's router gets only the upstreams on its own node; a simulated node's gets them all", async () => {
    await deployCluster(s, { name: "sims", target_num_nodes: 1, tags: [{ name: "sim" }] });
    const svc = await runningService(s, {
      name: "api",
      tags: [{ name: "sim" }],
      container_ports: [{ protocol: "tcp", inner_port: 8080 }],
      domains: [{ host: "api.test", tls: "off" }],
    });
    const sim = (await s.h.store.nodes.liveNodes({ namespace: "alice" })).find((n) =>
      n.engine_url.startsWith("fake://"),
    )!;
    const simRouter = await waitFor("the simulated node's router with api.test's upstream", async () => {
      const r = s.h.router.fakes.get(sim.uuid);
      return r?.current?.routes.find((x) => x.host === "api.test")?.upstreams.length === 1 ? r : undefined;
    });
    assert.equal(simRouter.request("api.test", "/").container, svc.containers[0].split("/").at(-2));
    await waitFor("the agent's router with api.test", async () =>
      router.current?.routes.some((r) => r.host === "api.test") ? true : undefined,
    );
    const route = router.current!.routes.find((r) => r.host === "api.test")!;
    assert.deepEqual(route.upstreams, [], "the container runs on another host: never dialled from this one");
    assert.equal(router.request("api.test", "/").status, 502);
  });

  test("an agent without a router keeps its tunnel and is sent no router stream", async () => {
    await createService(
      s,
      { image: "busybox:local", name: "site", domains: [{ host: "carol.test" }] },
      s.users.carol,
    );
    const node = await startAgent("carol", { noRouter: true });
    assert.equal(s.h.tunnels.session(node.uuid)?.features.size, 0);
    await s.h.router.controller.queueAll();
    await s.h.router.controller.settle();
    const again = await s.h.store.nodes.findNode(node.uuid);
    assert.equal(again?.state, "Deployed");
    assert.equal(s.h.tunnels.isConnected(node.uuid), true, "the tunnel stays up");
    const routes = await call(
      s.h,
      s.users.carol!,
      "GET",
      `${(await call(s.h, s.users.carol!, "GET", "/api/app/v1/service/")).body.objects[0].resource_uri}routes/`,
    );
    assert.equal(routes.status, 200, routes.raw);
  });
});
