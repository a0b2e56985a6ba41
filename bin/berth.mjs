#!/usr/bin/env node
// The `berth` command line from a checkout: runs the CLI bundle (rebuilt by esbuild when a source
// under src/cli changed), or the TypeScript sources through tsx when it cannot be built.
import { pathToFileURL } from "node:url";
import { ensureCliBundle } from "../scripts/build-cli.mjs";

const bundle = await ensureCliBundle();
if (bundle) {
  await import(pathToFileURL(bundle).href);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("../src/cli/main.ts");
}
