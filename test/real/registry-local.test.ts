// The real-engine tier of registries: real `docker-registry` servers on the lab's host address,
// real local nodes pulling from them. Berth runs its own registry (10.222.0.1:5020, notifications
// to Berth's webhook); the test runs an htpasswd-protected one (10.222.0.1:5021) as a third-party
// registry. Shown: a repository added with right and wrong credentials; a service whose image is
// only in that registry deployed on a node that lacks it; a push of a new image under the same tag
// to Berth's registry redeploys an `autoredeploy` service onto the new image id; a trigger call
// redeploys, and a deleted trigger's URL answers 404.
//
// Needs root, dockerd, iproute2, iptables, busybox-static, docker-registry and htpasswd
// (apache2-utils). Without them the file is skipped locally, but fails when CI=true.
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import Docker from "dockerode";
import type { Engine } from "../../src/drivers/engine.ts";
import { BUSYBOX_IMAGE } from "../../src/drivers/local/index.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";
import {
  deployLocalCluster,
  localNodesUnavailableReason,
  requirePrerequisitesInCi,
  stopWorkers,
  terminateLab,
} from "../support/local-lab.ts";
import { freeLoopbackPort } from "../support/real-api.ts";

// This file's own lab range and bridge, so it can run beside the other real-engine files.
const LAB_RANGE = "10.222.0.0/16";
const BRIDGE = "berth-g0";
const HOST_ADDRESS = "10.222.0.1";
const NATIVE = `${HOST_ADDRESS}:5020`;
const PRIVATE = `${HOST_ADDRESS}:5021`;
const REGISTRY_BINARY = "/usr/bin/docker-registry";
const USER = "ci-robot";
const PASSWORD = "lab-Passw0rd-of-the-test-registry";

function findHtpasswd(): string | undefined {
  return ["/usr/bin/htpasswd", "/usr/sbin/htpasswd"].find((p) => existsSync(p));
}

const unavailable =
  (await localNodesUnavailableReason({ labRange: LAB_RANGE, bridgeName: BRIDGE })) ??
  (!existsSync(REGISTRY_BINARY)
    ? `${REGISTRY_BINARY} is missing (apt-get install docker-registry)`
    : !findHtpasswd()
      ? "htpasswd is missing (apt-get install apache2-utils)"
      : undefined);
requirePrerequisitesInCi(unavailable, "registry prerequisites are present (required in CI)");

/** GET /v2/ of a lab registry from the host; the status, or 0 while nothing answers. */
async function v2Status(host: string): Promise<number> {
  try {
    const res = await fetch(`http://${host}/v2/`, { signal: AbortSignal.timeout(1000) });
    return res.status;
  } catch {
    return 0;
  }
}

interface ActionRowLike {
  uuid: string;
  action: string;
  state: string;
  is_user_action: number;
}

