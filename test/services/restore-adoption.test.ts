// A restore takes back a running platform (issue 31): the restored records meet engines whose
// containers kept running while Berth was down. Every container is adopted as it runs, the
// differences are actions; a container the engine restarted, one that exited (started again when
// its autorestart says so, left stopped otherwise), one made after the backup (reported, never
// removed, also after the reconciler's passes), and a node that answers only later (adopted then;
// nothing on it is compared or removed before). Simulated nodes' engines outlive the first Berth
// here as real engines outlive a Berth process.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { loadConfig } from "../../src/config/index.ts";
import { FakeEngine } from "../../src/drivers/fake/fake-engine.ts";
import { backupControlPlane, restoreControlPlane } from "../../src/ops/backup.ts";
import { assemblePlatform, type Platform } from "../../src/platform.ts";
import { inState, runningService, simulatedCluster } from "../streams/support.ts";
import { call, type Harness, startHarness, waitFor } from "../support/harness.ts";

const onSqlite = !process.env.BERTH_TEST_DATABASE_URL?.startsWith("postgres");
const secret = { kind: "passphrase" as const, bytes: Buffer.from("a passphrase for tests"), source: "test" };

const engines = new Map<string, FakeEngine>();
const makeFakeEngine = (n: { uuid: string }) => {
  let e = engines.get(n.uuid);
  if (!e) {
    e = new FakeEngine({ name: `kept-${n.uuid.slice(0, 8)}`, cpus: 4, memoryMb: 8192 });
    engines.set(n.uuid, e);
  }
  return e;
};

