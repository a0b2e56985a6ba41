// Backup → restore of the control plane while containers run on a real engine (issue 16). A real
// Berth process runs a service of three containers on a private dockerd; `npm run admin -- backup`
// backs it up while it runs; Berth stops; `npm run admin -- restore` brings the backup into a new
// data directory (SQLite, the key file carried in the backup) or a new PostgreSQL database; the
// restored Berth lists the same objects and re-adopts the running containers without restarting
// them (the same engine ids, the same StartedAt), says so in an action, and manages them: a stop
// through it stops them on the engine.
//
// Run under the real-engine lock: flock /tmp/berth-real.lock node scripts/test.mjs test/replicas/restore
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import Docker from "dockerode";
import { LABELS } from "../../src/domain/service.ts";
import { dockerdUnavailable, type PrivateDockerd, startPrivateDockerd } from "../support/dockerd.ts";
import { waitFor } from "../support/harness.ts";
import {
  api,
  cleanup,
  type FreshDatabase,
  freshPgDatabase,
  pgUnavailable,
  type Replica,
  SECRET_KEY,
  startReplica,
  withLogs,
} from "./support.ts";

const root = path.resolve(import.meta.dirname, "../..");
const engineMissing = dockerdUnavailable();
if (engineMissing && process.env.CI === "true") {
  throw new Error(`the restore test needs a real engine in CI: ${engineMissing}`);
}
const pgMissing = engineMissing ? undefined : pgUnavailable();

const ENV = {
  BERTH_ACTION_POLL_MS: "200",
  BERTH_NODE_HEALTH_INTERVAL_MS: "1000",
  BERTH_RECONCILE_INTERVAL_MS: "2000",
  BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
  BERTH_SHUTDOWN_TIMEOUT_MS: "5000",
};

