// The real-engine tier for services and containers, through the API: on a cluster of `local`
// nodes (real Docker engines on this host, busybox:local on each), services are placed by their
// strategy and tags, publish ports the host can reach, talk to linked services on other nodes,
// and every operation leaves the engines exactly as the API says. A process killed behind the
// platform's back comes back under autorestart ALWAYS; a container that exits 0 under autodestroy
// ON_SUCCESS is terminated.
//
// Needs root, dockerd, iproute2, iptables and busybox-static. Without them the file is skipped
// locally, but fails when CI=true so a CI run never passes by skipping.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import Dockerode from "dockerode";
import { LABELS } from "../../src/domain/service.ts";
import type { Engine } from "../../src/drivers/engine.ts";
import { BUSYBOX_IMAGE } from "../../src/drivers/local/index.ts";
import type { NodeRow } from "../../src/store/nodes.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";
import { deployLocalCluster, localNodesUnavailable, tearDownLocalLab } from "../support/local-lab.ts";
import { execIn, uuidOf } from "../support/real-api.ts";

// A lab range and bridge of this file's own (nodes-local: 10.227/berth-r0, provider test:
// 10.229/berth-t0, crash-services: 10.225/berth-k0, a real install: 10.231/berth0).
const LAB_RANGE = "10.226.0.0/16";
const BRIDGE = "berth-v0";
const USER = "alice";

const unavailable = await localNodesUnavailable({ labRange: LAB_RANGE, bridgeName: BRIDGE });

interface ClusterView {
  uuid: string;
  resource_uri: string;
  state: string;
  nodes: string[];
}

interface NodeView {
  uuid: string;
  resource_uri: string;
  state: string;
  public_ip: string;
  tags: { name: string }[];
}

interface ServiceView {
  uuid: string;
  resource_uri: string;
  name: string;
  state: string;
  synchronized: boolean;
  target_num_containers: number;
  current_num_containers: number;
  running_num_containers: number;
  containers: string[];
}

interface ContainerView {
  uuid: string;
  resource_uri: string;
  name: string;
  state: string;
  node: string;
  service: string;
  private_ip: string;
  exit_code: number | null;
  container_ports: { inner_port: number; outer_port: number | null; published: boolean }[];
}

interface ActionView {
  uuid: string;
  state: string;
}

/** One engine container that carries Berth's labels, as its engine reports it. */
interface EngineBox {
  node: string;
  id: string;
  record: string;
  service: string;
  running: boolean;
  state: string;
}

