// The real-engine tier for stacks, through the API: a stack file with three services (a web front
// linked to an app tier of 2 containers, linked to a data service with a volume) is created and
// started on a cluster of `local` nodes (real Docker engines on this host). Every container runs,
// the link variables are in the containers' environments, the front reaches the app by its link
// alias and the app reaches the data service's volume, and terminate leaves nothing behind.
//
// Needs root, dockerd, iproute2, iptables and busybox-static. Without them the file is skipped
// locally, but fails when CI=true so a CI run never passes by skipping.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { LABELS } from "../../src/domain/service.ts";
import { stackFileServices } from "../../src/domain/stackfile.ts";
import type { Engine } from "../../src/drivers/engine.ts";
import { BUSYBOX_IMAGE } from "../../src/drivers/local/index.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";
import { deployLocalCluster, localNodesUnavailable, tearDownLocalLab } from "../support/local-lab.ts";
import { execIn, uuidOf } from "../support/real-api.ts";

// A lab range and bridge of this file's own (nodes-local: 10.227/berth-r0, services-local:
// 10.226/berth-v0, crash-services: 10.225/berth-k0, provider test: 10.229/berth-t0, a real
// install: 10.231/berth0), so the tiers can run side by side.
const LAB_RANGE = "10.223.0.0/16";
const BRIDGE = "berth-t1";
const USER = "alice";

const unavailable = await localNodesUnavailable({ labRange: LAB_RANGE, bridgeName: BRIDGE });

/** The stack file, as `berth stack up -f` would read it: top-level keys are the services. */
const STACK_FILE = {
  front: {
    image: BUSYBOX_IMAGE,
    command: "httpd -f -p 80 -h /var/www",
    ports: ["80"],
    links: ["app:backend"],
  },
  app: {
    image: BUSYBOX_IMAGE,
    target_num_containers: 2,
    deployment_strategy: "high_availability",
    command: `sh -c 'echo "app tier on $HOSTNAME" > /var/www/index.html && exec httpd -f -p 80 -h /var/www'`,
    expose: ["80"],
    environment: { TIER: "app" },
    links: ["data"],
  },
  data: {
    image: BUSYBOX_IMAGE,
    command: "sh -c 'echo stored-in-the-volume > /data/value && exec httpd -f -p 8080 -h /data'",
    volumes: ["/data"],
    expose: ["8080"],
    environment: ["ROLE=data"],
  },
};

interface ServiceView {
  name: string;
  resource_uri: string;
  state: string;
  containers: string[];
  running_num_containers: number;
}

interface ContainerView {
  uuid: string;
  name: string;
  state: string;
  node: string;
  private_ip: string;
}

/**
 * Fetches a URL inside a container with busybox wget, repeating while the server may still be
 * starting. No `wget -T` (busybox-static segfaults with it): each attempt is bounded here instead.
 */
async function fetchIn(engine: Engine, containerId: string, url: string) {
  const startedAtMs = Date.now();
  let last = { exitCode: -1, output: "" };
  while (Date.now() - startedAtMs < 20_000) {
    try {
      last = await execIn(engine, containerId, ["wget", "-qO-", url], 5_000);
    } catch (error) {
      last = { exitCode: -1, output: (error as Error).message };
    }
    if (last.exitCode === 0) break;
    await sleep(300);
  }
  return { ...last, afterMs: Date.now() - startedAtMs };
}

