// Open connections through the router stay open while the platform changes (issue 30: routers
// "configured from the change feed without restarts and without dropping open connections"). A
// configuration load closes every WebSocket Caddy 2.6 proxies; upstream changes reach Caddy as
// the answers of Berth's route resolver (drivers/router/dns.ts) instead. On a real local node with
// Caddy: a WebSocket held open through the router survives a scale 2→3 and a start-first redeploy
// of another service on the node and a scale of its own service, while steady HTTP load on the
// other service loses no request, and Caddy loads no configuration meanwhile.
//
// Needs root, dockerd, iproute2, iptables, busybox-static and caddy. Skipped locally without
// them; fails under CI=true. Lab range 10.244.0.0/16, bridge brs5ws.
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import type { Duplex } from "node:stream";
import { after, before, describe, test } from "node:test";
import { findExecutable } from "../../src/drivers/local/host-tools.ts";
import { BUSYBOX_IMAGE } from "../../src/drivers/local/index.ts";
import type { CaddyRouter } from "../../src/drivers/router/caddy.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";
import { request, steadyLoad } from "../support/http-load.ts";
import { deployLocalCluster, localNodesUnavailable, tearDownLocalLab } from "../support/local-lab.ts";

const LAB_RANGE = "10.244.0.0/16";
const BRIDGE = "brs5ws";

let unavailable = await localNodesUnavailable({ labRange: LAB_RANGE, bridgeName: BRIDGE });
if (!unavailable && !findExecutable("caddy")) unavailable = "caddy is not installed";
if (unavailable && process.env.CI === "true")
  test("router prerequisites (required in CI)", () => assert.fail(unavailable));

