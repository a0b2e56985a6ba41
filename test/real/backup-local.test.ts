// The README's backup and restore procedure, as an operator runs it, on real local nodes (issue
// 31): Berth (src/main.ts, a process) runs two local nodes and two services; `berth admin backup`
// while it runs; Berth stops; while it is down one container is killed (autorestart ALWAYS: its
// engine starts it again) and one exits (autorestart OFF); `berth admin restore` into an empty data
// directory; Berth starts there. Every container is re-adopted: the same engine containers, the
// untouched ones with the same start time, the killed one reported as restarted, the exited one
// reported and left stopped; a scale-up works.
//
// Needs root, dockerd, iproute2, iptables and busybox-static. Without them the file is skipped
// locally, but fails when CI=true. Lab range 10.205.0.0/16, bridge berth-bk0 (this file's own).
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import Docker from "dockerode";
import { LABELS } from "../../src/domain/service.ts";
import { BUSYBOX_IMAGE, LocalProvider } from "../../src/drivers/local/index.ts";
import { openDatabase } from "../../src/store/db.ts";
import { Store } from "../../src/store/store.ts";
import { berth } from "../cli/support.ts";
import { basic, waitFor } from "../support/harness.ts";
import { localNodesUnavailable } from "../support/local-lab.ts";
import { freeLoopbackPort } from "../support/real-api.ts";

const LAB_RANGE = "10.205.0.0/16";
const BRIDGE = "berth-bk0";
const ADMIN_KEY = "backup-local-admin-key-0123";
const root = path.resolve(import.meta.dirname, "../..");
const work = fs.mkdtempSync(path.join(os.tmpdir(), "berth-backup-local-"));
// The nodes' remapped roots pass through it to their data-roots (never read it).
fs.chmodSync(work, 0o711);
const original = path.join(work, "data");
const restored = path.join(work, "restored");
const passphrase = path.join(work, "passphrase");
const backup = path.join(work, "berth.backup");
const auth = basic("admin", ADMIN_KEY);

const unavailable = await localNodesUnavailable({ labRange: LAB_RANGE, bridgeName: BRIDGE });

// biome-ignore lint/suspicious/noExplicitAny: the API's JSON.
type Json = any;

/** The logs of these actions, read from the data directory's database (the API streams them). */
async function logs(dataDir: string, uuids: string[]): Promise<string> {
  const db = openDatabase(`sqlite:${path.join(dataDir, "berth.sqlite")}`);
  try {
    const store = new Store(db.kysely, db.dialect);
    const out: string[] = [];
    for (const uuid of uuids) out.push(...(await store.actions.actionLogTail(uuid, 50)).map((l) => l.line));
    return out.join("\n");
  } finally {
    await db.close();
  }
}