describe("registries with real engines and real registries", { skip: unavailable ?? false }, () => {
  let h: Harness;
  let alice: Caller;
  let dir: string;
  let port: number;
  let privateRegistry: ChildProcess | undefined;
  const nodeUuids: string[] = [];
  let pusher: { engine: Engine; docker: Docker };
  let runner: { uuid: string; engine: Engine };

  const actionsOn = async (uri: string): Promise<ActionRowLike[]> =>
    (await h.store.actions.listActions({ namespaces: ["alice"], objects: [uri], limit: 200, offset: 0 }))
      .rows;
  const finished = async (uuid: string, timeoutMs = 60_000) => {
    const a = await waitFor(
      `action ${uuid} ends`,
      async () => {
        const row = await h.store.actions.findAction(uuid);
        return row && ["Success", "Failed", "Canceled"].includes(row.state) ? row : undefined;
      },
      timeoutMs,
      100,
    );
    return { ...a, log: (await h.store.actions.actionLogTail(uuid, 500)).map((l) => l.line) };
  };
  const actionOf = (headers: Record<string, unknown>) =>
    String(headers["x-platform-action-uri"]).split("/").filter(Boolean).at(-1)!;
  /** The image id each live container of a service runs, read from its engine. */
  const imageIdsOf = async (serviceUri: string): Promise<string[]> => {
    const svc = (await call(h, alice, "GET", serviceUri)).body;
    const ids: string[] = [];
    for (const uri of svc.containers as string[]) {
      const row = await h.store.services.findContainer(uri.split("/").filter(Boolean).at(-1)!);
      assert.ok(row?.engine_id, `${uri} has an engine container`);
      const node = await h.store.nodes.findNode(row.node_uuid);
      const view = await h.engines.forNode(node!).inspectContainer(row.engine_id);
      assert.ok(view?.running, `${uri} runs`);
      ids.push(view.imageId);
    }
    return ids;
  };
  const deployCluster = async (name: string, tag: string) => {
    const deployed = await deployLocalCluster(h, alice, { name, targetNumNodes: 1, tags: [{ name: tag }] });
    const uuid = deployed.nodeUuids[0]!;
    nodeUuids.push(uuid);
    return uuid;
  };

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "berth-registry-real-"));
    port = await freeLoopbackPort();
    h = await startHarness({
      env: {
        BERTH_LOCAL_LAB_RANGE: LAB_RANGE,
        BERTH_LOCAL_BRIDGE: BRIDGE,
        BERTH_PUBLIC_URL: `http://127.0.0.1:${port}`,
        BERTH_REGISTRY_DATA_DIR: path.join(dir, "native"),
        BERTH_REGISTRY_LISTEN: NATIVE,
        BERTH_REGISTRY_ALLOW: HOST_ADDRESS,
        BERTH_INSECURE_REGISTRIES: PRIVATE,
        BERTH_RECONCILE_INTERVAL_MS: "1000",
        BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
        BERTH_ACTION_STEP_TIMEOUT_MS: "120000",
      },
    });
    // The registry posts its notifications to Berth's webhook over real HTTP.
    await h.app.listen({ host: "127.0.0.1", port });
    alice = await createUser(h, "alice");
    // The lab's host address exists once the host bridge does; Berth's registry binds to it then
    // (it is restarted until it can).
    await h.local.ensureHost();
    await waitFor("Berth's registry answers", async () => (await v2Status(NATIVE)) === 200, 20_000, 200);

    // The third-party registry: htpasswd (bcrypt) protected, on its own port of the host address.
    const htpasswd = execFileSync(findHtpasswd()!, ["-Bbn", USER, PASSWORD], { encoding: "utf8" });
    writeFileSync(path.join(dir, "htpasswd"), htpasswd, { mode: 0o600 });
    writeFileSync(
      path.join(dir, "private.yml"),
      [
        "version: 0.1",
        "log:",
        "  level: warn",
        "storage:",
        "  filesystem:",
        `    rootdirectory: ${JSON.stringify(path.join(dir, "private"))}`,
        "http:",
        `  addr: ${JSON.stringify(PRIVATE)}`,
        "auth:",
        "  htpasswd:",
        "    realm: berth-test",
        `    path: ${JSON.stringify(path.join(dir, "htpasswd"))}`,
        "",
      ].join("\n"),
    );
    privateRegistry = spawn(REGISTRY_BINARY, ["serve", path.join(dir, "private.yml")], {
      stdio: "ignore",
      env: { PATH: "/usr/bin:/bin", HOME: dir },
    });
    await waitFor("the test registry answers", async () => (await v2Status(PRIVATE)) === 401, 20_000, 200);

    const [pusherUuid, runnerUuid] = await Promise.all([
      deployCluster("pusher", "pusher"),
      deployCluster("runner", "runner"),
    ]);
    const pusherNode = (await h.store.nodes.findNode(pusherUuid))!;
    pusher = {
      engine: h.engines.forNode(pusherNode),
      docker: new Docker({ host: pusherNode.public_ip, port: 2375, protocol: "http" }),
    };
    runner = { uuid: runnerUuid, engine: h.engines.forNode((await h.store.nodes.findNode(runnerUuid))!) };
  });

  after(async () => {
    if (!h) return;
    // Nothing of Berth may dial the nodes while they go: once the lab's guard route is gone with
    // the host lab, a packet to a lab address would take the default route off the machine.
    await stopWorkers(h);
    await sleep(300);
    await terminateLab(h, nodeUuids);
    if (privateRegistry && privateRegistry.exitCode === null) {
      const exited = new Promise((resolve) => privateRegistry!.once("exit", resolve));
      privateRegistry.kill("SIGTERM");
      await Promise.race([exited, sleep(5000)]);
      if (privateRegistry.exitCode === null) privateRegistry.kill("SIGKILL");
    }
    const native = h.nativeRegistry?.pid;
    await h.close();
    if (native) assert.throws(() => process.kill(native, 0), "Berth stopped its registry");
    rmSync(dir, { recursive: true, force: true });
  });

  test("Berth's registry is listed as the native one", async () => {
    const list = await call(h, alice, "GET", "/api/repo/v1/registry/?is_native_registry=true");
    assert.equal(list.status, 200, list.raw);
    assert.equal(list.body.objects[0].host, NATIVE);
    assert.equal(list.body.objects[0].is_tutum_registry, true);
  });

  test("a repository of the htpasswd registry is refused with wrong credentials and added with right ones", async () => {
    const wrong = await call(h, alice, "POST", "/api/repo/v1/repository/", {
      name: `${PRIVATE}/team/app`,
      username: USER,
      password: "wrong-password",
    });
    assert.equal(wrong.status, 400, wrong.raw);
    assert.equal(wrong.body.code, "bad_credentials");
    assert.match(wrong.body.error, /refused the username and password/);
    const ok = await call(h, alice, "POST", "/api/repo/v1/repository/", {
      name: `${PRIVATE}/team/app`,
      username: USER,
      password: PASSWORD,
    });
    assert.equal(ok.status, 201, ok.raw);
    assert.equal(ok.body.registry, `/api/repo/v1/alice/registry/${PRIVATE}/`);
    assert.ok(!ok.raw.includes(PASSWORD));
  });

  test("a service whose image is only in that registry runs on a node that lacks it", {
    timeout: 120_000,
  }, async (t) => {
    const image = `${PRIVATE}/team/app:v1`;
    await pusher.engine.tagImage(BUSYBOX_IMAGE, image);
    const progress: string[] = [];
    await assert.rejects(
      pusher.engine.pushImage(image),
      /no basic auth credentials|unauthorized|authentication required/,
    );
    await pusher.engine.pushImage(image, {
      auth: { username: USER, password: PASSWORD, serverAddress: PRIVATE },
      onProgress: (line) => progress.push(line),
    });
    t.diagnostic(`push: ${progress.at(-1)}`);
    assert.equal(await runner.engine.hasImage(image), false, "the runner node lacks the image");

    const created = await call(h, alice, "POST", "/api/app/v1/service/", {
      image,
      name: "private-app",
      run_command: "sleep 100000",
      tags: [{ name: "runner" }],
    });
    assert.equal(created.status, 201, created.raw);
    const start = await call(h, alice, "POST", `${created.body.resource_uri}start/`);
    assert.equal(start.status, 202, start.raw);
    const a = await finished(actionOf(start.headers));
    for (const line of a.log) t.diagnostic(`start: ${line}`);
    assert.equal(a.state, "Success", a.log.join("\n"));
    assert.ok(a.log.includes(`Pulling image ${image}`), "the action log shows the pull");
    assert.ok(a.log.includes(`Pulled image ${image}`));
    assert.equal(await runner.engine.imageId(image), await pusher.engine.imageId(BUSYBOX_IMAGE));
    const svc = (await call(h, alice, "GET", created.body.resource_uri)).body;
    assert.equal(svc.state, "Running");
    const c = (await call(h, alice, "GET", svc.containers[0])).body;
    assert.equal(c.node, `/api/infra/v1/alice/node/${runner.uuid}/`);
    const repo = await call(h, alice, "GET", `/api/repo/v1/repository/${PRIVATE}/team/app/`);
    assert.equal(repo.body.in_use, true);
  });

  let web: { uuid: string; resource_uri: string };

  test("a push of a new image under the same tag redeploys an autoredeploy service onto it", {
    timeout: 120_000,
  }, async (t) => {
    const image = `${NATIVE}/alice/web:latest`;
    await pusher.engine.tagImage(BUSYBOX_IMAGE, image);
    await pusher.engine.pushImage(image);
    const created = await call(h, alice, "POST", "/api/app/v1/service/", {
      image,
      name: "web",
      run_command: "sleep 100000",
      autoredeploy: true,
      tags: [{ name: "runner" }],
    });
    assert.equal(created.status, 201, created.raw);
    web = created.body;
    const start = await call(h, alice, "POST", `${web.resource_uri}start/`);
    const started = await finished(actionOf(start.headers));
    assert.equal(started.state, "Success", started.log.join("\n"));
    const before = await imageIdsOf(web.resource_uri);
    const oldId = (await pusher.engine.imageId(BUSYBOX_IMAGE))!;
    assert.deepEqual(before, [oldId]);

    // A new image under the same tag: a commit of busybox:local with one more variable.
    const made = await pusher.docker.createContainer({ Image: BUSYBOX_IMAGE, Cmd: ["true"] });
    await made.commit({ repo: `${NATIVE}/alice/web`, tag: "latest", changes: "ENV BERTH_TEST_VERSION=2" });
    await made.remove({ force: true });
    const newId = (await pusher.engine.imageId(image))!;
    assert.notEqual(newId, oldId, "the commit made a new image");
    const pushedAt = Date.now();
    await pusher.engine.pushImage(image);

    const redeploy = await waitFor(
      "an autoredeploy action",
      async () => (await actionsOn(web.resource_uri)).find((a) => a.action === "Service Redeploy"),
      30_000,
      100,
    );
    t.diagnostic(`the redeploy started ${Date.now() - pushedAt} ms after the push`);
    assert.equal(redeploy.is_user_action, 0, "no user started it");
    const done = await finished(redeploy.uuid);
    for (const line of done.log) t.diagnostic(`autoredeploy: ${line}`);
    assert.equal(done.state, "Success", done.log.join("\n"));
    assert.ok(done.log[0]?.includes(`${image} was pushed to Berth's registry`));
    assert.ok(done.log.includes(`Pulling image ${image}`));
    assert.deepEqual(await imageIdsOf(web.resource_uri), [newId], "the container runs the new image id");
    assert.equal(await runner.engine.imageId(image), newId);
    assert.equal((await call(h, alice, "GET", web.resource_uri)).body.state, "Running");
  });

  test("a trigger call redeploys; a deleted trigger's URL answers 404", { timeout: 120_000 }, async () => {
    const created = await call(h, alice, "POST", `${web.resource_uri}trigger/`, { name: "ci" });
    assert.equal(created.status, 201, created.raw);
    const url: string = created.body.url;
    assert.ok(url.startsWith(`http://127.0.0.1:${port}/`));
    const containerBefore = (await call(h, alice, "GET", web.resource_uri)).body.containers[0];
    const rowBefore = await h.store.services.findContainer(containerBefore.split("/").filter(Boolean).at(-1));

    // Over real HTTP, without credentials, as a CI system calls it.
    const res = await fetch(url, { method: "POST" });
    assert.equal(res.status, 202);
    const action = (await res.json()) as { uuid: string; action: string; is_user_action: boolean };
    assert.equal(action.action, "Service Redeploy");
    assert.equal(res.headers.get("x-platform-action-uri"), `/api/audit/v1/action/${action.uuid}/`);
    const done = await finished(action.uuid);
    assert.equal(done.state, "Success", done.log.join("\n"));
    const rowAfter = await h.store.services.findContainer(rowBefore!.uuid);
    assert.notEqual(rowAfter?.engine_id, rowBefore?.engine_id, "a new engine container replaced the old one");
    assert.equal((await call(h, alice, "GET", web.resource_uri)).body.state, "Running");

    const del = await call(h, alice, "DELETE", created.body.resource_uri);
    assert.equal(del.status, 200, del.raw);
    const gone = await fetch(url, { method: "POST" });
    assert.equal(gone.status, 404);
    assert.equal(((await gone.json()) as { code: string }).code, "not_found");
  });
});
