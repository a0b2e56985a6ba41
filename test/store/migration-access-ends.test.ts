// Migration 0019_access_ends names the creator of registration tokens and triggers by user id,
// backfilled from `created_by`: rows of an older Berth get their creator's id, and a row whose
// creator is unknown keeps a null id (it keeps working: identity/creators.ts). Runs on SQLite and
// PostgreSQL.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Db } from "../../src/store/db.ts";
import { migrateToLatest, migrateUpTo } from "../../src/store/migrations.ts";
import { targets } from "./targets.ts";

const NOW = 1_800_000_000_000;

for (const target of targets) {
  describe(`migration 0019 on ${target.name}: creators of tokens and triggers`, () => {
    let db: Db;
    let cleanup: () => Promise<void>;
    let bobId = 0;

    before(async () => {
      ({ db, cleanup } = await target.open());
      await migrateUpTo(db.kysely, db.dialect, "0017_live_containers_per_node");
      const k = db.kysely;
      await k.insertInto("namespaces").values({ name: "bob", kind: "user", created: NOW }).execute();
      const bob = await k
        .insertInto("users")
        .values({
          username: "bob",
          email: "bob@example.test",
          password_hash: "x",
          full_name: "",
          is_admin: 0,
          is_active: 1,
          location: "",
          company: "",
          profile_url: "",
          date_joined: NOW,
        })
        .returning("id")
        .executeTakeFirstOrThrow();
      bobId = bob.id;
      for (const [i, by] of ["bob", "gone"].entries()) {
        await k
          .insertInto("registration_tokens")
          .values({
            uuid: `t-${i}`,
            namespace: "bob",
            token_hash: `hash-${i}`,
            created_by: by,
            created: NOW,
            expires: NOW + 1000,
            used_at: null,
            node_uuid: null,
          } as never)
          .execute();
        await k
          .insertInto("triggers")
          .values({
            uuid: `g-${i}`,
            namespace: "bob",
            service_uuid: "s",
            name: "ci",
            operation: "REDEPLOY",
            secret_hash: `secret-${i}`,
            created_by: by,
            created: NOW,
          } as never)
          .execute();
      }
      await migrateToLatest(db.kysely, db.dialect);
    });
    after(() => cleanup());

    test("rows get their creator's id; an unknown creator stays null", async () => {
      for (const table of ["registration_tokens", "triggers"] as const) {
        const rows = await db.kysely
          .selectFrom(table)
          .select(["created_by", "creator_id"])
          .orderBy("created_by")
          .execute();
        assert.deepEqual(
          rows.map((r) => [r.created_by, r.creator_id]),
          [
            ["bob", bobId],
            ["gone", null],
          ],
          table,
        );
      }
    });
  });
}
