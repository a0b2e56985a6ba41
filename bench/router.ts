// The router's cost (issue 30): on one `local` node (a real engine, Caddy in its namespace), a
// service of two busybox httpd containers with a plain-HTTP domain; the same keep-alive load for the
// same time through the router (the node's :80, Host: bench.test) and straight to the containers'
// addresses (round robin), requests per second and p99 of each and their ratio; then the time from
// a PATCH of the service's domains to the first request the router answers for the new name.
// Lab range 10.204.0.0/16, bridge berth-rt1. Real engines run one at a time on this machine.
import http from "node:http";
import { call, createUser, startHarness, waitFor } from "../test/support/harness.ts";
import {
  deployLocalCluster,
  localNodesUnavailableReason,
  tearDownLocalLab,
} from "../test/support/local-lab.ts";

const LAB = { labRange: "10.204.0.0/16", bridgeName: "berth-rt1" };

function get(address: string, host: string, agent: http.Agent): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: address, port: 80, path: "/", headers: { host }, agent, timeout: 5000 },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", reject);
    req.end();
  });
}

async function load(targets: string[], host: string, ms: number, connections: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const latencies: number[] = [];
  let errors = 0;
  let turn = 0;
  const end = performance.now() + ms;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        try {
          const status = await get(targets[turn++ % targets.length]!, host, agent);
          if (status !== 200) errors += 1;
        } catch {
          errors += 1;
        }
        latencies.push(performance.now() - t0);
      }
    }),
  );
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return {
    rps: latencies.length / (ms / 1000),
    p99: latencies[Math.floor(latencies.length * 0.99)] ?? 0,
    errors,
  };
}

export async function runRouter(opts: { seconds: number; connections: number }, out: (line: string) => void) {
  const unavailable = await localNodesUnavailableReason(LAB);
  if (unavailable) {
    out(`router: skipped (${unavailable})`);
    return;
  }
  const h = await startHarness({
    env: {
      BERTH_LOCAL_LAB_RANGE: LAB.labRange,
      BERTH_LOCAL_BRIDGE: LAB.bridgeName,
      BERTH_ROUTER_INTERVAL_MS: "1000",
    },
    stepTimeoutMs: 120_000,
  });
  let nodeUuids: string[] = [];
  try {
    const alice = await createUser(h, "alice");
    nodeUuids = (await deployLocalCluster(h, alice, { name: "bench", targetNumNodes: 1 })).nodeUuids;
    const address = (await h.store.nodes.findNode(nodeUuids[0]!))!.public_ip;
    const created = await call(h, alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "web",
      run_command: "httpd -f -p 80",
      target_num_containers: 2,
      container_ports: [{ protocol: "tcp", inner_port: 80 }],
      domains: [{ host: "bench.test", tls: "off" }],
    });
    const uri = created.body.resource_uri as string;
    await call(h, alice, "POST", `${uri}start/`);
    const routes = await waitFor(
      "two routed containers",
      async () => {
        const r = (await call(h, alice, "GET", `${uri}routes/`)).body.objects?.[0];
        return r?.upstreams.length === 2 ? r : undefined;
      },
      120_000,
      200,
    );
    await waitFor(
      "the router answers",
      async () => (await get(address, "bench.test", new http.Agent())) === 200,
      30_000,
      200,
    );
    const direct = routes.upstreams.map((u: { address: string }) => u.address.split(":")[0]);
    const ms = opts.seconds * 1000;
    const viaDirect = await load(direct, "bench.test", ms, opts.connections);
    const viaRouter = await load([address], "bench.test", ms, opts.connections);
    out(
      `router: ${opts.connections} keep-alive connections, ${opts.seconds} s each: direct ${viaDirect.rps.toFixed(0)} rps p99 ${viaDirect.p99.toFixed(1)} ms (${viaDirect.errors} errors); through the router ${viaRouter.rps.toFixed(0)} rps p99 ${viaRouter.p99.toFixed(1)} ms (${viaRouter.errors} errors); router/direct rps ${(viaRouter.rps / viaDirect.rps).toFixed(2)}×, p99 ${(viaRouter.p99 / viaDirect.p99).toFixed(2)}×`,
    );
    const t0 = performance.now();
    const patched = await call(h, alice, "PATCH", uri, {
      domains: [
        { host: "bench.test", tls: "off" },
        { host: "new.bench.test", tls: "off" },
      ],
    });
    if (patched.status !== 200) throw new Error(`PATCH: ${patched.raw}`);
    const agent = new http.Agent();
    await waitFor(
      "the new domain routed",
      async () => (await get(address, "new.bench.test", agent).catch(() => 0)) === 200,
      30_000,
      5,
    );
    out(`router: PATCH of the domains to the first routed request ${(performance.now() - t0).toFixed(0)} ms`);
  } finally {
    await tearDownLocalLab(h, { nodeUuids });
  }
}
