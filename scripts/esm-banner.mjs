// The first lines of every esbuild bundle Berth writes as an ES module (the berth CLI and its
// parts, scripts/build-cli.mjs; the agent Berth serves, src/agent/bundle.ts): bundled CommonJS
// packages call require() and read __dirname, and an ES module has neither.
export const ESM_BANNER = [
  "#!/usr/bin/env node",
  'import { createRequire as __berthRequire } from "node:module";',
  'import { fileURLToPath as __berthPath } from "node:url";',
  'import { dirname as __berthDir } from "node:path";',
  "const require = __berthRequire(import.meta.url);",
  "const __filename = __berthPath(import.meta.url);",
  "const __dirname = __berthDir(__filename);",
].join("\n");
