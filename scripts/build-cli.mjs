#!/usr/bin/env node
// Bundles the `berth` CLI into plain .mjs files that run on Node 20 with nothing else installed:
//   berth.mjs  the command line (src/cli/main.ts and the packages it uses): HTTP and WebSocket only
//   agent.mjs  the Berth agent (src/agent/main.ts, with its Docker client), loaded by `berth agent`
//   admin.mjs  backup and restore (src/ops/admin.ts), loaded by `berth admin`; the database drivers
//              (better-sqlite3 is native) stay outside it, resolved where berth is installed
// `npm pack` in packages/cli runs it (prepack), and bin/berth.mjs rebuilds its own copy under
// .tmp/cli/ when a source changed, so the CLI runs the same way from a checkout as from the package.
//   node scripts/build-cli.mjs <outfile>   (the other two files go beside it)
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ESM_BANNER } from "./esm-banner.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const ENTRIES = {
  berth: "src/cli/main.ts",
  agent: "src/agent/main.ts",
  admin: "src/ops/admin.ts",
};

/**
 * Bundles the CLI into `outfile` and its parts beside it (each written under a temporary name,
 * then renamed into place); returns the source files it read.
 */
export async function buildCli(outfile) {
  const { build } = await import("esbuild");
  const dir = path.dirname(outfile);
  fs.mkdirSync(dir, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(dir, `.build-${process.pid}-`));
  try {
    const result = await build({
      entryPoints: Object.fromEntries(Object.entries(ENTRIES).map(([k, v]) => [k, path.join(root, v)])),
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      outdir: tmp,
      outExtension: { ".js": ".mjs" },
      logLevel: "error",
      legalComments: "none",
      metafile: true,
      external: [
        // Optional native speed-ups of ws and ssh2 (dockerode's); both run without them.
        "bufferutil",
        "utf-8-validate",
        "cpu-features",
        // The database drivers of `berth admin`, resolved where berth runs (better-sqlite3 is native).
        "better-sqlite3",
        "pg",
      ],
      banner: { js: ESM_BANNER },
    });
    for (const name of Object.keys(ENTRIES)) {
      const target = name === "berth" ? outfile : path.join(dir, `${name}.mjs`);
      fs.chmodSync(path.join(tmp, `${name}.mjs`), 0o755);
      fs.renameSync(path.join(tmp, `${name}.mjs`), target);
    }
    return Object.keys(result.metafile.inputs).map((p) => path.resolve(p));
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** The checkout's own bundle, rebuilt when a source it read is newer; undefined when it cannot be built. */
export async function ensureCliBundle() {
  const outfile = path.join(root, ".tmp/cli/berth.mjs");
  const inputsFile = path.join(root, ".tmp/cli/inputs.json");
  try {
    const built = Math.min(
      ...["berth", "agent", "admin"].map((n) => {
        const f = path.join(root, ".tmp/cli", `${n}.mjs`);
        return fs.existsSync(f) ? fs.statSync(f).mtimeMs : 0;
      }),
    );
    const inputs = fs.existsSync(inputsFile) ? JSON.parse(fs.readFileSync(inputsFile, "utf8")) : [];
    const fresh =
      built > 0 &&
      inputs.length > 0 &&
      inputs.every((p) => fs.existsSync(p) && fs.statSync(p).mtimeMs <= built) &&
      fs.statSync(fileURLToPath(import.meta.url)).mtimeMs <= built;
    if (fresh) return outfile;
    const read = await buildCli(outfile);
    const partial = `${inputsFile}.${process.pid}.tmp`;
    fs.writeFileSync(partial, JSON.stringify(read));
    fs.renameSync(partial, inputsFile);
    return outfile;
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
