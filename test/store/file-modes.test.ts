// The files Berth keeps under its data directory are its owner's alone (issue 26, item 6:
// `berth.sqlite` was 0644): the database and its -wal and -shm files 0600 from their creation,
// whatever the umask, the data directory 0700 when Berth makes it, the key file and backups 0600,
// and the files an older release left 0644 tightened at the next start.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { loadConfig } from "../../src/config/index.ts";
import { StateFiles } from "../../src/drivers/local/state.ts";
import { backupControlPlane, restoreControlPlane } from "../../src/ops/backup.ts";
import { assemblePlatform, type Platform } from "../../src/platform.ts";
import { basic } from "../support/harness.ts";

const secret = { kind: "passphrase" as const, bytes: Buffer.from("a passphrase for tests"), source: "test" };
const modeOf = (file: string) => (fs.statSync(file).mode & 0o777).toString(8);

let root = "";
let umask = 0;

before(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "berth-modes-"));
  // The most permissive umask: every mode below is Berth's own doing.
  umask = process.umask(0);
});
after(() => {
  process.umask(umask);
  fs.rmSync(root, { recursive: true, force: true });
});

function configFor(dataDir: string) {
  return loadConfig({
    BERTH_DATA_DIR: dataDir,
    BERTH_DATABASE_URL: `sqlite:${path.join(dataDir, "berth.sqlite")}`,
    BERTH_LOG_LEVEL: "silent",
    BERTH_AUTO_ATTACH_ENGINE: "false",
    BERTH_NODE_HEALTH_INTERVAL_MS: "3600000",
  });
}

/** Starts a platform on `dataDir`, writes through the API, and leaves it running. */
async function startOn(dataDir: string): Promise<Platform> {
  const p = await assemblePlatform(configFor(dataDir));
  await p.app.ready();
  await p.start();
  await p.identity.bootstrapAdmin({
    username: "admin",
    password: "admin-password",
    apiKey: "admin-key-0123456789abcdef",
  });
  const res = await p.app.inject({
    method: "POST",
    url: "/api/v1.1/orgs/",
    headers: { authorization: basic("admin", "admin-key-0123456789abcdef") },
    payload: { name: `org${Math.random().toString(36).slice(2, 8)}` },
  });
  assert.equal(res.statusCode, 201, res.body);
  return p;
}

describe("file modes under the data directory", () => {
  test("a new data directory is 0700; the database, its WAL and SHM and the key file 0600", async () => {
    const dataDir = path.join(root, "fresh", "data");
    const p = await startOn(dataDir);
    try {
      const db = path.join(dataDir, "berth.sqlite");
      assert.ok(
        fs.existsSync(`${db}-wal`) && fs.existsSync(`${db}-shm`),
        "the WAL and SHM exist while Berth runs",
      );
      assert.equal(modeOf(dataDir), "700");
      assert.equal(modeOf(path.join(root, "fresh")), "700", "parents Berth made too");
      for (const file of [db, `${db}-wal`, `${db}-shm`, path.join(dataDir, "secret.key")])
        assert.equal(modeOf(file), "600", file);

      // Backups: the file, and what a restore brings back into a new data directory.
      const backup = path.join(root, "berth.backup");
      await backupControlPlane({ config: p.config, file: backup, secret });
      assert.equal(modeOf(backup), "600");
      const restoredDir = path.join(root, "restored", "data");
      await restoreControlPlane({ config: configFor(restoredDir), file: backup, secret });
      assert.equal(modeOf(restoredDir), "700");
      for (const name of ["berth.sqlite", "secret.key"])
        assert.equal(modeOf(path.join(restoredDir, name)), "600", name);
    } finally {
      await p.close();
    }
  });

  test("files an older release left 0644 are tightened at the next start", async () => {
    const dataDir = path.join(root, "older");
    await (await startOn(dataDir)).close();
    const db = path.join(dataDir, "berth.sqlite");
    const files = [db, `${db}-wal`, `${db}-shm`, path.join(dataDir, "secret.key")];
    for (const file of [...files, `${db}-wal`, `${db}-shm`])
      if (!fs.existsSync(file)) fs.writeFileSync(file, "");
    for (const file of files) fs.chmodSync(file, 0o644);
    fs.chmodSync(dataDir, 0o755);
    const p = await startOn(dataDir);
    try {
      for (const file of files) assert.equal(modeOf(file), "600", file);
      // A directory the administrator made (or chose) keeps its mode.
      assert.equal(modeOf(dataDir), "755");
    } finally {
      await p.close();
    }
  });

  test("local nodes' state files are 0600 in 0700 directories", () => {
    const state = new StateFiles(path.join(root, "fresh", "data", "local-nodes"));
    state.saveHost({ bridgeName: "x" } as unknown as Parameters<StateFiles["saveHost"]>[0]);
    assert.equal(modeOf(state.stateDir), "700");
    assert.equal(modeOf(state.hostFile), "600");
  });
});
