// BERTH_DATABASE_POOL (issue 34): the size of PostgreSQL's connection pool, checked at start with
// one clear line naming the variable, and passed by the platform to the pool it opens.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { sql } from "kysely";
import { answerOfWritten } from "../../src/api/errors.ts";
import { ConfigError, loadConfig } from "../../src/config/index.ts";
import { call, createUser, quiesce, startHarness, waitFor } from "../support/harness.ts";

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

  test("a request that finds no free connection within the pool's wait is a 429 to send again, and succeeds once one is free", {
    skip: !onPostgres && "PostgreSQL only (set BERTH_TEST_DATABASE_URL)",
  }, async () => {
    const h = await startHarness({ env: { BERTH_DATABASE_POOL: "2" } });
    try {
      const alice = await createUser(h, "alice");
      const created = await call(h, alice, "POST", "/api/app/v1/service/", {
        image: "busybox:local",
        name: "web",
      });
      assert.equal(created.status, 201, created.raw);
      await quiesce(h);
      let open!: () => void;
      const gate = new Promise<void>((resolve) => {
        open = resolve;
      });
      // Both connections of the pool held until the gate opens.
      let holding = 0;
      const held = Array.from({ length: 2 }, () =>
        h.db.kysely.transaction().execute(async (trx) => {
          await sql`select 1`.execute(trx);
          holding += 1;
          await gate;
        }),
      );
      await waitFor("both connections to be held", async () => holding === 2);
      const busy = await call(h, alice, "PATCH", created.body.resource_uri, { target_num_containers: 2 });
      open();
      await Promise.all(held);
      assert.equal(busy.status, 429, busy.raw);
      assert.equal(busy.body.code, "database_busy");
      assert.equal(busy.headers["retry-after"], "1");
      const again = await call(h, alice, "PATCH", created.body.resource_uri, { target_num_containers: 2 });
      assert.equal(again.status, 200, again.raw);
      assert.equal(again.body.target_num_containers, 2);
    } finally {
      await h.close();
    }
  });

  test("a call whose write committed is not told to send it again when its answer's read finds the database busy", async () => {
    const h = await startHarness();
    try {
      const alice = await createUser(h, "alice");
      // The first read of a service view after the create's commit finds no free connection
      // (the pool's own words), as when other work holds the whole pool for its 5 s wait.
      const serviceView = h.views.serviceView.bind(h.views);
      let failed = 0;
      h.views.serviceView = async (...args) => {
        if (failed++ === 0) throw new Error("timeout exceeded when trying to connect");
        return serviceView(...args);
      };
      const created = await call(h, alice, "POST", "/api/app/v1/service/", {
        image: "busybox:local",
        name: "web",
      });
      h.views.serviceView = serviceView;
      assert.equal(created.status, 201, created.raw);
      assert.equal(created.body.name, "web");
      assert.equal(failed, 2, "the answer's read was tried again");
      const action = await call(h, alice, "GET", created.headers["x-platform-action-uri"] as string);
      assert.equal(action.body.state, "Success", action.raw);
    } finally {
      await h.close();
    }
  });

  test("an answer after a committed write waits out a busy database a few times, and no other error", async () => {
    const busy = () => new Error("timeout exceeded when trying to connect");
    let calls = 0;
    const value = await answerOfWritten(async () => {
      calls += 1;
      if (calls < 3) throw busy();
      return "view";
    });
    assert.deepEqual([value, calls], ["view", 3]);
    calls = 0;
    await assert.rejects(
      answerOfWritten(async () => {
        calls += 1;
        throw new Error("no such service");
      }),
      /no such service/,
    );
    assert.equal(calls, 1, "an error that is not the database's business is not tried again");
    calls = 0;
    await assert.rejects(
      answerOfWritten(async () => {
        calls += 1;
        throw busy();
      }),
      /timeout exceeded/,
    );
    assert.equal(calls, 4, "a database busy for longer is answered as busy");
  });
});