describe("a stack on local nodes: real containers on real engines", { skip: unavailable ?? false }, () => {
  let h: Harness;
  let alice: Caller;
  let stackUri: string;
  const nodeUuids: string[] = [];

  const get = async <T>(uri: string): Promise<T> => {
    const res = await call(h, alice, "GET", uri);
    assert.equal(res.status, 200, res.raw);
    return res.body as T;
  };
  const engineOfNode = async (uuid: string): Promise<Engine> => {
    const node = await h.store.nodes.findNode(uuid);
    assert.ok(node, `node ${uuid} is in the store`);
    return h.engines.forNode(node);
  };
  /** The engine and engine id of a container the API lists. */
  const boxOf = async (c: ContainerView): Promise<{ engine: Engine; id: string }> => {
    const id = (await h.store.services.findContainer(c.uuid))?.engine_id;
    assert.ok(id, `${c.name} has an engine container`);
    return { engine: await engineOfNode(uuidOf(c.node)), id };
  };
  const finished = async (res: { headers: Record<string, unknown> }, timeoutMs: number) => {
    const uri = res.headers["x-platform-action-uri"] as string;
    const action = await waitFor(
      `action ${uri}`,
      async () => {
        const a = await get<{ uuid: string; state: string }>(uri);
        return ["Success", "Failed", "Canceled"].includes(a.state) ? a : undefined;
      },
      timeoutMs,
      100,
    );
    const log = (await h.store.actions.actionLogTail(action.uuid, 500)).map((l) => l.line);
    return { ...action, log };
  };
  const services = async (): Promise<Record<string, ServiceView>> => {
    const st = await get<{ services: string[] }>(stackUri);
    const out: Record<string, ServiceView> = {};
    for (const uri of st.services) {
      const s = await get<ServiceView>(uri);
      out[s.name] = s;
    }
    return out;
  };
  const containersOf = (s: ServiceView) => Promise.all(s.containers.map((uri) => get<ContainerView>(uri)));
  /** Every engine container of the user on the live local nodes. */
  const userBoxes = async () => {
    const out: string[] = [];
    for (const n of await h.store.nodes.liveNodes({ provider: "local" })) {
      const listed = await h.engines
        .forNode(n)
        .listContainers({ labels: { [LABELS.namespace]: USER }, all: true });
      out.push(...listed.map((b) => b.id));
    }
    return out;
  };

  before(async () => {
    h = await startHarness({
      env: {
        BERTH_LOCAL_LAB_RANGE: LAB_RANGE,
        BERTH_LOCAL_BRIDGE: BRIDGE,
        BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
        BERTH_RECONCILE_INTERVAL_MS: "300",
      },
    });
    alice = await createUser(h, USER);
  });

  after(async () => {
    if (!h) return;
    // Runs even when a test failed: nothing may act on the engines while they are taken down.
    h.stacks.stop();
    await tearDownLocalLab(h, { nodeUuids });
  });

  test("a cluster of 2 local nodes is deployed", { timeout: 60_000 }, async (t) => {
    const startedAtMs = Date.now();
    const deployed = await deployLocalCluster(h, alice, {
      name: "shop-nodes",
      targetNumNodes: 2,
      timeoutMs: 50_000,
    });
    nodeUuids.push(...deployed.nodeUuids);
    assert.equal(nodeUuids.length, 2);
    t.diagnostic(`2 nodes deployed in ${Date.now() - startedAtMs} ms`);
  });

  test("the stack file is created and started: services in link order, every container Running", {
    timeout: 90_000,
  }, async (t) => {
    const created = await call(h, alice, "POST", "/api/app/v1/stack/", {
      name: "shop",
      services: stackFileServices(STACK_FILE),
    });
    assert.equal(created.status, 201, created.raw);
    assert.equal(created.body.state, "Not Running");
    stackUri = created.body.resource_uri;

    const startedAtMs = Date.now();
    const start = await call(h, alice, "POST", `${stackUri}start/`);
    assert.equal(start.status, 202, start.raw);
    assert.equal(start.body.state, "Starting");
    const action = await finished(start, 80_000);
    for (const line of action.log) t.diagnostic(`start log: ${line}`);
    assert.equal(action.state, "Success", action.log.join("\n"));
    t.diagnostic(`stack started in ${Date.now() - startedAtMs} ms`);
    const turn = (name: string) => action.log.findIndex((l) => l.startsWith(`Starting service ${name} `));
    assert.ok(turn("data") >= 0 && turn("data") < turn("app") && turn("app") < turn("front"), "link order");

    const st = await waitFor("stack Running", async () => {
      const v = await get<{ state: string; synchronized: boolean }>(stackUri);
      return v.state === "Running" ? v : undefined;
    });
    assert.equal(st.synchronized, true);
    const s = await services();
    assert.equal(s.app?.running_num_containers, 2);
    const nodesOfApp = new Set<string>();
    for (const svc of Object.values(s)) {
      assert.equal(svc.state, "Running", svc.name);
      for (const c of await containersOf(svc)) {
        assert.equal(c.state, "Running", c.name);
        const { engine, id } = await boxOf(c);
        const view = await engine.inspectContainer(id);
        assert.equal(view?.running, true, `${c.name} runs on its engine`);
        assert.equal(view?.ipAddress, c.private_ip, `${c.name}'s address`);
        if (svc.name === "app") nodesOfApp.add(c.node);
      }
    }
    assert.equal(nodesOfApp.size, 2, "high_availability puts the app's 2 containers on both nodes");
  });

  test("link variables are in the containers' environments", async () => {
    const s = await services();
    const [data] = await containersOf(s.data!);
    const apps = await containersOf(s.app!);
    assert.ok(data && apps.length === 2);
    for (const app of apps) {
      const { engine, id } = await boxOf(app);
      const env = (await engine.inspectContainer(id))?.env ?? {};
      assert.equal(env.DATA_PORT, `tcp://${data.private_ip}:8080`, `${app.name}: DATA_PORT`);
      assert.equal(env.DATA_PORT_8080_TCP_ADDR, data.private_ip);
      assert.equal(env.DATA_PORT_8080_TCP_PORT, "8080");
      assert.equal(env.DATA_PORT_8080_TCP_PROTO, "tcp");
      assert.equal(env.DATA_1_PORT_8080_TCP, `tcp://${data.private_ip}:8080`);
      assert.equal(env.DATA_ENV_ROLE, "data");
      assert.equal(env.TIER, "app");
    }
    const [front] = await containersOf(s.front!);
    assert.ok(front);
    const { engine, id } = await boxOf(front);
    const env = (await engine.inspectContainer(id))?.env ?? {};
    const first = apps.find((a) => a.name === "app-1")!;
    assert.equal(env.BACKEND_PORT, `tcp://${first.private_ip}:80`, "the alias names the first app container");
    assert.equal(env.BACKEND_ENV_TIER, "app");
    for (const app of apps) {
      const n = app.name.split("-").at(-1);
      assert.equal(
        env[`BACKEND_${n}_PORT_80_TCP`],
        `tcp://${app.private_ip}:80`,
        `per container: ${app.name}`,
      );
    }
  });

  test("the front reaches the app by its alias, and the app reaches the data service's volume", {
    timeout: 60_000,
  }, async (t) => {
    const s = await services();
    const [front] = await containersOf(s.front!);
    assert.ok(front);
    const box = await boxOf(front);
    const page = await fetchIn(box.engine, box.id, "http://backend/");
    t.diagnostic(`http://backend/ answered inside ${front.name} after ${page.afterMs} ms`);
    assert.equal(page.exitCode, 0, page.output);
    assert.match(page.output, /^app tier on app-1$/m, "app-1's page, by the link alias");

    for (const app of await containersOf(s.app!)) {
      const b = await boxOf(app);
      const value = await fetchIn(b.engine, b.id, "http://data:8080/value");
      assert.equal(value.exitCode, 0, value.output);
      assert.equal(
        value.output.trim(),
        "stored-in-the-volume",
        `${app.name} reads the data service's volume`,
      );
    }
  });

  test("terminating the stack removes every container from the engines", { timeout: 60_000 }, async () => {
    const del = await call(h, alice, "DELETE", stackUri);
    assert.equal(del.status, 202, del.raw);
    const action = await finished(del, 50_000);
    assert.equal(action.state, "Success", action.log.join("\n"));
    const st = await get<{ state: string; services: string[] }>(stackUri);
    assert.equal(st.state, "Terminated", action.log.join("\n"));
    for (const uri of st.services) assert.equal((await get<ServiceView>(uri)).state, "Terminated");
    assert.deepEqual(await userBoxes(), [], "no engine container of the user is left");
  });
});
