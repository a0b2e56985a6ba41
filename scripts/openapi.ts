// Generates docs/openapi.json from the route schemas. `--write` updates the file; without it,
// exits 1 when the committed file is stale (the check CI runs through the test suite).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadConfig } from "../src/config/index.ts";
import { assemblePlatform } from "../src/platform.ts";

export const OPENAPI_FILE = path.resolve(import.meta.dirname, "../docs/openapi.json");

export async function generateOpenApi(): Promise<string> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-openapi-"));
  const platform = await assemblePlatform(
    loadConfig({ BERTH_DATA_DIR: dataDir, BERTH_DATABASE_URL: "sqlite::memory:", BERTH_LOG_LEVEL: "silent" }),
  );
  await platform.app.ready();
  const doc = platform.app.swagger();
  await platform.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
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