let h: Harness;
let restored: Platform | undefined;
const dirs: string[] = [];
before(async () => {
  h = await startHarness({ makeFakeEngine });
});
after(async () => {
  await restored?.close();
  await h.close();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

// biome-ignore lint/suspicious/noExplicitAny: the API's JSON.
type Json = any;

test("a restore adopts running containers, reports every difference, and removes nothing it does not know", {
  skip: onSqlite ? false : "restores SQLite backups",
  timeout: 120_000,
}, async () => {
  await simulatedCluster(h, h.admin, 2);
  const web = await runningService(h, h.admin, { name: "web", target_num_containers: 4 });
  const always = await call(h, h.admin, "POST", "/api/app/v1/service/", {
    name: "always",
    image: "busybox:local",
    run_command: "sleep 100000",
    autorestart: "ALWAYS",
    target_num_containers: 2,
  });
  assert.equal(always.status, 201, always.raw);
  await call(h, h.admin, "POST", `${always.body.resource_uri}start/`);
  await inState(h, h.admin, always.body.resource_uri, "Running");
  const rows = async (uuid: string) => await h.store.services.containersOfService(uuid);
  const webRows = await rows(web.uuid);
  const alwaysRows = await rows(always.body.uuid);
  const engineOf = async (nodeUuid: string) => engines.get(nodeUuid)!;

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-adoption-"));
  dirs.push(dir);
  const file = path.join(dir, "berth.backup");
  await backupControlPlane({ config: h.config, file, secret });

  // After the backup: a scale-up makes a container the backup does not know.
  assert.equal((await call(h, h.admin, "PATCH", web.resource_uri, { target_num_containers: 5 })).status, 200);
  const scaled = await call(h, h.admin, "POST", `${web.resource_uri}scale/`);
  assert.equal(scaled.status, 202, scaled.raw);
  await waitFor(
    "the fifth container",
    async () => (await rows(web.uuid)).filter((c) => c.state === "Running").length === 5,
  );
  const late = (await rows(web.uuid)).find((c) => !webRows.some((w) => w.uuid === c.uuid))!;
  assert.ok(late?.engine_id);
  // The node the late container is not on answers only later; the other one holds the late one.
  const lateNode = late.node_uuid;
  const otherNode = webRows.find((c) => c.node_uuid !== lateNode)!.node_uuid;

  // Berth stops; its engines keep running.
  await h.close();
  h = await startHarness(); // a fresh one for after(); the first one's data directory is gone
  // While Berth is down: a web container exits (autorestart OFF: stays stopped), an ALWAYS one is
  // killed (its engine restarts it) and the other ALWAYS one stopped on its engine (Berth starts it).
  const exited = webRows.find((c) => c.node_uuid === lateNode)!;
  (await engineOf(exited.node_uuid)).exitProcess(exited.engine_id!, 3);
  const [killed, stopped] = alwaysRows;
  (await engineOf(killed!.node_uuid)).exitProcess(killed!.engine_id!, 137);
  await (await engineOf(stopped!.node_uuid)).stopContainer(stopped!.engine_id!, { timeoutS: 0 });
  const startedBefore = new Map(
    await Promise.all(
      [...webRows, ...alwaysRows].map(
        async (c) => [c.uuid, (await (await engineOf(c.node_uuid)).inspectContainer(c.engine_id!))!] as const,
      ),
    ),
  );
  engines.get(otherNode)!.setReachable(false);

  const target = path.join(dir, "restored");
  const config = loadConfig({
    BERTH_DATA_DIR: target,
    BERTH_LOG_LEVEL: "silent",
    BERTH_AUTO_ATTACH_ENGINE: "false",
    BERTH_NODE_HEALTH_INTERVAL_MS: "3600000",
    BERTH_RECONCILE_INTERVAL_MS: "3600000",
    BERTH_ACTION_POLL_MS: "100",
    BERTH_SIM_DELAY_FACTOR: "0.01",
  });
  await restoreControlPlane({ config, file, secret });
  // Time has passed for the restored Berth: past every grace an unknown container was given.
  restored = await assemblePlatform(config, {
    makeFakeEngine,
    clock: { now: () => Date.now() + 10 * 60_000 },
  });
  await restored.app.ready();
  await restored.start();
  const r = restored;
  const auth = h.admin.auth.replace(
    /^Basic .*/,
    `Basic ${Buffer.from("admin:admin-key-0123456789abcdef").toString("base64")}`,
  );
  const api = async (method: "GET" | "POST", url: string): Promise<Json> =>
    (await r.app.inject({ method, url, headers: { authorization: auth } })).json();
  const actions = async () =>
    ((await api("GET", "/api/audit/v1/action/?limit=200")).objects as Json[]).map((a) => ({
      name: a.action as string,
      object: (a.object as string).split("/").at(-2) as string,
      state: a.state as string,
      uuid: a.uuid as string,
    }));
  const logOf = async (uuid: string) =>
    (await r.store.actions.actionLogTail(uuid, 20)).map((l) => l.line).join("\n");
  await r.reconciler.resync();
  await r.reconciler.settle();

  const seen = await actions();
  const byObject = (name: string, object: string) =>
    seen.filter((a) => a.name === name && a.object === object);
  assert.equal(byObject("Node Adopt", lateNode).at(0)?.state, "Success");
  assert.equal(byObject("Node Adopt", otherNode).at(0)?.state, "Failed", "its engine did not answer");
  // The late container: reported once, left running through the reconciler's passes.
  const unknown = byObject("Container Unknown", lateNode);
  assert.equal(unknown.length, 1, JSON.stringify(seen));
  assert.match(
    await logOf(unknown[0]!.uuid),
    new RegExp(`${late.engine_id!.slice(0, 12)}.*of service ${web.uuid}.*never removes it`),
  );
  await r.reconciler.resync();
  await r.reconciler.settle();
  assert.equal(
    (await engines.get(lateNode)!.inspectContainer(late.engine_id!))?.running,
    true,
    "never removed",
  );
  assert.equal((await actions()).filter((a) => a.name === "Container Unknown").length, 1, "reported once");

  // The exited web container: Stopped, reported, left stopped (autorestart OFF).
  const exitedNow = await r.store.services.findContainer(exited.uuid);
  assert.equal(exitedNow?.state, "Stopped");
  const exitedAdopt = byObject("Container Adopt", exited.uuid);
  assert.equal(exitedAdopt.length, 1);
  assert.match(
    await logOf(exitedAdopt[0]!.uuid),
    /exited while Berth was down \(exit code 3\); autorestart OFF: left stopped/,
  );
  // Containers on the reachable node that did not change: the same engine containers, not restarted.
  for (const c of [...webRows, ...alwaysRows].filter(
    (c) => c.node_uuid === lateNode && c !== exited && c !== killed && c !== stopped,
  )) {
    const now = await r.store.services.findContainer(c.uuid);
    assert.equal(now?.engine_id, c.engine_id);
    assert.equal(now?.state, "Running");
    assert.equal(now?.started_at, c.started_at);
  }

  // The node that answers later: nothing on it changed while it was pending; adopted once it answers.
  for (const c of [...webRows, ...alwaysRows].filter((c) => c.node_uuid === otherNode)) {
    const now = await r.store.services.findContainer(c.uuid);
    assert.equal(now?.state, "Running", "left as restored");
  }
  engines.get(otherNode)!.setReachable(true);
  await r.reconciler.resync();
  await r.reconciler.settle();
  const later = await actions();
  assert.deepEqual(
    later
      .filter((a) => a.name === "Node Adopt" && a.object === otherNode)
      .map((a) => a.state)
      .sort(),
    ["Failed", "Success"],
  );
  // The killed ALWAYS container was restarted by its engine (reported); the stopped one is started by Berth.
  for (const c of [killed!, stopped!]) {
    const adopt = later.filter((a) => a.name === "Container Adopt" && a.object === c.uuid);
    assert.equal(adopt.length, 1, `${c.name}: ${JSON.stringify(later)}`);
    const log = await logOf(adopt[0]!.uuid);
    if (c === killed) assert.match(log, /restarted by its engine at \S+ \(autorestart ALWAYS\)/);
    else
      assert.match(log, /exited while Berth was down \(exit code \S+\); autorestart ALWAYS: started again/);
  }
  await waitFor(
    "the stopped ALWAYS container to run again",
    async () => (await r.store.services.findContainer(stopped!.uuid))?.state === "Running",
  );
  const restartedSame = await engines.get(stopped!.node_uuid)!.inspectContainer(stopped!.engine_id!);
  assert.equal(restartedSame?.running, true, "the same engine container, started");
  assert.ok(startedBefore.size > 0);

  // Scaling works on the restored platform.
  const patched = await r.app.inject({
    method: "PATCH",
    url: web.resource_uri,
    headers: { authorization: auth, "content-type": "application/json" },
    payload: { target_num_containers: 5 },
  });
  assert.equal(patched.statusCode, 200, patched.body);
  const up = await r.app.inject({
    method: "POST",
    url: `${web.resource_uri}scale/`,
    headers: { authorization: auth },
  });
  assert.equal(up.statusCode, 202, up.body);
  await waitFor("the scale-up", async () => {
    const live = (await r.store.services.containersOfService(web.uuid)).filter(
      (c) => c.state !== "Terminated",
    );
    // The stopped container is started, and one more made beside the late one (never in its way).
    return live.length === 5 && live.every((c) => c.state === "Running");
  });
  assert.equal(
    (await engines.get(lateNode)!.inspectContainer(late.engine_id!))?.running,
    true,
    "still never removed",
  );
});
