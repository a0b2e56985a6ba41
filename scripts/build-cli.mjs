#!/usr/bin/env node
// Bundles the `berth` CLI (src/cli/main.ts and the packages it uses) into one plain .mjs file that
// runs on Node 20 with nothing else installed. `npm pack` in packages/cli runs it (prepack), and
// bin/berth.mjs rebuilds its own copy under .tmp/cli/ when the sources changed, so the CLI runs
// the same way from a checkout as from the package.
//   node scripts/build-cli.mjs <outfile>
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const SOURCES = path.join(root, "src/cli");

/** Bundles the CLI into `outfile` (written under a temporary name, then renamed into place). */
export async function buildCli(outfile) {
  const { build } = await import("esbuild");
  const tmp = `${outfile}.${process.pid}.tmp`;
  fs.mkdirSync(path.dirname(outfile), { recursive: true });
  await build({
    entryPoints: [path.join(SOURCES, "main.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outfile: tmp,
    logLevel: "error",
    legalComments: "none",
    // ws loads these native speed-ups when present and goes on without them.
    external: ["bufferutil", "utf-8-validate"],
    // Bundled CommonJS packages call require(); an ES module has none of its own.
    banner: {
      js: '#!/usr/bin/env node\nimport { createRequire as __berthRequire } from "node:module";\nconst require = __berthRequire(import.meta.url);',
    },
  });
  fs.chmodSync(tmp, 0o755);
  fs.renameSync(tmp, outfile);
  return outfile;
}

function newestMtimeMs(dir) {
  let newest = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestMtimeMs(p) : fs.statSync(p).mtimeMs);
  }
  return newest;
}

/** The checkout's own bundle, rebuilt when a source is newer; undefined when it cannot be built. */
export async function ensureCliBundle() {
  const outfile = path.join(root, ".tmp/cli/berth.mjs");
  try {
    const built = fs.existsSync(outfile) ? fs.statSync(outfile).mtimeMs : 0;
    if (built >= newestMtimeMs(SOURCES)) return outfile;
    return await buildCli(outfile);
  } catch {
    return undefined;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = process.argv[2];
  if (!out) {
    process.stderr.write("usage: node scripts/build-cli.mjs <outfile>\n");
    process.exit(2);
  }
  await buildCli(path.resolve(out));
}