/** `npm run admin -- <command> <file>` with Berth's settings, as an operator runs it. */
async function admin(command: "backup" | "restore", file: string, env: Record<string, string>) {
  const passphrase = path.join(os.tmpdir(), `berth-restore-passphrase-${process.pid}`);
  fs.writeFileSync(passphrase, "a passphrase for the replica tier\n", { mode: 0o600 });
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "src/ops/admin-command.ts", command, file, "--passphrase-file", passphrase],
    {
      cwd: root,
      env: { ...process.env, BERTH_SECRET_KEY: SECRET_KEY, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  child.stdout.on("data", (d) => {
    out += d;
  });
  child.stderr.on("data", (d) => {
    out += d;
  });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  assert.equal(code, 0, `admin ${command}: ${out}`);
  return out;
}

interface EngineFacts {
  id: string;
  startedAt: string;
  restarts: number;
  running: boolean;
}

async function engineFacts(docker: Docker, serviceUuid: string): Promise<Map<string, EngineFacts>> {
  const list = await docker.listContainers({
    all: true,
    filters: { label: [`${LABELS.service}=${serviceUuid}`] },
  });
  const facts = new Map<string, EngineFacts>();
  for (const c of list) {
    const info = await docker.getContainer(c.Id).inspect();
    facts.set(c.Labels[LABELS.container]!, {
      id: c.Id,
      startedAt: info.State.StartedAt,
      restarts: info.RestartCount,
      running: info.State.Running,
    });
  }
  return facts;
}

/** uuid → state of every object of a list answer. */
// biome-ignore lint/suspicious/noExplicitAny: the API's JSON.
const states = (list: any): Record<string, string> =>
  Object.fromEntries(list.body.objects.map((o: { uuid: string; state: string }) => [o.uuid, o.state]));

describe("backup and restore while containers run on a real engine", {
  skip: engineMissing ? `real engines unavailable: ${engineMissing}` : false,
  timeout: 600_000,
}, () => {
  let engine: PrivateDockerd | undefined;
  const running: Replica[] = [];
  const databases: FreshDatabase[] = [];
  const dirs: string[] = [];

  before(async () => {
    engine = await startPrivateDockerd();
  });
  after(async () => {
    for (const r of running) cleanup(r);
    for (const d of databases) await d.drop();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
    await engine?.stop();
  });

  /**
   * One round: Berth on `original` runs a service; backup online; Berth stops; restore with
   * `restored`; the restored Berth is compared with what ran before.
   */
  async function round(name: string, original: Record<string, string>, restored: Record<string, string>) {
    const before = running.length;
    try {
      await steps(name, original, restored);
    } catch (err) {
      throw withLogs(err, running.slice(before));
    }
  }

  async function steps(name: string, original: Record<string, string>, restored: Record<string, string>) {
    const docker = new Docker({ socketPath: engine!.socketPath });
    const first = await startReplica(`${name}-original`, { ...ENV, ...original });
    running.push(first);
    const node = await api(first, "POST", "/api/infra/v1/node/", {
      engine_url: `unix://${engine!.socketPath}`,
      nickname: `${name} engine`,
    });
    assert.equal(node.status, 201, JSON.stringify(node.body));
    const created = await api(first, "POST", "/api/app/v1/service/", {
      name: `${name}-web`,
      image: "busybox:local",
      run_command: "sleep 100000",
      target_num_containers: 3,
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const service = created.body as { uuid: string; resource_uri: string };
    // A second, never-started service and an organization: objects without containers come back too.
    assert.equal(
      (await api(first, "POST", "/api/app/v1/service/", { name: `${name}-idle`, image: "busybox:local" }))
        .status,
      201,
    );
    assert.equal((await api(first, "POST", "/api/v1.1/orgs/", { name: `${name}-org` })).status, 201);
    assert.equal((await api(first, "POST", `${service.resource_uri}start/`)).status, 202);
    await waitFor(
      "the service to run",
      async () => (await api(first, "GET", service.resource_uri)).body.state === "Running",
      60_000,
      200,
    );
    const lists = async (r: Replica) => ({
      services: states(await api(r, "GET", "/api/app/v1/service/")),
      containers: states(await api(r, "GET", "/api/app/v1/container/")),
      nodes: states(await api(r, "GET", "/api/infra/v1/node/")),
      org: (await api(r, "GET", `/api/v1.1/orgs/${name}-org/`)).body?.name,
    });
    const beforeBackup = await lists(first);
    assert.equal(Object.keys(beforeBackup.containers).length, 3);
    const factsBefore = await engineFacts(docker, service.uuid);
    assert.equal(factsBefore.size, 3);
    assert.ok([...factsBefore.values()].every((f) => f.running));

    // Online: the backup is made while Berth runs.
    const file = path.join(first.dataDir, "..", `berth-${name}-${process.pid}.backup`);
    dirs.push(file);
    const said = await admin("backup", file, { ...ENV, ...original, BERTH_DATA_DIR: first.dataDir });
    assert.match(said, /backed up to/);

    first.proc.kill("SIGTERM");
    assert.equal(await first.exited, 0, "the original Berth stopped gracefully");
    // While no Berth runs, one container stops on the engine: a difference the restore must report.
    const [victim, victimBefore] = [...factsBefore][0]!;
    await docker.getContainer(victimBefore.id).kill();
    await waitFor(
      "the victim to stop",
      async () => !(await docker.getContainer(victimBefore.id).inspect()).State.Running,
      30_000,
      100,
    );

    // The new data directory starts empty: restore fills it, then Berth starts on it.
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `berth-restored-${name}-`));
    dirs.push(dataDir);
    assert.match(
      await admin("restore", file, { ...ENV, ...restored, BERTH_DATA_DIR: dataDir }),
      /restored from/,
    );
    const second = await startReplica(`${name}-restored`, { ...ENV, ...restored, BERTH_DATA_DIR: dataDir });
    running.push(second);

    // The same objects, with what the engine says now: the stopped container, its service partly running.
    const expected = structuredClone(beforeBackup);
    expected.containers[victim] = "Stopped";
    expected.services[service.uuid] = "Partly running";
    // Right at start-up: the adoption has settled the service to what its containers say.
    assert.deepEqual(await lists(second), expected, "the restored Berth lists the same objects");
    // Re-adopted, never restarted: the same engine containers, the running ones started at the
    // same moment as before, the stopped one left stopped.
    const expectedFacts = new Map(factsBefore);
    expectedFacts.set(victim, { ...victimBefore, running: false });
    const sameEngine = async () => {
      const now = await engineFacts(docker, service.uuid);
      assert.deepEqual(
        new Map([...now].map(([k, f]) => [k, { ...f, startedAt: f.running ? f.startedAt : "" }])),
        new Map([...expectedFacts].map(([k, f]) => [k, { ...f, startedAt: f.running ? f.startedAt : "" }])),
      );
    };
    await sameEngine();
    const adoptions = await waitFor(
      "the adoption to be reported",
      async () => {
        const { body } = await api(second, "GET", "/api/audit/v1/action/?limit=100");
        const found = (body.objects as { action: string; state: string; object: string }[]).filter((a) =>
          a.action.endsWith(" Adopt"),
        );
        return found.some((a) => a.action === "Node Adopt") ? found : undefined;
      },
      30_000,
      200,
    );
    assert.deepEqual(
      adoptions.map((a) => [a.action, a.object.split("/").at(-2), a.state]).sort(),
      [
        ["Container Adopt", victim, "Success"],
        ["Node Adopt", node.body.uuid, "Success"],
      ],
      "one action for the node, one for the difference",
    );
    // A few health checks and reconcile passes later nothing was restarted either.
    await new Promise((r) => setTimeout(r, 3000));
    await sameEngine();
    assert.equal((await api(second, "GET", service.resource_uri)).body.state, "Partly running");

    // The restored Berth manages them: a stop through it stops the very same engine containers.
    assert.equal((await api(second, "POST", `${service.resource_uri}stop/`)).status, 202);
    await waitFor(
      "the service to stop",
      async () => (await api(second, "GET", service.resource_uri)).body.state === "Stopped",
      60_000,
      200,
    );
    const stopped = await engineFacts(docker, service.uuid);
    assert.deepEqual([...stopped.keys()].sort(), [...factsBefore.keys()].sort());
    for (const [uuid, f] of stopped) {
      assert.equal(f.id, factsBefore.get(uuid)!.id);
      assert.equal(f.running, false);
    }
    // Leaves the engine clean for the next round.
    assert.equal((await api(second, "DELETE", service.resource_uri)).status, 202);
    await waitFor(
      "the service's engine containers to be removed",
      async () => (await engineFacts(docker, service.uuid)).size === 0,
      60_000,
      200,
    );
    second.proc.kill("SIGTERM");
    assert.equal(await second.exited, 0);
  }

  test("SQLite: restored into a new data directory (the key file comes with the backup)", async () => {
    // No BERTH_SECRET_KEY: secrets are sealed with the data directory's key file.
    await round("sqlite", { BERTH_SECRET_KEY: "" }, { BERTH_SECRET_KEY: "" });
  });

  test("PostgreSQL: restored into a new, empty database", { skip: pgMissing ?? false }, async () => {
    const from = await freshPgDatabase("berth_backup_from");
    databases.push(from);
    const to = await freshPgDatabase("berth_backup_to");
    databases.push(to);
    await round("postgres", { BERTH_DATABASE_URL: from.url }, { BERTH_DATABASE_URL: to.url });
  });
});