describe("the README's backup and restore procedure on local nodes", { skip: unavailable ?? false }, () => {
  let child: ChildProcess | undefined;
  let port = 0;
  let stderr = "";

  const startServer = async (dataDir: string): Promise<ChildProcess> => {
    stderr = "";
    const proc = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
      cwd: root,
      env: {
        ...process.env,
        BERTH_LISTEN: `127.0.0.1:${port}`,
        BERTH_DATA_DIR: dataDir,
        BERTH_DATABASE_URL: `sqlite:${path.join(dataDir, "berth.sqlite")}`,
        BERTH_ADMIN_USERNAME: "admin",
        BERTH_ADMIN_PASSWORD: "admin-password",
        BERTH_ADMIN_API_KEY: ADMIN_KEY,
        BERTH_ACTION_POLL_MS: "200",
        BERTH_RECONCILE_INTERVAL_MS: "1000",
        BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
        BERTH_AUTO_ATTACH_ENGINE: "false",
        BERTH_LOCAL_LAB_RANGE: LAB_RANGE,
        BERTH_LOCAL_BRIDGE: BRIDGE,
        BERTH_LOG_LEVEL: "warn",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    proc.stdout?.resume();
    proc.stderr?.on("data", (d) => (stderr += d));
    await waitFor(
      `server on ${port}`,
      async () => {
        if (proc.exitCode !== null) throw new Error(`server exited: ${stderr}`);
        const res = await fetch(`http://127.0.0.1:${port}/auth/`, { headers: { authorization: auth } }).catch(
          () => undefined,
        );
        return res?.status === 200;
      },
      60_000,
      100,
    );
    return proc;
  };

  const api = async (method: string, uri: string, body?: unknown) => {
    const res = await fetch(`http://127.0.0.1:${port}${uri}`, {
      method,
      headers: { authorization: auth, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Json) : undefined, raw: text };
  };
  const get = async (uri: string): Promise<Json> => {
    const res = await api("GET", uri);
    assert.equal(res.status, 200, res.raw);
    return res.body;
  };
  const stopServer = async () => {
    const proc = child;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((resolve) => proc.once("exit", resolve));
    proc.kill("SIGTERM");
    await exited;
  };
  const admin = async (args: string[]) => {
    const r = await berth(["admin", ...args, "--passphrase-file", passphrase], { timeoutMs: 120_000 });
    assert.equal(r.code, 0, r.stderr);
    return r.stdout;
  };
  const inState = (uri: string, state: string, timeoutMs = 90_000) =>
    waitFor(
      `${uri} ${state}`,
      async () => ((await get(uri)).state === state ? true : undefined),
      timeoutMs,
      200,
    );

  after(async () => {
    const proc = child;
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((resolve) => proc.once("exit", resolve));
      proc.kill("SIGKILL");
      await exited;
    }
    // The nodes are recorded in both data directories (the same engines): terminate from either.
    for (const dir of [restored, original]) {
      const local = new LocalProvider({
        stateDir: path.join(dir, "local-nodes"),
        labRange: LAB_RANGE,
        bridgeName: BRIDGE,
      });
      for (const n of local.listNodes())
        await local
          .terminateNode(n.nodeId)
          .catch((error: Error) => console.error(`cleanup: ${error.message}`));
      await local.teardownHost().catch((error: Error) => console.error(`cleanup: ${error.message}`));
    }
    fs.rmSync(work, { recursive: true, force: true });
  });

  test("backup while running, stop, restore into an empty directory, start: everything re-adopted", {
    timeout: 400_000,
  }, async (t) => {
    fs.writeFileSync(passphrase, "a passphrase the operator keeps apart\n", { mode: 0o600 });
    port = await freeLoopbackPort();
    child = await startServer(original);

    const created = await api("POST", "/api/infra/v1/nodecluster/", {
      name: "kept",
      region: "/api/infra/v1/region/local/host/",
      node_type: "/api/infra/v1/nodetype/local/standard/",
      target_num_nodes: 2,
    });
    assert.equal(created.status, 201, created.raw);
    assert.equal((await api("POST", `${created.body.resource_uri}deploy/`)).status, 202);
    let seen: Json;
    await waitFor(
      "the cluster Deployed",
      async () => {
        const c = await get(created.body.resource_uri);
        seen = c;
        const deploy = ((await get("/api/audit/v1/action/?limit=20")).objects as Json[]).find(
          (a) => a.action === "Node Cluster Deploy",
        );
        if (c.state === "Deploy failed" || c.state === "Terminated" || deploy?.state === "Failed") {
          const acts = (await get("/api/audit/v1/action/?limit=20")).objects as Json[];
          throw new Error(
            `cluster ${c.state}: ${await logs(
              original,
              acts.map((a) => a.uuid),
            )}`,
          );
        }
        return c.state === "Deployed" ? true : undefined;
      },
      180_000,
      500,
    ).catch(async (err: Error) => {
      const acts = (await get("/api/audit/v1/action/?limit=20")).objects as Json[];
      throw new Error(
        `${err.message}: ${JSON.stringify(seen)} ${JSON.stringify(acts.map((a) => [a.action, a.state]))}\n${await logs(
          original,
          acts.map((a) => a.uuid),
        )}`,
      );
    });
    const nodes: Json[] = await Promise.all(
      (await get(created.body.resource_uri)).nodes.map((uri: string) => get(uri)),
    );
    const dockers = new Map(
      nodes.map((n) => [n.uuid as string, new Docker({ host: n.public_ip, port: 2375 })]),
    );

    const service = async (name: string, body: Record<string, unknown>) => {
      const made = await api("POST", "/api/app/v1/service/", {
        image: BUSYBOX_IMAGE,
        name,
        run_command: "sleep 100000",
        ...body,
      });
      assert.equal(made.status, 201, made.raw);
      assert.equal((await api("POST", `${made.body.resource_uri}start/`)).status, 202);
      await inState(made.body.resource_uri, "Running");
      return made.body as { uuid: string; resource_uri: string };
    };
    const web = await service("web", { target_num_containers: 3, autorestart: "ALWAYS" });
    const once = await service("once", { target_num_containers: 1, autorestart: "OFF" });
    /** Every engine container of Berth's, by record: engine id, node, running, start time. */
    const engineFacts = async () => {
      const out = new Map<
        string,
        { id: string; node: string; service: string; running: boolean; startedAt: string; pid: number }
      >();
      for (const [node, docker] of dockers) {
        for (const c of await docker.listContainers({ all: true, filters: { label: [LABELS.node] } })) {
          const view = await docker.getContainer(c.Id).inspect();
          out.set(c.Labels[LABELS.container]!, {
            id: c.Id,
            node,
            service: c.Labels[LABELS.service]!,
            running: view.State.Running,
            startedAt: view.State.StartedAt,
            pid: view.State.Pid,
          });
        }
      }
      return out;
    };
    const before = await engineFacts();
    assert.equal(before.size, 4);

    // 1. The backup, while Berth runs.
    assert.match(
      await admin(["backup", backup, "--data-dir", original]),
      /^backed up to \S+ \(sqlite database, backup made \S+\)\n$/,
    );
    // 2. Berth stops; its nodes' engines and containers keep running.
    await stopServer();
    // While it is down: a web container's process is killed (its engine restarts it: ALWAYS) and
    // the `once` container's process too (autorestart OFF: it stays exited).
    const killedRecord = [...before].find(([, f]) => f.service === web.uuid)![0];
    const onceUuid = [...before].find(([, f]) => f.service === once.uuid)![0];
    const victims = [killedRecord, onceUuid];
    for (const uuid of victims) process.kill(before.get(uuid)!.pid, "SIGKILL");
    await waitFor(
      "the killed containers to exit or restart",
      async () => {
        const now = await engineFacts();
        return (
          now.get(killedRecord)!.running &&
          now.get(killedRecord)!.startedAt !== before.get(killedRecord)!.startedAt &&
          !now.get(onceUuid)!.running
        );
      },
      30_000,
      200,
    );

    // 3. Restore into an empty data directory, with Berth stopped.
    assert.match(
      await admin(["restore", backup, "--data-dir", restored]),
      /^restored from \S+ \(sqlite database, backup made \S+\)\n$/,
    );
    // 4. Berth starts on it.
    child = await startServer(restored);
    const after = await engineFacts();
    // The same engine containers: none removed, none made.
    assert.deepEqual(
      [...after].map(([u, f]) => [u, f.id]).sort(),
      [...before].map(([u, f]) => [u, f.id]).sort(),
    );
    const actions = async () =>
      ((await get("/api/audit/v1/action/?limit=200")).objects as Json[]).filter((a) =>
        ["Node Adopt", "Container Adopt", "Container Unknown", "Container Cleanup"].includes(a.action),
      );
    const adopted = await waitFor(
      "both nodes adopted",
      async () => {
        const found = await actions();
        return found.filter((a) => a.action === "Node Adopt" && a.state === "Success").length === 2
          ? found
          : undefined;
      },
      30_000,
      200,
    );
    t.diagnostic(JSON.stringify(adopted.map((a) => [a.action, a.object, a.state])));
    const containerRows = (await get("/api/app/v1/container/?limit=100")).objects as Json[];
    const row = (uuid: string) => containerRows.find((c) => c.uuid === uuid);
    for (const [uuid, f] of before) {
      const now = after.get(uuid)!;
      if (!victims.includes(uuid)) {
        assert.equal(now.startedAt, f.startedAt, `${uuid}: not restarted`);
        assert.equal(row(uuid)?.state, "Running");
      }
    }
    // The killed ALWAYS container: restarted by its engine, reported; the OFF one: reported, Stopped.
    const adoptOf = (uuid: string) =>
      adopted.filter((a) => a.action === "Container Adopt" && a.object.includes(uuid));
    assert.equal(adoptOf(killedRecord).length, 1, JSON.stringify(adopted));
    assert.equal(row(killedRecord)?.state, "Running");
    assert.notEqual(after.get(killedRecord)!.startedAt, before.get(killedRecord)!.startedAt);
    assert.equal(adoptOf(onceUuid).length, 1, JSON.stringify(adopted));
    await waitFor(
      "once Stopped",
      async () => (await get(`/api/app/v1/container/${onceUuid}/`)).state === "Stopped",
      30_000,
      200,
    );
    assert.equal(after.get(onceUuid)!.running, false);
    // A few reconcile passes later nothing was removed or restarted.
    await new Promise((r) => setTimeout(r, 4000));
    const later = await engineFacts();
    const facts = (m: typeof later) => [...m].map(([u, f]) => [u, f.id, f.startedAt, f.running]).sort();
    assert.deepEqual(facts(later), facts(after));

    // 5. A scale-up works on the restored platform.
    assert.equal((await api("PATCH", web.resource_uri, { target_num_containers: 4 })).status, 200);
    assert.equal((await api("POST", `${web.resource_uri}scale/`)).status, 202);
    await waitFor(
      "web scaled to 4",
      async () => (await get(web.resource_uri)).running_num_containers === 4,
      90_000,
      200,
    );
    await stopServer();
  });
});
