// Builds the dashboard into static files: esbuild bundles web/src (Preact, TypeScript JSX, CSS)
// into content-hashed files under <outDir>/assets, writes index.html, and precompresses every
// file with brotli and gzip so the server sends them as they are. `npm start` runs this first
// (prestart); tests call buildDashboard() themselves.
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import * as esbuild from "esbuild";

const here = import.meta.dirname;
export const DEFAULT_WEB_DIR = path.join(here, "dist");

export interface BuildResult {
  outDir: string;
  files: { name: string; bytes: number; brotliBytes: number; gzipBytes: number }[];
}

function html(js: string, css: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Berth</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/assets/${css}">
<script type="module" src="/assets/${js}"></script>
</head>
<body><div id="app"></div><noscript>The Berth dashboard needs JavaScript.</noscript></body>
</html>
`;
}

/** Builds into a fresh folder next to `outDir`, then swaps it in (a running server keeps its copy). */
export async function buildDashboard(outDir = DEFAULT_WEB_DIR): Promise<BuildResult> {
  const staging = `${outDir}.staging-${process.pid}`;
  fs.rmSync(staging, { recursive: true, force: true });
  const result = await esbuild.build({
    entryPoints: { app: path.join(here, "src/main.tsx") },
    outdir: path.join(staging, "assets"),
    bundle: true,
    format: "esm",
    splitting: true,
    entryNames: "[name]-[hash]",
    chunkNames: "chunk-[hash]",
    assetNames: "[name]-[hash]",
    target: "es2022",
    jsx: "automatic",
    jsxImportSource: "preact",
    minify: true,
    legalComments: "none",
    metafile: true,
    logLevel: "silent",
    tsconfig: path.join(here, "tsconfig.json"),
  });
  const outputs = Object.entries(result.metafile.outputs);
  const entry = outputs.find(([, o]) => o.entryPoint?.endsWith("main.tsx"));
  if (!entry?.[1].cssBundle) throw new Error("dashboard build: no entry script or stylesheet");
  const js = path.basename(entry[0]);
  const css = path.basename(entry[1].cssBundle);
  fs.writeFileSync(path.join(staging, "index.html"), html(js, css));
  const files: BuildResult["files"] = [];
  for (const name of fs.readdirSync(staging, { recursive: true }) as string[]) {
    const full = path.join(staging, name);
    if (!fs.statSync(full).isFile()) continue;
    const data = fs.readFileSync(full);
    const br = zlib.brotliCompressSync(data, {
      params: {
        [zlib.constants.BROTLI_PARAM_QUALITY]: 11,
        [zlib.constants.BROTLI_PARAM_SIZE_HINT]: data.length,
      },
    });
    const gz = zlib.gzipSync(data, { level: 9 });
    fs.writeFileSync(`${full}.br`, br);
    fs.writeFileSync(`${full}.gz`, gz);
    files.push({ name, bytes: data.length, brotliBytes: br.length, gzipBytes: gz.length });
  }
  const old = `${outDir}.old-${process.pid}`;
  if (fs.existsSync(outDir)) fs.renameSync(outDir, old);
  fs.renameSync(staging, outDir);
  fs.rmSync(old, { recursive: true, force: true });
  return { outDir, files };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const started = Date.now();
  const { outDir, files } = await buildDashboard(process.argv[2] ? path.resolve(process.argv[2]) : undefined);
  const total = files.reduce((n, f) => n + f.brotliBytes, 0);
  process.stdout.write(
    `dashboard built in ${Date.now() - started} ms: ${files.length} files in ${path.relative(process.cwd(), outDir) || outDir}, ${Math.round(total / 1024)} KiB with brotli\n`,
  );
}
