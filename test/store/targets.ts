// The dialects the store suites run on: SQLite always, PostgreSQL when BERTH_TEST_PG_URL names a
// server (required in CI). Each target opens a fresh database (a schema of its own on PostgreSQL).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { type Db, openDatabase } from "../../src/store/db.ts";

export const pgUrl = process.env.BERTH_TEST_PG_URL;
if (!pgUrl && process.env.CI === "true") {
  throw new Error(
    "BERTH_TEST_PG_URL must name a PostgreSQL server in CI: the store suite runs on both dialects",
  );
}

export interface Target {
  name: string;
  open(): Promise<{ db: Db; cleanup(): Promise<void> }>;
}

export const targets: Target[] = [
  {
    name: "sqlite",
    async open() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-store-"));
      const db = openDatabase(`sqlite:${path.join(dir, "s.sqlite")}`);
      return {
        db,
        async cleanup() {
          await db.close();
          fs.rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  },
];
if (pgUrl) {
  targets.push({
    name: "postgres",
    async open() {
      const schema = `store_${process.pid}_${Date.now()}`;
      const admin = openDatabase(pgUrl);
      await admin.kysely.schema.createSchema(schema).execute();
      await admin.close();
      const url = new URL(pgUrl);
      url.searchParams.set("options", `-c search_path=${schema}`);
      const db = openDatabase(url.toString());
      return {
        db,
        async cleanup() {
          await db.close();
          const a = openDatabase(pgUrl);
          await a.kysely.schema.dropSchema(schema).cascade().execute();
          await a.close();
        },
      };
    },
  });
} else {
  test("store suite on PostgreSQL", { skip: "BERTH_TEST_PG_URL is not set (CI sets it)" }, () => {});
}
