// The one change-feed follower (store/follow.ts) that the events stream, the controllers and the
// stack follower share: order, pages and back-pressure, what wakes it, its fallback poll, stop.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Follower, follow } from "../../src/store/follow.ts";
import { migrateToLatest } from "../../src/store/migrations.ts";
import type { ChangeRow } from "../../src/store/store.ts";
import { Store } from "../../src/store/store.ts";
import { waitFor } from "../support/harness.ts";
import { targets } from "./targets.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const target of targets) {
  describe(`following the change feed (${target.name})`, () => {
    let cleanup: () => Promise<void>;
    /** This process's store. */
    let store: Store;
    /** Another replica's store on the same database: its commits do not wake this one's followers. */
    let other: Store;
    const followers: Follower[] = [];

    /** A change-feed entry of `type`, committed through `s` in a transaction of its own. */
    async function commit(s: Store, type: "service" | "container" | "action" = "service"): Promise<number> {
      await s.transaction((tx) =>
        tx.appendChange({
          namespace: "ns",
          type,
          action: "update",
          resource_uri: `/api/app/v1/ns/${type}/x/`,
          state: "",
          parents: "[]",
          datetime: Date.now(),
        }),
      );
      // Its revision: the last one (the tests commit one at a time).
      return s.latestRevision();
    }

    function start(opts: Parameters<typeof follow>[1]): Follower {
      const f = follow(store, opts);
      followers.push(f);
      return f;
    }

    before(async () => {
      const o = await target.open();
      cleanup = o.cleanup;
      await migrateToLatest(o.db.kysely, o.db.dialect);
      store = new Store(o.db.kysely, o.db.dialect);
      other = new Store(o.db.kysely, o.db.dialect);
    });
    after(async () => {
      for (const f of followers) f.stop();
      await cleanup();
    });

    test("pages come in revision order, from the revision given, each after the previous one's onPage resolved", async () => {
      const from = await store.latestRevision();
      const written: number[] = [];
      for (let i = 0; i < 12; i++) written.push(await commit(store));
      const pages: number[][] = [];
      let inPage = 0;
      let overlapped = false;
      const f = start({
        from: written[1]!,
        pageSize: 4,
        onPage: async (rows) => {
          inPage += 1;
          if (inPage > 1) overlapped = true;
          pages.push(rows.map((r) => Number(r.revision)));
          // A commit while a page is being worked on is read after it, not beside it.
          if (pages.length === 1) written.push(await commit(store));
          await sleep(15);
          inPage -= 1;
        },
      });
      await waitFor("every change after the revision given", async () => f.position === written.at(-1));
      assert.ok(from < written[0]!);
      assert.equal(overlapped, false, "one page at a time");
      assert.deepEqual(pages.flat(), written.slice(2));
      assert.deepEqual(
        pages.map((p) => p.length),
        [4, 4, 3],
        "pages of the size asked, the last short",
      );
    });

    test("this process's commits wake it, for the types it follows only", async () => {
      const seen: ChangeRow[] = [];
      const f = start({ types: ["service"], onPage: (rows) => void seen.push(...rows) });
      await f.ready();
      await commit(store, "container");
      await sleep(30);
      assert.equal(seen.length, 0, "a container's change is not read by a follower of services");
      const rev = await commit(store, "service");
      await waitFor("the service's change", async () => seen.length === 1);
      assert.equal(Number(seen[0]!.revision), rev);
      assert.equal(seen[0]!.type, "service");
    });

    test("another replica's commit is read when it is announced, or by the fallback poll", async () => {
      const woken: ChangeRow[] = [];
      const polled: ChangeRow[] = [];
      const f = start({ onPage: (rows) => void woken.push(...rows) });
      const p = start({ pollMs: 25, onPage: (rows) => void polled.push(...rows) });
      await Promise.all([f.ready(), p.ready()]);
      const rev = await commit(other);
      await waitFor("the poll to read it", async () => polled.some((r) => Number(r.revision) === rev));
      assert.equal(woken.length, 0, "without a poll nor a notification nothing is read");
      store.announceRemoteChange("service");
      await waitFor("the notification to wake it", async () => woken.some((r) => Number(r.revision) === rev));
    });

    test("a page whose onPage throws is offered again at the next wake-up", async () => {
      const errors: unknown[] = [];
      const offered: number[] = [];
      let fail = true;
      const f = start({
        onError: (err) => errors.push(err),
        onPage: (rows) => {
          offered.push(...rows.map((r) => Number(r.revision)));
          if (fail) throw new Error("not now");
        },
      });
      await f.ready();
      const rev = await commit(store);
      await waitFor("the failed offer", async () => errors.length === 1);
      const at = f.position;
      assert.ok(at !== undefined && at < rev, "the position has not moved past the page");
      fail = false;
      f.wake();
      await waitFor("the page offered again", async () => f.position === rev);
      assert.deepEqual(offered, [rev, rev]);
    });

    test("a follower of some types moves past the entries of other types: it never reads them again", async () => {
      const offered: string[] = [];
      const f = start({
        types: ["container"],
        onPage: (rows) => void offered.push(...rows.map((r) => r.type)),
      });
      await f.ready();
      const from = f.position!;
      let last = 0;
      for (let i = 0; i < 5; i++) last = await commit(store, "action");
      await waitFor("the follower past the action entries", async () => f.position === last);
      assert.ok(last > from);
      // Its next read starts after them, and hands over only the container entry.
      const container = await commit(store, "container");
      await waitFor("the container entry", async () => f.position === container);
      assert.deepEqual(offered, ["container"]);
    });

    test("once stopped it hands over no page, not even the one it was reading", async () => {
      const offered: number[] = [];
      let release = () => {};
      const gate = new Promise<void>((r) => {
        release = r;
      });
      const slowStore = new Proxy(store, {
        get(t, prop, receiver) {
          if (prop === "changesSince") {
            return async (...args: Parameters<Store["changesSince"]>) => {
              const rows = await t.changesSince(...args);
              await gate;
              return rows;
            };
          }
          const v: unknown = Reflect.get(t, prop, receiver);
          return typeof v === "function" ? v.bind(t) : v;
        },
      });
      const f = follow(slowStore, {
        onPage: (rows) => void offered.push(...rows.map((r) => Number(r.revision))),
      });
      await f.ready();
      await commit(store);
      await sleep(10);
      assert.equal(f.reading, true, "a read is under way");
      f.stop();
      release();
      await f.idle();
      await commit(store);
      await sleep(30);
      assert.deepEqual(offered, []);
    });
  });
}
