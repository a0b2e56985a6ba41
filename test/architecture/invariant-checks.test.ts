// ARCHITECTURE.md names, for each invariant, the test or check that holds it. A name that points
// nowhere (a test renamed, moved or deleted) leaves an invariant unguarded while the map still
// claims a guard: every `test/…` and `src/…` path the map and its long form name must exist, and
// each invariant line of the map must name at least one.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";

const ROOT = path.resolve(import.meta.dirname, "../..");
const DOCS = ["ARCHITECTURE.md", "docs/architecture-details.md"];

function namedPaths(text: string): string[] {
  return [...text.matchAll(/`((?:test|src|bench|web\/src)\/[^`\s]+)`/g)].map((m) => m[1]!);
}

test("every test and source path the architecture documents name exists", () => {
  const missing: string[] = [];
  for (const doc of DOCS) {
    for (const p of namedPaths(fs.readFileSync(path.join(ROOT, doc), "utf8"))) {
      if (!fs.existsSync(path.join(ROOT, p))) missing.push(`${doc}: ${p}`);
    }
  }
  assert.deepEqual(missing, [], `named but not found:\n${missing.join("\n")}`);
});

test("every invariant in ARCHITECTURE.md names the test or check that holds it", () => {
  const text = fs.readFileSync(path.join(ROOT, "ARCHITECTURE.md"), "utf8");
  const section = text.slice(text.indexOf("## Invariants"), text.indexOf("## Boundaries"));
  const unguarded = section
    .split("\n")
    .filter((line) => line.startsWith("- "))
    .filter((line) => !namedPaths(line).some((p) => p.startsWith("test/") || p.startsWith("src/")));
  assert.deepEqual(unguarded, [], "invariants without a named test");
});
