// What a write costs the database (issue 34, item 1): a PATCH of a service and an operation POST
// run a small, fixed number of SQL statements and transactions, whatever the namespace holds; a
// transaction writes its change-feed entries last, in one statement just before its commit, and on
// PostgreSQL takes the feed lock there and only there (writers that took it mid-transaction, before
// row and namespace locks others took first, deadlocked: 40P01). Counted through the store's
// statement counter with background workers stopped; runs on SQLite, and on PostgreSQL when
// BERTH_TEST_DATABASE_URL names one.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { CompiledQuery } from "kysely";
import { type Caller, call, createUser, type Harness, quiesce, startHarness } from "../support/harness.ts";

/**
 * Bounds per dialect: the same on both, since PostgreSQL takes the feed lock in the statement that
 * writes the feed's entries and the quota's namespace lock in the one that reads its limits. A
 * PATCH: its read, begin, update, limits (and lock), usage, action, feed, commit, and its answer's
 * one read of container versions and links (the old code: 10 and 12; a start, 10 and 11).
 */
const BOUNDS = {
  sqlite: { patch: 9, start: 8 },
  postgres: { patch: 9, start: 8 },
};

describe("statements per write", () => {
  let h: Harness;
  let alice: Caller;
  let bounds: (typeof BOUNDS)["sqlite"];

  before(async () => {
    h = await startHarness();
    bounds = BOUNDS[h.db.dialect];
    alice = await createUser(h, "alice");
    await quiesce(h);
  });
  after(async () => {
    await h?.close();
  });

  async function newService(name: string): Promise<string> {
    const res = await call(h, alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name,
      container_envvars: [{ key: "K", value: "v" }],
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return `/api/app/v1/service/${res.body.uuid}/`;
  }

  /** The statements of one call (the fewest of `calls`: leftover work can only add statements). */
  async function fewest(calls: (() => Promise<{ status: number }>)[], status: number) {
    let best: { statements: number; transactions: number; queries: CompiledQuery[] } | undefined;
    for (const c of calls) {
      const before = h.db.statements.transactions;
      const { result, queries } = await h.db.statements.queriesDuring(c);
      assert.equal(result.status, status);
      const m = { statements: queries.length, transactions: h.db.statements.transactions - before, queries };
      if (!best || m.statements < best.statements) best = m;
    }
    return best!;
  }

  let target = 1;
  const patch = (uri: string) => () => call(h, alice, "PATCH", uri, { target_num_containers: ++target });
  const start = (uri: string) => () => call(h, alice, "POST", `${uri}start/`);

  /** The statements of each transaction of a call, from its begin to its commit. */
  function transactions(queries: CompiledQuery[]): string[][] {
    const out: string[][] = [];
    let open: string[] | undefined;
    for (const q of queries) {
      const text = q.sql.trim().toLowerCase();
      if (text.startsWith("begin")) open = [];
      else if (open && (text.startsWith("commit") || text.startsWith("rollback"))) {
        if (text.startsWith("commit")) out.push(open);
        open = undefined;
      } else open?.push(text);
    }
    return out;
  }

  test("a PATCH and a start cost a fixed, small number of statements, whatever the namespace holds", async () => {
    const web = await newService("web");
    const stopped = [];
    for (let i = 0; i < 6; i++) stopped.push(await newService(`s-${i}`));
    const small = {
      patch: await fewest([patch(web), patch(web), patch(web)], 200),
      start: await fewest([start(stopped[0]!), start(stopped[1]!), start(stopped[2]!)], 202),
    };
    // A larger namespace: 30 more services, linking to web.
    for (let i = 0; i < 30; i++) {
      const res = await call(h, alice, "POST", "/api/app/v1/service/", {
        image: "busybox:local",
        name: `n-${i}`,
        linked_to_service: [{ to_service: web, name: `web${i}` }],
      });
      assert.equal(res.status, 201, JSON.stringify(res.body));
    }
    const large = {
      patch: await fewest([patch(web), patch(web), patch(web)], 200),
      // Three samples, as above: one alone can catch a statement of leftover work (seen on PostgreSQL).
      start: await fewest([start(stopped[3]!), start(stopped[4]!), start(stopped[5]!)], 202),
    };
    const show = (m: { queries: CompiledQuery[] }) => m.queries.map((q) => q.sql.slice(0, 90)).join("\n");
    assert.ok(
      small.patch.statements <= bounds.patch,
      `PATCH: ${small.patch.statements} statements (bound ${bounds.patch}):\n${show(small.patch)}`,
    );
    assert.ok(
      small.start.statements <= bounds.start,
      `start: ${small.start.statements} statements (bound ${bounds.start}):\n${show(small.start)}`,
    );
    assert.equal(
      large.patch.statements,
      small.patch.statements,
      "a PATCH costs the same in a larger namespace",
    );
    assert.equal(
      large.start.statements,
      small.start.statements,
      "a start costs the same in a larger namespace",
    );
    // The call's action commits with the write, as the operation's action commits with the state it set.
    assert.equal(small.patch.transactions, 1);
    assert.equal(small.start.transactions, 1);
    const [tx] = transactions(small.patch.queries);
    assert.ok(tx?.some((q) => q.startsWith('update "services"')));
    assert.ok(
      tx?.some((q) => q.startsWith('insert into "actions"')),
      `the call's action is written in the write's transaction:\n${tx?.join("\n")}`,
    );
  });

  test("a PATCH's action commits with its write; a PATCH refused in its transaction leaves one Failed action", async () => {
    const ports = [{ protocol: "tcp", inner_port: 8080 }];
    const shop = await call(h, alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "shop",
      container_ports: ports,
      domains: [{ host: "shop.test" }],
    });
    assert.equal(shop.status, 201, shop.raw);
    const uri = await newService("copy");
    const { result: ok, queries } = await h.db.statements.queriesDuring(() =>
      call(h, alice, "PATCH", uri, { container_ports: ports, nickname: "fine" }),
    );
    assert.equal(ok.status, 200, ok.raw);
    const written = transactions(queries);
    assert.equal(written.length, 1, "one commit for the write and its action");
    assert.ok(written[0]!.some((q) => q.startsWith('insert into "actions"')));
    // Refused after its row was written, inside its transaction: nothing of it stays but the action.
    const refused = await call(h, alice, "PATCH", uri, {
      nickname: "taken",
      domains: [{ host: "shop.test" }],
    });
    assert.equal(refused.status, 409, refused.raw);
    assert.equal(refused.body.code, "domain_taken");
    const service = await call(h, alice, "GET", uri);
    assert.equal(service.body.nickname, "fine");
    for (const [res, state] of [
      [ok, "Success"],
      [refused, "Failed"],
    ] as const) {
      const uuid = String(res.headers["x-dockercloud-action-uri"] ?? "")
        .split("/")
        .at(-2)!;
      const rows = (await h.store.actions.listActions({ namespaces: ["alice"], uuid, limit: 10, offset: 0 }))
        .rows;
      assert.equal(rows.length, 1, `one action for the call: ${JSON.stringify(rows)}`);
      assert.equal(rows[0]!.state, state);
      assert.equal(rows[0]!.object, uri.replace("/api/app/v1/", "/api/app/v1/alice/"));
      const log = await h.store.actions.actionLogTail(uuid, 10);
      if (state === "Failed")
        assert.ok(
          log.some((l) => l.line.startsWith("409: ")),
          JSON.stringify(log),
        );
      else assert.equal(log.length, 0);
    }
  });

  test("PATCHes that arrive together share one commit, each answered as if alone", async () => {
    const ports = [{ protocol: "tcp", inner_port: 8080 }];
    const held = await call(h, alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "holder",
      container_ports: ports,
      domains: [{ host: "held.test" }],
    });
    assert.equal(held.status, 201, held.raw);
    const uris: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await call(h, alice, "POST", "/api/app/v1/service/", {
        image: "busybox:local",
        name: `together-${i}`,
        container_ports: ports,
      });
      assert.equal(res.status, 201, res.raw);
      uris.push(`/api/app/v1/service/${res.body.uuid}/`);
    }
    // The third claims a domain another service holds: refused inside its transaction (409).
    const before = h.db.statements.transactions;
    const { result: answers, queries } = await h.db.statements.queriesDuring(() =>
      Promise.all(
        uris.map((uri, i) =>
          call(
            h,
            alice,
            "PATCH",
            uri,
            i === 2 ? { domains: [{ host: "held.test" }] } : { target_num_containers: 3 },
          ),
        ),
      ),
    );
    const transactions = h.db.statements.transactions - before;
    // A member after the first costs one savepoint more than a PATCH alone, and no release: the
    // commit ends them all (the old code released each, a round trip on PostgreSQL).
    const texts = queries.map((q) => q.sql.trim().toLowerCase());
    assert.equal(texts.filter((q) => q.startsWith("release")).length, 0, texts.join("\n"));
    assert.ok(texts.filter((q) => q.startsWith("savepoint")).length <= 4, texts.join("\n"));
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200, 409, 200, 200],
      JSON.stringify(answers.map((a) => a.body)),
    );
    for (const [i, a] of answers.entries()) {
      const uuid = String(a.headers["x-dockercloud-action-uri"]).split("/").at(-2)!;
      const [action] = (
        await h.store.actions.listActions({ namespaces: ["alice"], uuid, limit: 1, offset: 0 })
      ).rows;
      assert.equal(action?.state, i === 2 ? "Failed" : "Success", `action of PATCH ${i}`);
      const now = await call(h, alice, "GET", uris[i]!);
      assert.equal(now.body.target_num_containers, i === 2 ? 1 : 3);
      assert.deepEqual(now.body.domains ?? [], [], `PATCH ${i} left no domain`);
      if (i !== 2) assert.equal(a.body.target_num_containers, 3, "the answer shows the committed write");
    }
    // One commit for the four writes and their actions (the refused call's Failed action is one more).
    assert.ok(transactions <= 3, `${transactions} transactions for 5 PATCHes`);
  });

  test("every transaction writes its change-feed entries last, in one statement, under the feed lock on PostgreSQL", async () => {
    const uri = await newService("order");
    const calls = [patch(uri), start(uri)];
    for (const c of calls) {
      const { queries } = await h.db.statements.queriesDuring(c);
      const writes = transactions(queries);
      assert.ok(writes.length >= 1);
      for (const tx of writes) {
        const inserts = tx.filter((q) =>
          /^(with "feed_lock" as materialized \(.*\) )?insert into "changes"/.test(q),
        );
        const locks = tx.filter((q) => q.includes("pg_advisory_xact_lock"));
        assert.equal(inserts.length, 1, `one insert of feed entries:\n${tx.join("\n")}`);
        assert.equal(tx.at(-1), inserts[0], `the feed's entries are the last statement:\n${tx.join("\n")}`);
        if (h.db.dialect === "postgres") {
          assert.equal(locks.length, 1, `the feed lock once:\n${tx.join("\n")}`);
          assert.equal(locks[0], inserts[0], `the feed lock in the entries' statement:\n${tx.join("\n")}`);
        } else assert.equal(locks.length, 0);
      }
    }
  });
});
