// Stored JSON is decoded in one module (src/store/codec.ts): one named decoder per JSON column,
// which checks the shape, and no `JSON.parse` of a stored column anywhere else in src/.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import {
  decodeLimits,
  decodePrivileges,
  linkHostsOf,
  paramsOf,
  parentsOf,
  providerOptionsOf,
  StoredJsonError,
  specLinks,
  specOf,
} from "../../src/store/codec.ts";

const ROOT = path.resolve(import.meta.dirname, "../..");

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(p) : /\.tsx?$/.test(p) ? [p] : [];
  });
}

/** The JSON columns of src/store/schema.ts (a JSON text column read as a value). */
const JSON_COLUMNS = [
  "spec",
  "ports",
  "environment",
  "link_hosts",
  "parents",
  "tags",
  "provider_options",
  "params",
  "engine_tls",
  "credentials",
  "privileges",
  "limits",
  "archives",
];

/** `file:line  text` of each line of `files` that matches `pattern`. */
function matches(files: readonly string[], pattern: RegExp): string[] {
  return files.flatMap((f) =>
    fs
      .readFileSync(f, "utf8")
      .split("\n")
      .flatMap((line, i) =>
        pattern.test(line) ? [`${path.relative(ROOT, f)}:${i + 1}  ${line.trim()}`] : [],
      ),
  );
}

describe("stored JSON is decoded in one module", () => {
  test("no module of src/store/ but codec.ts parses JSON", () => {
    const store = sourceFiles(path.join(ROOT, "src/store")).filter((f) => path.basename(f) !== "codec.ts");
    assert.deepEqual(matches(store, /JSON\.parse\(/), []);
  });

  test("no module of src/ parses a stored JSON column itself", () => {
    const column = new RegExp(`JSON\\.parse\\([^;]*\\.(${JSON_COLUMNS.join("|")})\\b`);
    const src = sourceFiles(path.join(ROOT, "src")).filter((f) => path.basename(f) !== "codec.ts");
    assert.deepEqual(matches(src, column), []);
  });

  test("a column that does not hold the shape Berth writes fails naming the column", () => {
    assert.throws(() => specOf({ spec: "[]" }), StoredJsonError);
    assert.throws(() => specOf({ spec: "[]" }), /stored spec is not a JSON object/);
    assert.throws(() => parentsOf({ parents: "{}" }), /stored parents is not a JSON array/);
  });

  test("decoders read what the store writes", () => {
    assert.equal(specOf({ spec: JSON.stringify({ image_name: "nginx" }) }).image_name, "nginx");
    assert.deepEqual(
      specLinks("a", JSON.stringify({ linked_to_service: [{ to_service: "b", name: "db" }] })),
      [{ from_uuid: "a", to_uuid: "b", name: "db", position: 0 }],
    );
    assert.deepEqual(linkHostsOf({ link_hosts: null }), []);
    assert.deepEqual(linkHostsOf({ link_hosts: '["10.0.0.2 db"]' }), ["10.0.0.2 db"]);
    assert.equal(providerOptionsOf({ provider_options: null }), null);
    // Settings and parameters a person wrote read as empty (or as no parameters) when unreadable.
    assert.equal(paramsOf({ params: null }), null);
    assert.equal(paramsOf({ params: "not json" }), undefined);
    assert.deepEqual(decodePrivileges("[1]"), {});
    assert.deepEqual(decodeLimits('{"services": 3, "bogus": 1, "nodes": -1}'), { services: 3 });
  });
});