describe("services on local nodes: real containers on real engines", { skip: unavailable ?? false }, () => {
  let h: Harness;
  let alice: Caller;
  let cluster: ClusterView;
  /** In deploy order: nodes A and B from the deploy, C from the scale. */
  const nodeUuids: string[] = [];

  const get = async <T>(uri: string): Promise<T> => {
    const res = await call(h, alice, "GET", uri);
    assert.equal(res.status, 200, res.raw);
    return res.body as T;
  };
  const nodeUri = (uuid: string) => `/api/infra/v1/node/${uuid}/`;
  const row = async (uuid: string): Promise<NodeRow> => {
    const found = await h.store.nodes.findNode(uuid);
    assert.ok(found, `node ${uuid} is in the store`);
    return found;
  };
  const engineOf = async (nodeUuid: string): Promise<Engine> => h.engines.forNode(await row(nodeUuid));

  const settledCluster = (state: string, timeoutMs: number) =>
    waitFor(
      `cluster ${state}`,
      async () => {
        const c = await get<ClusterView>(cluster.resource_uri);
        return c.state === state ? c : undefined;
      },
      timeoutMs,
      100,
    );

  /** Waits for the action a response names to end; returns it with its log. */
  const finished = async (res: { headers: Record<string, unknown> }, timeoutMs = 30_000) => {
    const uri = res.headers["x-platform-action-uri"];
    assert.equal(typeof uri, "string", "the response names its action");
    const action = await waitFor(
      `action ${uri as string}`,
      async () => {
        const a = await get<ActionView>(uri as string);
        return ["Success", "Failed", "Canceled"].includes(a.state) ? a : undefined;
      },
      timeoutMs,
      100,
    );
    const log = (await h.store.actions.actionLogTail(action.uuid, 200)).map((l) => l.line);
    return { ...action, log };
  };

  /** POSTs an operation and waits until its action succeeded. */
  const operate = async (uri: string, method: "POST" | "DELETE" = "POST", timeoutMs = 30_000) => {
    const res = await call(h, alice, method, uri);
    assert.equal(res.status, 202, res.raw);
    const action = await finished(res, timeoutMs);
    assert.equal(action.state, "Success", `${method} ${uri}:\n${action.log.join("\n")}`);
    return action;
  };

  const createService = async (body: Record<string, unknown>): Promise<ServiceView> => {
    const res = await call(h, alice, "POST", "/api/app/v1/service/", { image: BUSYBOX_IMAGE, ...body });
    assert.equal(res.status, 201, res.raw);
    return res.body as ServiceView;
  };

  const serviceIn = (s: { resource_uri: string }, state: string, timeoutMs = 15_000) =>
    waitFor(
      `service ${s.resource_uri} ${state}`,
      async () => {
        const v = await get<ServiceView>(s.resource_uri);
        return v.state === state ? v : undefined;
      },
      timeoutMs,
      100,
    );

  const containersOf = async (s: { resource_uri: string }): Promise<ContainerView[]> => {
    const v = await get<ServiceView>(s.resource_uri);
    return Promise.all(v.containers.map((uri) => get<ContainerView>(uri)));
  };

  /** Containers per node uuid. */
  const spread = (containers: ContainerView[]): Map<string, number> => {
    const out = new Map<string, number>();
    for (const c of containers) out.set(uuidOf(c.node), (out.get(uuidOf(c.node)) ?? 0) + 1);
    return out;
  };

  /** Every engine container of the user on every live node. */
  const engineBoxes = async (): Promise<EngineBox[]> => {
    const out: EngineBox[] = [];
    for (const n of await h.store.nodes.liveNodes({ provider: "local" })) {
      const engine = h.engines.forNode(n);
      for (const s of await engine.listContainers({ labels: { [LABELS.namespace]: USER }, all: true })) {
        const v = await engine.inspectContainer(s.id);
        if (!v) continue;
        out.push({
          node: n.uuid,
          id: s.id,
          record: s.labels[LABELS.container] ?? "",
          service: s.labels[LABELS.service] ?? "",
          running: v.running,
          state: v.state,
        });
      }
    }
    return out;
  };

  /**
   * The engines hold exactly what the API lists: one engine container per live container, on the
   * node the API names, with the engine id Berth recorded, running exactly when the API says Running
   * (and not running when it says Stopped), and no other container of the user anywhere.
   */
  const assertEnginesAsApi = async (when: string): Promise<EngineBox[]> => {
    const listed = await get<{ objects: ContainerView[] }>("/api/app/v1/container/?limit=1000");
    const live = listed.objects.filter((c) => c.state !== "Terminated");
    const boxes = await engineBoxes();
    const problems: string[] = [];
    for (const c of live) {
      const mine = boxes.filter((b) => b.record === c.uuid);
      const recorded = (await h.store.services.findContainer(c.uuid))?.engine_id;
      if (mine.length !== 1) {
        problems.push(`${c.name} (${c.state}) has ${mine.length} engine containers`);
        continue;
      }
      const box = mine[0]!;
      if (box.node !== uuidOf(c.node)) problems.push(`${c.name} is on ${box.node}, the API says ${c.node}`);
      if (box.id !== recorded)
        problems.push(`${c.name} is ${box.id} on its engine, Berth recorded ${recorded}`);
      if (c.state !== "Running" && c.state !== "Stopped") problems.push(`${c.name} is still ${c.state}`);
      if (box.running !== (c.state === "Running")) {
        problems.push(`${c.name} is ${c.state} in the API but ${box.state} on its engine`);
      }
    }
    const known = new Set(live.map((c) => c.uuid));
    for (const b of boxes.filter((x) => !known.has(x.record))) {
      problems.push(
        `engine container ${b.id.slice(0, 12)} on ${b.node} (record ${b.record}) is not in the API`,
      );
    }
    assert.deepEqual(problems, [], `after ${when}`);
    return boxes;
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
    // Runs even when a test failed: nothing may act on the engines while they are taken down.
    await tearDownLocalLab(h, { nodeUuids });
  });

  test("a cluster of 2 local nodes is deployed", { timeout: 60_000 }, async (t) => {
    const startedAtMs = Date.now();
    const deployed = await deployLocalCluster(h, alice, {
      name: "apps",
      targetNumNodes: 2,
      timeoutMs: 50_000,
    });
    cluster = deployed.cluster as ClusterView;
    nodeUuids.push(...deployed.nodeUuids);
    assert.equal(nodeUuids.length, 2);
    t.diagnostic(`2 nodes deployed in ${Date.now() - startedAtMs} ms`);
    for (const uuid of nodeUuids) assert.ok(await (await engineOf(uuid)).hasImage(BUSYBOX_IMAGE));
    await assertEnginesAsApi("the deploy");
  });

  test("tags keep containers off untagged nodes; a service no node fits fails and says why", {
    timeout: 30_000,
  }, async (t) => {
    const [a, b] = nodeUuids as [string, string];
    const tagged = await call(h, alice, "PATCH", nodeUri(a), { tags: [{ name: "front" }] });
    assert.equal(tagged.status, 200, tagged.raw);

    const startedAtMs = Date.now();
    const pinned = await createService({
      name: "pinned",
      target_num_containers: 2,
      run_command: "sleep 100000",
      tags: [{ name: "front" }],
    });
    await operate(`${pinned.resource_uri}start/`);
    t.diagnostic(`2 tagged containers started in ${Date.now() - startedAtMs} ms`);
    await serviceIn(pinned, "Running");
    assert.deepEqual([...spread(await containersOf(pinned))], [[a, 2]], "both on the tagged node A");
    await assertEnginesAsApi("starting a tagged service");

    const nowhere = await createService({ name: "nowhere", run_command: "sleep 100000", tags: ["gpu"] });
    const res = await call(h, alice, "POST", `${nowhere.resource_uri}start/`);
    assert.equal(res.status, 202, res.raw);
    const refused = await finished(res);
    assert.equal(refused.state, "Failed");
    for (const uuid of [a, b]) {
      assert.ok(
        refused.log.some((l) => l.includes(uuid) && l.includes("lacks tag gpu")),
        `the log explains node ${uuid}:\n${refused.log.join("\n")}`,
      );
    }
    assert.deepEqual(
      (await engineBoxes()).filter((x) => x.service === nowhere.uuid),
      [],
    );
  });

  test("EMPTIEST_NODE fills the emptier node", { timeout: 30_000 }, async () => {
    const [, b] = nodeUuids as [string, string];
    // Node A holds the 2 containers of `pinned`; B is empty.
    const filler = await createService({
      name: "filler",
      target_num_containers: 2,
      run_command: "sleep 100000",
      deployment_strategy: "EMPTIEST_NODE",
    });
    await operate(`${filler.resource_uri}start/`);
    await serviceIn(filler, "Running");
    assert.deepEqual([...spread(await containersOf(filler))], [[b, 2]], "both on the empty node B");
    await assertEnginesAsApi("starting an EMPTIEST_NODE service");

    // Out of the way of what follows; terminate is checked on the engines too.
    for (const s of [
      filler,
      await get<{ objects: ServiceView[] }>("/api/app/v1/service/?name=pinned").then(first),
    ]) {
      await operate(s.resource_uri, "DELETE");
      await serviceIn(s, "Terminated");
    }
    const boxes = await assertEnginesAsApi("terminating two services");
    assert.deepEqual(boxes, [], "no container of the user is left on any engine");
  });

  test("a HIGH_AVAILABILITY service of 4 spreads 2/2; stop, start, redeploy, scale down and terminate leave the engines as the API says", {
    timeout: 90_000,
  }, async (t) => {
    const [a, b] = nodeUuids as [string, string];
    const ha = await createService({
      name: "spread",
      target_num_containers: 4,
      run_command: "sleep 100000",
      deployment_strategy: "HIGH_AVAILABILITY",
      container_envvars: [{ key: "ROUND", value: "1" }],
    });
    let startedAtMs = Date.now();
    await operate(`${ha.resource_uri}start/`);
    t.diagnostic(`start of 4: ${Date.now() - startedAtMs} ms`);
    const running = await serviceIn(ha, "Running");
    assert.equal(running.running_num_containers, 4);
    const placed = spread(await containersOf(ha));
    assert.equal(placed.get(a), 2, "2 on node A");
    assert.equal(placed.get(b), 2, "2 on node B");
    const first = await assertEnginesAsApi("start");
    assert.equal(first.length, 4);
    assert.ok(first.every((x) => x.running));

    startedAtMs = Date.now();
    await operate(`${ha.resource_uri}stop/`);
    t.diagnostic(`stop of 4: ${Date.now() - startedAtMs} ms`);
    const stopped = await serviceIn(ha, "Stopped");
    assert.equal(stopped.current_num_containers, 4);
    const afterStop = await assertEnginesAsApi("stop");
    assert.ok(
      afterStop.every((x) => !x.running),
      "stopped on the engines",
    );
    assert.deepEqual(afterStop.map((x) => x.id).sort(), first.map((x) => x.id).sort(), "kept, not removed");

    startedAtMs = Date.now();
    await operate(`${ha.resource_uri}start/`);
    t.diagnostic(`start again: ${Date.now() - startedAtMs} ms`);
    await serviceIn(ha, "Running");
    const afterStart = await assertEnginesAsApi("start again");
    assert.ok(afterStart.every((x) => x.running));
    assert.deepEqual(
      afterStart.map((x) => x.id).sort(),
      first.map((x) => x.id).sort(),
      "the same containers",
    );

    const patched = await call(h, alice, "PATCH", ha.resource_uri, {
      container_envvars: [{ key: "ROUND", value: "2" }],
    });
    assert.equal(patched.status, 200, patched.raw);
    assert.equal((patched.body as ServiceView).synchronized, false);
    startedAtMs = Date.now();
    await operate(`${ha.resource_uri}redeploy/`, "POST", 60_000);
    t.diagnostic(`redeploy of 4: ${Date.now() - startedAtMs} ms`);
    const redeployed = await serviceIn(ha, "Running");
    assert.equal(redeployed.synchronized, true);
    const afterRedeploy = await assertEnginesAsApi("redeploy");
    assert.equal(afterRedeploy.length, 4);
    for (const x of afterRedeploy) {
      assert.ok(!first.some((old) => old.id === x.id), `${x.id.slice(0, 12)} is a new engine container`);
      const env = (await (await engineOf(x.node)).inspectContainer(x.id))?.env ?? {};
      assert.equal(env.ROUND, "2", "made from the new definition");
    }
    assert.deepEqual(
      [...spread(await containersOf(ha))].sort(),
      [
        [a, 2],
        [b, 2],
      ].sort(),
      "redeployed in place",
    );

    assert.equal((await call(h, alice, "PATCH", ha.resource_uri, { target_num_containers: 1 })).status, 200);
    startedAtMs = Date.now();
    await operate(`${ha.resource_uri}scale/`);
    t.diagnostic(`scale 4 → 1: ${Date.now() - startedAtMs} ms`);
    const one = await serviceIn(ha, "Running");
    assert.equal(one.current_num_containers, 1);
    const afterScale = await assertEnginesAsApi("scale down");
    assert.equal(afterScale.length, 1);

    startedAtMs = Date.now();
    await operate(ha.resource_uri, "DELETE");
    t.diagnostic(`terminate: ${Date.now() - startedAtMs} ms`);
    await serviceIn(ha, "Terminated");
    assert.deepEqual(await assertEnginesAsApi("terminate"), []);
  });

  test("a published port answers from the host at the node's public_ip", { timeout: 30_000 }, async (t) => {
    const [a] = nodeUuids as [string];
    const web = await createService({
      name: "web",
      run_command: "httpd -f -p 80",
      tags: ["front"],
      container_ports: [{ protocol: "tcp", inner_port: 80, published: true }],
    });
    await operate(`${web.resource_uri}start/`);
    await serviceIn(web, "Running");
    const [c] = await containersOf(web);
    assert.ok(c);
    assert.equal(uuidOf(c.node), a);
    const port = c.container_ports[0];
    assert.ok(port?.outer_port && port.outer_port > 0, `a dynamic outer port: ${JSON.stringify(port)}`);
    const node = await get<NodeView>(nodeUri(a));
    const url = `http://${node.public_ip}:${port.outer_port}/`;
    const startedAtMs = Date.now();
    let last = "";
    let body = "";
    while (Date.now() - startedAtMs < 15_000) {
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(3_000) });
        body = await res.text();
        if (res.status === 200) break;
        last = `HTTP ${res.status}`;
      } catch (error) {
        last = (error as Error).message;
      }
      body = "";
      await sleep(200);
    }
    t.diagnostic(`${url} answered after ${Date.now() - startedAtMs} ms`);
    assert.match(body, /Served by busybox httpd/, `${url}: ${last}`);
    await assertEnginesAsApi("starting a service with a published port");
  });

  test("a container fetches a page from a linked service by its link alias on another node", {
    timeout: 45_000,
  }, async (t) => {
    const [a, b] = nodeUuids as [string, string];
    assert.equal((await call(h, alice, "PATCH", nodeUri(b), { tags: ["back"] })).status, 200);
    const web = await get<{ objects: ServiceView[] }>("/api/app/v1/service/?name=web").then(first);
    const client = await createService({
      name: "client",
      run_command: "sleep 100000",
      tags: ["back"],
      linked_to_service: [{ to_service: web.resource_uri, name: "site" }],
    });
    await operate(`${client.resource_uri}start/`);
    await serviceIn(client, "Running");
    const [server] = await containersOf(web);
    const [c] = await containersOf(client);
    assert.ok(server && c);
    assert.equal(uuidOf(server.node), a, "the server runs on node A");
    assert.equal(uuidOf(c.node), b, "the client runs on node B");
    const engine = await engineOf(b);
    const clientId = (await h.store.services.findContainer(c.uuid))?.engine_id;
    assert.ok(clientId);

    const hosts = await execIn(engine, clientId, ["cat", "/etc/hosts"], 5_000);
    assert.match(hosts.output, new RegExp(`^${server.private_ip.replaceAll(".", "\\.")}\\s+site$`, "m"));
    // No `wget -T` (busybox-static segfaults with it): each attempt is bounded here instead.
    const startedAtMs = Date.now();
    let last = { exitCode: -1, output: "" };
    while (Date.now() - startedAtMs < 20_000) {
      try {
        last = await execIn(engine, clientId, ["wget", "-qO-", "http://site/"], 5_000);
      } catch (error) {
        last = { exitCode: -1, output: (error as Error).message };
      }
      if (last.exitCode === 0) break;
      await sleep(300);
    }
    t.diagnostic(`http://site/ answered inside the client after ${Date.now() - startedAtMs} ms`);
    assert.equal(last.exitCode, 0, `${last.output}\n/etc/hosts:\n${hosts.output}`);
    assert.match(last.output, /Served by busybox httpd/, "node A's page, fetched on node B by the alias");
    const env = (await engine.inspectContainer(clientId))?.env ?? {};
    assert.equal(env.SITE_PORT, `tcp://${server.private_ip}:80`, "the link's variables");

    for (const s of [client, web]) {
      await operate(s.resource_uri, "DELETE");
      await serviceIn(s, "Terminated");
    }
    assert.deepEqual(await assertEnginesAsApi("terminating web and client"), []);
  });

  test("a container whose process is killed outside Berth comes back under autorestart ALWAYS", {
    timeout: 30_000,
  }, async (t) => {
    const phoenix = await createService({
      name: "phoenix",
      run_command: "sleep 100000",
      autorestart: "ALWAYS",
    });
    await operate(`${phoenix.resource_uri}start/`);
    await serviceIn(phoenix, "Running");
    const [c] = await containersOf(phoenix);
    assert.ok(c);
    const record = await h.store.services.findContainer(c.uuid);
    assert.ok(record?.engine_id);
    const node = await row(uuidOf(c.node));
    // The host pid of the container's main process (the Engine interface does not expose it);
    // SIGKILL from the host is a death the engine did not ask for, so its restart policy applies.
    const docker = new Dockerode({ host: node.public_ip, port: 2375, protocol: "http", timeout: 5_000 });
    const before = await docker.getContainer(record.engine_id).inspect();
    assert.ok(before.State.Pid > 0);
    const killedAtMs = Date.now();
    process.kill(before.State.Pid, "SIGKILL");

    const back = await waitFor(
      "the engine to restart the killed container",
      async () => {
        const now = await docker.getContainer(record.engine_id!).inspect();
        // While the engine waits out its restart back-off it says Running and Restarting, with pid 0.
        const up = now.State.Running && !now.State.Restarting && now.State.Pid > 0;
        return up && now.State.Pid !== before.State.Pid ? now : undefined;
      },
      15_000,
      100,
    );
    t.diagnostic(`restarted by the engine ${Date.now() - killedAtMs} ms after the kill`);
    assert.ok(back.RestartCount >= 1, `restart count ${back.RestartCount}`);
    const seen = await waitFor(
      "Berth to see it Running again",
      async () => {
        const v = await get<ContainerView>(c.resource_uri);
        const r = await h.store.services.findContainer(c.uuid);
        // The restart Berth has seen: the record's start is the engine's new one, after the kill.
        const restartedAt = Date.parse(back.State.StartedAt.replace(/(\.\d{3})\d+/, "$1"));
        return v.state === "Running" && r?.started_at && r.started_at >= restartedAt ? v : undefined;
      },
      10_000,
      100,
    );
    t.diagnostic(`Berth reports it Running again ${Date.now() - killedAtMs} ms after the kill`);
    assert.equal(
      (await h.store.services.findContainer(seen.uuid))?.engine_id,
      record.engine_id,
      "same container",
    );
    assert.equal((await serviceIn(phoenix, "Running")).running_num_containers, 1);
    await assertEnginesAsApi("the restart");
    await operate(phoenix.resource_uri, "DELETE");
    await serviceIn(phoenix, "Terminated");
  });

  test("a container that exits 0 under autodestroy ON_SUCCESS is terminated", {
    timeout: 30_000,
  }, async (t) => {
    const oneshot = await createService({
      name: "oneshot",
      run_command: 'sh -c "sleep 2; exit 0"',
      autodestroy: "ON_SUCCESS",
    });
    await operate(`${oneshot.resource_uri}start/`);
    const [c] = await containersOf(oneshot);
    assert.ok(c);
    const startedAtMs = Date.now();
    const gone = await waitFor(
      "the exited container to be terminated",
      async () => {
        const v = await get<ContainerView>(c.resource_uri);
        return v.state === "Terminated" ? v : undefined;
      },
      20_000,
      100,
    );
    t.diagnostic(`terminated ${Date.now() - startedAtMs} ms after its start finished`);
    assert.equal(gone.exit_code, 0);
    const s = await get<ServiceView>(oneshot.resource_uri);
    assert.equal(s.current_num_containers, 0);
    assert.equal(s.target_num_containers, 0, "the service does not put it back");
    t.diagnostic(`the service is ${s.state}`);
    assert.deepEqual(await assertEnginesAsApi("autodestroy"), [], "removed from its engine");
    await operate(oneshot.resource_uri, "DELETE");
  });

  test("a stack service with stop_grace_period: 2s whose command ignores SIGTERM is redeployed in under 4 s", {
    timeout: 60_000,
  }, async (t) => {
    // The platform's stop timeout is 1 s here: a redeploy of 2 s or more honoured the service's.
    const res = await call(h, alice, "POST", "/api/app/v1/stack/", {
      name: "graceful",
      services: [
        { name: "stubborn", image: BUSYBOX_IMAGE, command: "sleep 100000", stop_grace_period: "2s" },
      ],
    });
    assert.equal(res.status, 201, res.raw);
    await operate(`${res.body.resource_uri}start/`);
    const stubborn = await serviceIn(
      { resource_uri: (res.body as { services: string[] }).services[0]! },
      "Running",
    );
    const startedAtMs = Date.now();
    const redeploy = await operate(`${stubborn.resource_uri}redeploy/`);
    const ms = Date.now() - startedAtMs;
    t.diagnostic(`redeployed in ${ms} ms:\n${redeploy.log.join("\n")}`);
    assert.ok(ms >= 2000 && ms < 4000, `redeployed in ${ms} ms`);
    assert.ok(
      redeploy.log.includes(
        "Waiting up to 2 s for stubborn-1 to stop (stop signal SIGTERM unless the image sets another)",
      ),
      redeploy.log.join("\n"),
    );
    assert.ok(
      redeploy.log.includes(
        "stubborn-1 did not stop within 2 s of its stop signal: the engine killed it (SIGKILL)",
      ),
      redeploy.log.join("\n"),
    );
    await assertEnginesAsApi("a redeploy within the grace period");
    await operate(res.body.resource_uri, "DELETE");
  });

  test("EVERY_NODE gets a container on a node added by scaling the cluster", {
    timeout: 90_000,
  }, async (t) => {
    const every = await createService({
      name: "everywhere",
      run_command: "sleep 100000",
      deployment_strategy: "EVERY_NODE",
    });
    await operate(`${every.resource_uri}start/`);
    await serviceIn(every, "Running");
    assert.deepEqual(
      [...spread(await containersOf(every))].sort(),
      nodeUuids.map((u) => [u, 1]).sort(),
      "one on each node",
    );

    const startedAtMs = Date.now();
    const scale = await call(h, alice, "PATCH", cluster.resource_uri, { target_num_nodes: 3 });
    assert.equal(scale.status, 202, scale.raw);
    cluster = await settledCluster("Deployed", 60_000);
    const added = cluster.nodes.map(uuidOf).filter((u) => !nodeUuids.includes(u));
    assert.equal(added.length, 1);
    nodeUuids.push(added[0]!);
    const scaledAtMs = Date.now();
    t.diagnostic(`node C deployed in ${scaledAtMs - startedAtMs} ms`);

    const three = await waitFor(
      "a container of everywhere on node C",
      async () => {
        const v = await get<ServiceView>(every.resource_uri);
        if (v.state !== "Running" || v.running_num_containers !== 3) return undefined;
        const containers = await containersOf(every);
        return containers.some((c) => uuidOf(c.node) === added[0]) ? containers : undefined;
      },
      30_000,
      100,
    );
    t.diagnostic(`node C got its container ${Date.now() - scaledAtMs} ms after it was Deployed`);
    assert.deepEqual(
      [...spread(three)].sort(),
      nodeUuids.map((u) => [u, 1]).sort(),
      "one on each of 3 nodes",
    );
    const boxes = await assertEnginesAsApi("the cluster grew");
    assert.equal(boxes.filter((x) => x.node === added[0] && x.running).length, 1);

    await operate(every.resource_uri, "DELETE");
    await serviceIn(every, "Terminated");
    assert.deepEqual(await assertEnginesAsApi("terminating everywhere"), []);
  });
});

function first(list: { objects: ServiceView[] }): ServiceView {
  const s = list.objects[0];
  assert.ok(s, "the service is listed");
  return s;
}
