// docs/openapi.json is generated from the route schemas; a stale copy fails the suite.
import assert from "node:assert/strict";
import fs from "node:fs";
import { test } from "node:test";
import { generateOpenApi, OPENAPI_FILE } from "../scripts/openapi.ts";

test("docs/openapi.json matches the routes (run `npm run openapi` after changing a route)", async () => {
  const fresh = await generateOpenApi();
  const committed = fs.readFileSync(OPENAPI_FILE, "utf8");
  assert.ok(committed === fresh, "docs/openapi.json is stale: run `npm run openapi` and commit the result");
  const doc = JSON.parse(fresh);
  assert.ok(doc.paths["/api/infra/v1/provider/"], "lists the catalogue");
  assert.ok(doc.paths["/api/audit/v1/action/{uuid}/cancel/"], "lists the audit API");
});
