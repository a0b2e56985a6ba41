// BERTH_DATABASE_POOL (issue 34): the size of PostgreSQL's connection pool, checked at start with
// one clear line naming the variable, and passed by the platform to the pool it opens.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { sql } from "kysely";
import { ConfigError, loadConfig } from "../../src/config/index.ts";
import { quiesce, startHarness, waitFor } from "../support/harness.ts";

const onPostgres = process.env.BERTH_TEST_DATABASE_URL?.startsWith("postgres") ?? false;

describe("BERTH_DATABASE_POOL", () => {
  test("unset is 10; a value that is not a whole number from 1 to 1000 is refused, naming the variable", () => {
    assert.equal(loadConfig({}).databasePoolSize, 10);
    assert.equal(loadConfig({ BERTH_DATABASE_POOL: "25" }).databasePoolSize, 25);
    for (const bad of ["0", "-3", "ten", "2.5", "1001", "1e2"]) {
      assert.throws(
        () => loadConfig({ BERTH_DATABASE_POOL: bad }),
        (e: Error) =>
          e instanceof ConfigError &&
          e.message === `BERTH_DATABASE_POOL must be a whole number from 1 to 1000, got "${bad}"`,
        bad,
      );
    }
  });

  test("on PostgreSQL the platform's pool holds at most that many connections", {
    skip: !onPostgres && "PostgreSQL only (set BERTH_TEST_DATABASE_URL)",
  }, async () => {
    const h = await startHarness({ env: { BERTH_DATABASE_POOL: "2" } });
    try {
      await quiesce(h);
      // Five transactions asked for at once, each keeping its connection until the gate opens:
      // a pool of 10 gives each its own connection; a pool of 2 runs two, the others wait for them.
      let open!: () => void;
      const gate = new Promise<void>((resolve) => {
        open = resolve;
      });
      const pids: number[] = [];
      const runs = Array.from({ length: 5 }, () =>
        h.db.kysely.transaction().execute(async (trx) => {
          const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
          pids.push(rows[0]!.pid);
          await gate;
        }),
      );
      await waitFor("two transactions to hold a connection", async () => pids.length >= 2);
      open();
      await Promise.all(runs);
      assert.equal(pids.length, 5);
      assert.equal(new Set(pids).size, 2, `backends: ${pids.join(", ")}`);
    } finally {
      await h.close();
    }
  });
});
