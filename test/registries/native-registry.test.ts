// Berth's own registry without a real registry server: a stand-in binary shows how Berth starts,
// configures, restarts and stops it, the registry is listed as the native one, and a push
// notification on Berth's webhook redeploys exactly the running `autoredeploy` services of that
// repository and tag (actions that no user started).
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import {
  actionOf,
  call,
  closeSim,
  deployCluster,
  finishedAction,
  runningService,
  type SimHarness,
  startSimHarness,
  until,
  waitFor,
} from "./support.ts";

const HOST = "127.0.0.1:5999";
const MANIFEST = "application/vnd.docker.distribution.manifest.v2+json";

let dir: string;
let s: SimHarness;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "berth-native-registry-"));
  // Stands in for /usr/bin/docker-registry: records its arguments, then waits to be stopped.
  const binary = path.join(dir, "fake-registry");
  writeFileSync(binary, '#!/bin/sh\necho "$@" >> "$HOME/args"\nexec sleep 600\n');
  chmodSync(binary, 0o755);
  s = await startSimHarness({
    env: {
      BERTH_PUBLIC_URL: "http://127.0.0.1:8123",
      BERTH_REGISTRY_DATA_DIR: path.join(dir, "data"),
      BERTH_REGISTRY_LISTEN: HOST,
      BERTH_REGISTRY_BINARY: binary,
    },
    registry: () => [
      { ref: `${HOST}/alice/web:latest`, cmd: ["sleep", "100000"] },
      { ref: `${HOST}/alice/web:v2`, cmd: ["sleep", "100000"] },
    ],
  });
});

after(async () => {
  await closeSim(s);
  rmSync(dir, { recursive: true, force: true });
});

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return !readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.startsWith("Z");
  } catch {
    return false;
  }
};

