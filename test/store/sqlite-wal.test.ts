// SQLite's WAL is checkpointed by a thread of its own (store/db.ts Checkpointer): commits never
// wait for a checkpoint, yet the WAL does not grow without end and what was committed is in the
// database file once it is closed.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { sql } from "kysely";
import { openDatabase } from "../../src/store/db.ts";

test("a large WAL is checkpointed beside the writer and starts over; the data survives a reopen", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-wal-"));
  const file = path.join(dir, "w.sqlite");
  try {
    const db = openDatabase(`sqlite:${file}`);
    await sql`create table blobs (id integer primary key, body text)`.execute(db.kysely);
    const body = "x".repeat(4000);
    // About 8 MB of WAL in a few transactions: above the checkpointer's threshold.
    for (let t = 0; t < 8; t++) {
      await db.kysely.transaction().execute(async (tx) => {
        for (let i = 0; i < 250; i++) await sql`insert into blobs (body) values (${body})`.execute(tx);
      });
    }
    const grown = fs.statSync(`${file}-wal`).size;
    assert.ok(grown > 4 * 1024 * 1024, `the WAL grew to ${grown} bytes`);
    // Once the thread has checkpointed, the next commit starts the WAL over (and the file is cut back).
    const deadline = Date.now() + 20_000;
    let size = grown;
    while (Date.now() < deadline) {
      await sql`insert into blobs (body) values ('small')`.execute(db.kysely);
      size = fs.statSync(`${file}-wal`).size;
      if (size < grown / 2) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.ok(size < grown / 2, `the WAL was still ${size} bytes (it had grown to ${grown})`);
    await db.close();
    const again = openDatabase(`sqlite:${file}`);
    const { rows } = await sql<{ n: number }>`select count(*) as n from blobs`.execute(again.kysely);
    assert.ok(rows[0]!.n > 2000, `${rows[0]!.n} rows after a reopen`);
    await again.close();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
