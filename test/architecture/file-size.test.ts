// One job per module (issue 28): no file in src/ or web/src/ is over 500 lines unless the comment
// at its top says why, in a sentence that starts with "Long because". A file that grows past the
// limit fails here until it is split or its reason is written down.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";

const ROOT = path.resolve(import.meta.dirname, "../..");
const MAX_LINES = 500;
const MARKER = "Long because";

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) return sourceFiles(rel);
    return /\.tsx?$/.test(e.name) ? [rel] : [];
  });
}

/** Lines as `wc -l` counts them. */
function lineCount(text: string): number {
  return text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
}

/** The comment lines a file opens with (`//` lines, or one block comment), as one text. */
function openingComment(text: string): string {
  const lines = text.split("\n");
  if (lines[0]?.trimStart().startsWith("/*")) {
    const end = lines.findIndex((line) => line.includes("*/"));
    return lines.slice(0, end + 1).join(" ");
  }
  const first = lines.findIndex((line) => !line.startsWith("//"));
  return lines
    .slice(0, first === -1 ? lines.length : first)
    .map((line) => line.replace(/^\/\/\s?/, ""))
    .join(" ");
}

const files = [...sourceFiles("src"), ...sourceFiles("web/src")].map((file) => {
  const text = fs.readFileSync(path.join(ROOT, file), "utf8");
  return { file, lines: lineCount(text), comment: openingComment(text) };
});
const long = files.filter((f) => f.lines > MAX_LINES);

test(`every file in src/ and web/src/ over ${MAX_LINES} lines says at its top why ("${MARKER} …")`, () => {
  const unexplained = long
    .filter((f) => !f.comment.includes(MARKER))
    .map((f) => `${f.file} (${f.lines} lines)`);
  assert.deepEqual(unexplained, [], `split these files, or say at their top why they are long`);
});

test("the opening comment is read as the file's first comment lines, not any comment", () => {
  assert.match(openingComment("// A module.\n// Long because history.\nimport x;\n"), /Long because/);
  assert.doesNotMatch(openingComment("// A module.\nimport x;\n// Long because history.\n"), /Long because/);
  assert.match(openingComment("/**\n * Long because history.\n */\nimport x;\n"), /Long because/);
  assert.equal(lineCount("a\nb\n"), 2);
});
