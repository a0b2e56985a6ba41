// Reads do not queue behind writers (issue 18 item 2): while a transaction is open — across the
// awaits of its callback, as the orchestrator's group commits are — a read outside it is answered
// at once with the last committed state, and sees the transaction's rows once it commits. A write
// outside the transaction waits for it on SQLite, so writes keep their order. A long run of writes
// gives the event loop back now and then (SLICE_MS). Runs on SQLite (a reading
// connection beside the writing one, store/sqlite-driver.ts) and PostgreSQL (the pool).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Db } from "../../src/store/db.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import { serviceChangeRow } from "../support/rows.ts";
import { targets } from "./targets.ts";

/** Resolves with `p`'s value, or "still waiting" when it has not settled within `ms`. */
function within<T>(p: Promise<T>, ms: number): Promise<T | "still waiting"> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<"still waiting">((resolve) => {
      timer = setTimeout(() => resolve("still waiting"), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

for (const target of targets) {
  describe(`the read path on ${target.name}`, () => {
    let db: Db;
    let cleanup: () => Promise<void>;

    before(async () => {
      ({ db, cleanup } = await target.open());
      await migrateToLatest(db.kysely, db.dialect);
    });
    after(async () => {
      await cleanup?.();
    });

    const count = async (namespace: string) =>
      Number(
        (
          await db.kysely
            .selectFrom("changes")
            .select((e) => e.fn.countAll().as("n"))
            .where("namespace", "=", namespace)
            .executeTakeFirstOrThrow()
        ).n,
      );

    test("a read during an open transaction is answered at once, with what was committed", async () => {
      let release: () => void = () => {};
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let written: () => void = () => {};
      const inside = new Promise<void>((resolve) => {
        written = resolve;
      });
      const tx = db.kysely.transaction().execute(async (trx) => {
        await trx.insertInto("changes").values(serviceChangeRow("rp-open")).execute();
        written();
        await held;
      });
      await inside;
      let write: Promise<unknown> | undefined;
      try {
        assert.equal(await within(count("rp-open"), 2000), 0, "the read waited for the transaction");
        // On SQLite a write outside the transaction waits for it to end: one writer, writes in
        // order. (PostgreSQL writes other rows meanwhile.)
        write = db.kysely.insertInto("changes").values(serviceChangeRow("rp-after")).execute();
        if (db.dialect === "sqlite") assert.equal(await within(write, 300), "still waiting");
      } finally {
        release();
      }
      await tx;
      await write;
      assert.equal(await count("rp-open"), 1, "committed rows are read at once");
      assert.equal(await count("rp-after"), 1);
    });

    test("a long run of writes leaves the event loop turns for everything else", async () => {
      // Each write answers at once on SQLite: without turns given back, this loop would be one
      // chain of promise jobs and no timer (or request) would run until it ended.
      let ticks = 0;
      const ticker = setInterval(() => {
        ticks += 1;
      }, 5);
      const t0 = performance.now();
      let writes = 0;
      try {
        while (performance.now() - t0 < 400) {
          await db.kysely.insertInto("changes").values(serviceChangeRow("rp-long")).execute();
          writes += 1;
        }
      } finally {
        clearInterval(ticker);
      }
      assert.ok(ticks >= 3, `a 5 ms timer ran ${ticks} times during 400 ms of writes (${writes} writes)`);
    });

    test("a transaction that rolls back leaves nothing, and the next one is not held up", async () => {
      await assert.rejects(
        db.kysely.transaction().execute(async (trx) => {
          await trx.insertInto("changes").values(serviceChangeRow("rp-rolled")).execute();
          throw new Error("changed my mind");
        }),
        /changed my mind/,
      );
      assert.equal(await count("rp-rolled"), 0);
      const next = db.kysely.transaction().execute(async (trx) => {
        await trx.insertInto("changes").values(serviceChangeRow("rp-next")).execute();
      });
      assert.notEqual(await within(next, 2000), "still waiting", "the writer was left locked");
      assert.equal(await count("rp-next"), 1);
    });
  });
}