describe("Berth's own registry", () => {
  test("is listed as the native registry, with the historical alias, and found by host", async () => {
    const list = await call(s.h, s.alice, "GET", "/api/repo/v1/registry/");
    assert.equal(list.status, 200, list.raw);
    assert.equal(list.body.meta.total_count, 1);
    const r = list.body.objects[0];
    assert.deepEqual(r, {
      uuid: r.uuid,
      resource_uri: `/api/repo/v1/alice/registry/${HOST}/`,
      name: "Berth registry",
      host: HOST,
      is_native_registry: true,
      is_tutum_registry: true,
      is_ssl: false,
      port: 5999,
    });
    for (const q of ["is_native_registry=true", `host=${HOST}`, "name=Berth%20registry", `uuid=${r.uuid}`]) {
      assert.equal(
        (await call(s.h, s.alice, "GET", `/api/repo/v1/registry/?${q}`)).body.meta.total_count,
        1,
        q,
      );
    }
    assert.equal(
      (await call(s.h, s.alice, "GET", "/api/repo/v1/registry/?is_native_registry=false")).body.meta
        .total_count,
      0,
    );
    const one = await call(s.h, s.alice, "GET", `/api/repo/v1/alice/registry/${HOST}/`);
    assert.equal(one.status, 200, one.raw);
    assert.deepEqual(one.body, r);
    const repo = await call(s.h, s.alice, "POST", "/api/repo/v1/repository/", { name: `${HOST}/alice/web` });
    assert.equal(repo.status, 400, "Berth's own registry needs no external repository");
    assert.equal(repo.body.details[0].field, "name");
  });

  test("runs with the configuration Berth generates: storage, address and a notification endpoint with a token", async () => {
    const registry = s.h.nativeRegistry;
    assert.ok(registry);
    const pid = await waitFor("the registry runs", async () => registry.pid);
    const config = readFileSync(registry.configPath, "utf8");
    assert.equal(statSync(registry.configPath).mode & 0o777, 0o600, "the configuration holds the token");
    assert.match(config, new RegExp(`rootdirectory: "${path.join(dir, "data")}"`));
    assert.match(config, new RegExp(`addr: "${HOST}"`));
    assert.match(config, /url: "http:\/\/127\.0\.0\.1:8123\/hooks\/registry\/"/);
    assert.ok(config.includes(`Authorization: ["Bearer ${registry.token}"]`));
    assert.ok(registry.token.length >= 40);
    const args = await waitFor("the stand-in recorded its arguments", async () => {
      try {
        return readFileSync(path.join(dir, "data", "args"), "utf8");
      } catch {
        return undefined;
      }
    });
    assert.equal(args.trim(), `serve ${registry.configPath}`);
    assert.ok(alive(pid));
  });

  test("is started again when it exits", async () => {
    const registry = s.h.nativeRegistry!;
    const first = registry.pid!;
    const starts = registry.startCount;
    process.kill(first, "SIGKILL");
    const second = await waitFor("a new registry process", async () => {
      const p = registry.pid;
      return p && p !== first ? p : undefined;
    });
    assert.equal(registry.startCount, starts + 1);
    assert.ok(alive(second));
    assert.match(s.log.text, /Berth's registry exited \(SIGKILL\); restarting it/);
  });
});

describe("auto-redeploy on a push to Berth's registry", () => {
  let auto: { uuid: string; resource_uri: string };
  let manual: { uuid: string; resource_uri: string };
  let otherTag: { uuid: string; resource_uri: string };
  let stopped: { uuid: string; resource_uri: string };

  const notify = (events: unknown[], token = s.h.nativeRegistry!.token) =>
    s.h.app.inject({
      method: "POST",
      url: "/hooks/registry/",
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/vnd.docker.distribution.events.v1+json",
      },
      payload: JSON.stringify({ events }),
    });

  const pushEvent = (repository: string, tag: string, mediaType = MANIFEST) => ({
    id: "e1",
    action: "push",
    target: {
      mediaType,
      repository,
      tag,
      digest: "sha256:0123",
      url: `http://${HOST}/v2/${repository}/manifests/${tag}`,
    },
    request: { host: HOST, method: "PUT", useragent: "docker/20.10" },
  });

  before(async () => {
    await deployCluster(s, 2);
    auto = await runningService(s, { image: `${HOST}/alice/web`, name: "auto", autoredeploy: true });
    manual = await runningService(s, { image: `${HOST}/alice/web:latest`, name: "manual" });
    otherTag = await runningService(s, {
      image: `${HOST}/alice/web:v2`,
      name: "other-tag",
      autoredeploy: true,
    });
    const st = await runningService(s, {
      image: `${HOST}/alice/web:latest`,
      name: "stopped",
      autoredeploy: true,
    });
    const stop = await call(s.h, s.alice, "POST", `${st.resource_uri}stop/`);
    await finishedAction(s, actionOf(stop));
    stopped = await until(s, st.resource_uri, "Stopped");
  });

  const actionsOn = async (uri: string) =>
    (await s.h.store.actions.listActions({ namespaces: ["alice"], objects: [uri], limit: 100, offset: 0 }))
      .rows;

  test("the webhook refuses a missing or wrong token", async () => {
    const none = await s.h.app.inject({ method: "POST", url: "/hooks/registry/", payload: { events: [] } });
    assert.equal(none.statusCode, 401);
    const wrong = await notify([pushEvent("alice/web", "latest")], "not-the-token");
    assert.equal(wrong.statusCode, 401);
    const apiKey = await s.h.app.inject({
      method: "POST",
      url: "/hooks/registry/",
      headers: { authorization: s.alice.auth },
      payload: { events: [pushEvent("alice/web", "latest")] },
    });
    assert.equal(apiKey.statusCode, 401, "a user's credentials are not the registry's token");
    assert.ok(
      !(await actionsOn(auto.resource_uri)).some((a) => a.action === "Service Redeploy"),
      "nothing was redeployed",
    );
  });

  test("pulls, layer pushes and other repositories start nothing", async () => {
    const res = await notify([
      { ...pushEvent("alice/web", "latest"), action: "pull" },
      pushEvent("alice/web", "latest", "application/octet-stream"),
      pushEvent("alice/other", "latest"),
      { action: "push", target: { repository: "alice/web" } },
      "garbage",
    ]);
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(JSON.parse(res.body), { redeploys: 0 });
  });

  test("a push of the tag redeploys the running autoredeploy service of that tag only", async () => {
    const res = await notify([pushEvent("alice/web", "latest"), pushEvent("alice/web", "latest")]);
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(JSON.parse(res.body), { redeploys: 1 });
    const started = (await actionsOn(auto.resource_uri)).find((a) => a.action === "Service Redeploy");
    assert.ok(started, "the autoredeploy service has a redeploy action");
    assert.equal(started.is_user_action, 0, "no user started it");
    assert.equal(started.user, "berth");
    const done = await finishedAction(s, started.uuid);
    assert.equal(done.state, "Success", done.log.join("\n"));
    assert.ok(
      done.log[0]?.startsWith(`Autoredeploy: ${HOST}/alice/web:latest was pushed`),
      done.log.join("\n"),
    );
    assert.ok(
      done.log.includes(`Pulling image ${HOST}/alice/web:latest`),
      `the image is pulled again although the node has it:\n${done.log.join("\n")}`,
    );
    await until(s, auto.resource_uri, "Running");
    const view = await call(s.h, s.alice, "GET", `/api/audit/v1/action/${started.uuid}/`);
    assert.equal(view.body.is_user_action, false);
    for (const other of [manual, otherTag, stopped]) {
      assert.ok(
        !(await actionsOn(other.resource_uri)).some((a) => a.action === "Service Redeploy"),
        `${other.resource_uri} is not redeployed`,
      );
    }
    assert.equal((await call(s.h, s.alice, "GET", stopped.resource_uri)).body.state, "Stopped");
  });

  test("Berth stops its registry when it closes", async () => {
    const registry = s.h.nativeRegistry!;
    const pid = registry.pid!;
    await registry.stop();
    assert.equal(registry.pid, undefined);
    await waitFor("the registry process is gone", async () => !alive(pid));
  });
});
