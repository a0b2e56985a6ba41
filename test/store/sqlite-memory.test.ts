// SQLite's own memory is bounded (issue 34, item 2): each connection of a file database keeps a
// page cache of at most 16 MB and maps at most 64 MB of the file. At 30,000 containers the two
// caches of 64 MB and a 256 MB map had been up to 140 MB of malloc'd and 220 MB of mapped RSS.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import type SQLite from "better-sqlite3";
import { sql } from "kysely";
import { openDatabase, openReader } from "../../src/store/db.ts";

const MB = 1024 * 1024;

/** A connection's page cache in bytes (cache_size is pages when positive, KiB when negative). */
function cacheBytes(cacheSize: number, pageSize: number): number {
  return cacheSize < 0 ? -cacheSize * 1024 : cacheSize * pageSize;
}

test("a file database's writing and reading connections each cache at most 16 MB and map at most 64 MB", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-sqlite-memory-"));
  const db = openDatabase(`sqlite:${path.join(dir, "berth.db")}`);
  let reader: SQLite.Database | undefined;
  try {
    // In a transaction: the writing connection.
    const writer = await db.kysely.transaction().execute(async (tx) => ({
      cache: Number(Object.values((await sql`pragma cache_size`.execute(tx)).rows[0] as object)[0]),
      page: Number(Object.values((await sql`pragma page_size`.execute(tx)).rows[0] as object)[0]),
      mmap: Number(Object.values((await sql`pragma mmap_size`.execute(tx)).rows[0] as object)[0]),
    }));
    assert.ok(cacheBytes(writer.cache, writer.page) <= 16 * MB, `writer caches ${writer.cache}`);
    assert.ok(writer.mmap > 0 && writer.mmap <= 64 * MB, `writer maps ${writer.mmap}`);
    reader = openReader(path.join(dir, "berth.db"));
    const page = reader.pragma("page_size", { simple: true }) as number;
    assert.ok(cacheBytes(reader.pragma("cache_size", { simple: true }) as number, page) <= 16 * MB);
    const mapped = reader.pragma("mmap_size", { simple: true }) as number;
    assert.ok(mapped > 0 && mapped <= 64 * MB, `reader maps ${mapped}`);
  } finally {
    reader?.close();
    await db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
