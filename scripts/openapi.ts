// Generates docs/openapi.json from the route schemas. `--write` updates the file; without it,
// exits 1 when the committed file is stale (the check CI runs through the test suite).
import fs from "node:fs";
import path from "node:path";
import { ActionEngine } from "../src/actions/engine.ts";
import { Relations } from "../src/actions/relations.ts";
import { buildApp } from "../src/api/app.ts";
import { Catalogue } from "../src/catalogue/catalogue.ts";
import { systemClock } from "../src/domain/time.ts";
import { IdentityService } from "../src/identity/service.ts";
import { openDatabase } from "../src/store/db.ts";
import { Store } from "../src/store/store.ts";

export const OPENAPI_FILE = path.resolve(import.meta.dirname, "../docs/openapi.json");

export async function generateOpenApi(): Promise<string> {
  const db = openDatabase("sqlite::memory:");
  const store = new Store(db.kysely, db.dialect);
  const actions = new ActionEngine({
    store,
    clock: systemClock,
    leaseMs: 1,
    stepTimeoutMs: 1,
    pollMs: 1,
    maxAttempts: 1,
  });
  const app = await buildApp({
    store,
    identity: new IdentityService(store, systemClock),
    actions,
    relations: new Relations(),
    catalogue: Catalogue.load(),
    publicUrl: "http://127.0.0.1:8000",
    logLevel: "silent",
  });
  await app.ready();
  const doc = app.swagger();
  await app.close();
  await db.close();
  return `${JSON.stringify(doc, null, 2)}\n`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const text = await generateOpenApi();
  if (process.argv.includes("--write")) {
    fs.mkdirSync(path.dirname(OPENAPI_FILE), { recursive: true });
    fs.writeFileSync(OPENAPI_FILE, text);
    process.stdout.write(`wrote ${OPENAPI_FILE}\n`);
  } else {
    const current = fs.existsSync(OPENAPI_FILE) ? fs.readFileSync(OPENAPI_FILE, "utf8") : "";
    if (current !== text) {
      process.stderr.write("docs/openapi.json is stale: run `npm run openapi`\n");
      process.exit(1);
    }
  }
}
