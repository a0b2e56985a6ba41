// A namespace's privileges changed through one replica hold on another at once (issue 26): replica
// B's policy cache trusts an entry for ten minutes, so only the change channel (the identity change
// signal, Store.identityChanged) can tell it in time. Replicas share PostgreSQL, so this file runs
// in the PostgreSQL tier (BERTH_TEST_DATABASE_URL).
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { Platform } from "../../src/platform.ts";
import { assembleReplicaB } from "../replicas/support.ts";
import {
  allowPrivileges,
  type Caller,
  createUser,
  freshDatabaseUrl,
  type Harness,
  startHarness,
  waitFor,
} from "../support/harness.ts";

const onPostgres = process.env.BERTH_TEST_DATABASE_URL?.startsWith("postgres") ?? false;

describe("privileges changed through one replica hold on another", {
  skip: onPostgres ? false : "replicas share a PostgreSQL database: this file runs in the PostgreSQL tier",
}, () => {
  let dataDir: string;
  let db: { url: string; cleanup(): Promise<void> };
  let a: Harness;
  let b: Platform;
  let alice: Caller;
  let n = 0;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-test-"));
    db = await freshDatabaseUrl(dataDir);
    a = await startHarness({ env: { BERTH_DATABASE_URL: db.url, BERTH_REPLICA_ID: "replica-a" } });
    b = await assembleReplicaB({ dataDir: path.join(dataDir, "b"), databaseUrl: db.url });
    b.policies.cacheTtlMs = 600_000;
    alice = await createUser(a, "alice");
  });
  after(async () => {
    await b?.close();
    await a?.close();
    await db?.cleanup();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** POST a privileged service on replica B as alice: the status. */
  const privilegedOnB = async () =>
    (
      await b.app.inject({
        method: "POST",
        url: "/api/app/v1/service/",
        headers: { authorization: alice.auth },
        payload: { image: "busybox:local", name: `root${++n}`, privileged: true },
      })
    ).statusCode;

  test("an allowance given through A is honoured by B at once, and taken back the same way", async () => {
    // B has read alice's policy (nothing allowed) and trusts it for ten minutes.
    assert.equal(await privilegedOnB(), 403);
    await allowPrivileges(a, "alice", { privileged: true });
    await waitFor("B accepts what A allowed", async () => (await privilegedOnB()) === 201, 3000);
    await allowPrivileges(a, "alice", { privileged: false });
    await waitFor("B refuses what A took back", async () => (await privilegedOnB()) === 403, 3000);
  });
});