describe("open connections through the router", { skip: unavailable }, () => {
  let h: Harness;
  let alice: Caller;
  let nodeUuids: string[] = [];
  let address = "";

  before(async () => {
    h = await startHarness({
      env: {
        BERTH_LOCAL_LAB_RANGE: LAB_RANGE,
        BERTH_LOCAL_BRIDGE: BRIDGE,
        BERTH_RECONCILE_INTERVAL_MS: "1000",
        BERTH_ROUTER_INTERVAL_MS: "1000",
        BERTH_START_MIN_UP_MS: "1000",
        BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
      },
      stepTimeoutMs: 120_000,
    });
    alice = await createUser(h, "alice");
    nodeUuids = (await deployLocalCluster(h, alice, { name: "edge", targetNumNodes: 1 })).nodeUuids;
    address = (await h.store.nodes.findNode(nodeUuids[0]!))!.public_ip;
  });

  after(async () => {
    if (process.env.RT_DEBUG && h) {
      const routers = path.join(h.config.dataDir, "local-routers");
      for (const d of fs.existsSync(routers) ? fs.readdirSync(routers) : []) {
        const file = path.join(routers, d, "caddy.log");
        if (fs.existsSync(file)) console.error(`== caddy.log\n${fs.readFileSync(file, "utf8").slice(-6000)}`);
      }
    }
    await tearDownLocalLab(h, { nodeUuids });
  });

  const get = async (uri: string) => (await call(h, alice, "GET", uri)).body;
  const operate = async (uri: string, op: string) => {
    const res = await call(h, alice, "POST", `${uri}${op}/`);
    assert.equal(res.status, 202, res.raw);
    const action = res.headers["x-platform-action-uri"] as string;
    const a = await waitFor(
      `${op} of ${uri}`,
      async () => {
        const v = await get(action);
        return ["Success", "Failed"].includes(v.state) ? v : undefined;
      },
      120_000,
      200,
    );
    const log = (await h.store.actions.actionLogTail(a.uuid, 100)).map((l) => l.line).join("\n");
    assert.equal(a.state, "Success", log);
  };
  const create = async (body: Record<string, unknown>) => {
    const res = await call(h, alice, "POST", "/api/app/v1/service/", { image: BUSYBOX_IMAGE, ...body });
    assert.equal(res.status, 201, res.raw);
    await operate(res.body.resource_uri, "start");
    return res.body as { resource_uri: string };
  };
  const upstreamsOf = async (uri: string) => (await get(`${uri}routes/`)).objects[0].upstreams.length;
  const scale = async (uri: string, n: number) => {
    const patched = await call(h, alice, "PATCH", uri, { target_num_containers: n });
    assert.equal(patched.status, 200, patched.raw);
    await operate(uri, "scale");
    await waitFor(`${n} upstreams`, async () => (await upstreamsOf(uri)) === n || undefined, 30_000, 200);
  };
  /** Configuration loads the node's Caddy logged (its admin API's POST /load). */
  const loadsLogged = () => {
    const dir = path.join(h.config.dataDir, "local-routers");
    return fs
      .readdirSync(dir)
      .map((d) => path.join(dir, d, "caddy.log"))
      .filter((f) => fs.existsSync(f))
      .flatMap((f) => fs.readFileSync(f, "utf8").split("\n"))
      .filter((l) => l.includes('"uri":"/load"')).length;
  };

  test("a WebSocket stays open across a scale and a redeploy on its node, and HTTP load loses nothing", async () => {
    // Answers its container's name, or switches protocols and echoes what it gets.
    const script =
      'up=; while read -r l; do l=$(printf %s "$l" | tr -d "\\r"); [ -z "$l" ] && break; case "$l" in [Uu]pgrade:*) up=1;; esac; done; ' +
      'if [ -n "$up" ]; then printf "HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n\\r\\n"; exec cat; fi; ' +
      'b=$(hostname); n=$(printf %s "$b" | wc -c); printf "HTTP/1.1 200 OK\\r\\nContent-Length: $n\\r\\nConnection: close\\r\\n\\r\\n%s" "$b"';
    const chat = await create({
      name: "chat",
      run_command: `nc -ll -p 8080 -e sh -c '${script}'`,
      target_num_containers: 2,
      container_ports: [{ protocol: "tcp", inner_port: 8080 }],
      domains: [{ host: "chat.test", tls: "off" }],
    });
    const web = await create({
      name: "web",
      run_command: "httpd -f -p 80",
      target_num_containers: 2,
      container_ports: [{ protocol: "tcp", inner_port: 80 }],
      domains: [{ host: "app.test", tls: "off" }],
      health_check: { type: "http", port: 80, path: "/", interval: 1, timeout: 1, retries: 2 },
      rollout: { order: "start-first", max_surge: 2 },
    });
    await waitFor(
      "2 upstreams each",
      async () => {
        return (
          ((await upstreamsOf(chat.resource_uri)) === 2 && (await upstreamsOf(web.resource_uri)) === 2) ||
          undefined
        );
      },
      30_000,
      200,
    );

    // Both routes answered through the router: the configuration Caddy runs has both with upstreams.
    // (A route going from none to some is a configuration load, which closes WebSockets: one opened
    // before the second route's load was cut by it.)
    for (const host of ["chat.test", "app.test"]) {
      await waitFor(
        `${host} answered through the router`,
        async () =>
          (await request("http", address, host).catch(() => undefined))?.status === 200 || undefined,
        30_000,
        200,
      );
    }

    // A WebSocket through the router to chat.test (port 80), kept open for the whole test.
    const socket = await waitFor(
      "a WebSocket through the router",
      () => upgrade(address, "chat.test").catch(() => undefined),
      20_000,
      300,
    );
    let closed = false;
    socket.on("close", () => {
      closed = true;
    });
    socket.on("error", () => undefined);
    let received = "";
    socket.on("data", (c: Buffer) => {
      received += c.toString();
    });
    const echoes = async (word: string) => {
      socket.write(`${word}\n`);
      await waitFor(
        `the echo of ${word}`,
        async () => received.includes(word) || closed || undefined,
        10_000,
        50,
      );
      assert.equal(closed, false, `the WebSocket was closed before ${word} came back`);
    };
    await echoes("ping-0");

    const router = h.router.forNode((await h.store.nodes.findNode(nodeUuids[0]!))!) as CaddyRouter;
    const counted = { ...router.applyCounts };
    const logged = loadsLogged();
    assert.ok(logged >= 1, "Caddy's log shows the loads of the two domains (the witness counts)");
    const load = steadyLoad({ scheme: "http", address, host: "app.test" });
    let figures: Awaited<ReturnType<typeof load.stop>>;
    try {
      await scale(web.resource_uri, 3);
      await echoes("ping-after-scale");
      await operate(web.resource_uri, "redeploy");
      await echoes("ping-after-redeploy");
      await scale(chat.resource_uri, 3);
      await echoes("ping-after-own-scale");
      await waitFor("500 requests answered", async () => load.answered >= 500 || undefined, 60_000, 100);
    } finally {
      figures = await load.stop();
    }
    const loads = router.applyCounts.loads - counted.loads;
    const updates = router.applyCounts.upstreamUpdates - counted.upstreamUpdates;
    const loadsInLog = loadsLogged() - logged;
    socket.destroy();
    const { ok, failures } = figures;
    console.log(
      `# steady load: ${ok} answered, ${failures.length} lost; WebSocket ${closed ? "closed" : "kept"}; ` +
        `configuration loads ${loads} (Caddy's log: ${loadsInLog}), upstream updates ${updates}`,
    );
    assert.deepEqual(failures, [], `lost: ${failures.length} of ${ok + failures.length}`);
    assert.equal(loads, 0, "no configuration was loaded for upstream changes");
    assert.equal(loadsInLog, 0, "Caddy logged no configuration load");
    assert.ok(updates >= 4, `upstream updates: ${updates}`);
    assert.equal(await upstreamsOf(web.resource_uri), 3);
  });
});

/** A WebSocket upgrade through the router at `address`:80 for `host`; the upgraded socket. */
function upgrade(address: string, host: string): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: address,
      port: 80,
      path: "/socket",
      headers: {
        host,
        connection: "Upgrade",
        upgrade: "websocket",
        "sec-websocket-version": "13",
        "sec-websocket-key": Buffer.from("0123456789abcdef").toString("base64"),
      },
      timeout: 5000,
      agent: false,
    });
    req.on("upgrade", (answer, socket) => {
      if (answer.statusCode !== 101) return reject(new Error(`no upgrade: ${answer.statusCode}`));
      socket.setTimeout(0);
      resolve(socket);
    });
    req.on("response", (answer) => {
      answer.resume();
      reject(new Error(`no upgrade: ${answer.statusCode}`));
    });
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", reject);
    req.end();
  });
}
