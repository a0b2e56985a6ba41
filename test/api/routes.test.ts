// Contract-first routes (issue 17): every route declares who may call it and the schemas of what
// it reads, and handlers read those typed values without casts.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import Fastify from "fastify";
import { Type } from "typebox";
import { requireDeclarations } from "../../src/api/access.ts";

const ROOT = path.resolve(import.meta.dirname, "../..");

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(p) : p.endsWith(".ts") ? [p] : [];
  });
}

describe("route declarations", () => {
  // Every app the tests build (test/support/harness.ts, scripts/openapi.ts) installs the same rule,
  // so a platform route that leaves a declaration out fails every test that starts Berth.
  test("a route without an access declaration, a params or a response schema cannot be registered", async () => {
    const app = Fastify();
    requireDeclarations(app);
    assert.throws(
      () => app.get("/api/app/v1/gadget/:id/", async () => ({})),
      /GET \/api\/app\/v1\/gadget\/:id\/ must declare config\.access and schema\.params and schema\.response/,
    );
    app.get(
      "/api/app/v1/gadget/:id/",
      {
        config: { access: "caller" },
        schema: {
          params: Type.Object({ id: Type.String() }),
          response: { 200: Type.Object({ ok: Type.Boolean() }) },
        },
      },
      async () => ({ ok: true }),
    );
    const res = await app.inject({ method: "GET", url: "/api/app/v1/gadget/7/" });
    assert.equal(res.statusCode, 200);
    await app.close();
  });

  test("handlers read typed params, query and body: no cast of a request part in src/api/routes", () => {
    const casts = sourceFiles(path.join(ROOT, "src/api/routes")).flatMap((file) =>
      fs
        .readFileSync(file, "utf8")
        .split("\n")
        .flatMap((line, i) =>
          /\breq(uest)?\.(body|query|params)\b[^;]*?\)?\s+as\s/.test(line)
            ? [`${path.relative(ROOT, file)}:${i + 1}: ${line.trim()}`]
            : [],
        ),
    );
    assert.deepEqual(casts, []);
  });
});
