// The agent as one plain .mjs file (esbuild bundles src/agent and the packages it uses) that runs
// on Node 20 with nothing else installed. Berth serves it (GET /api/agent/v1/berth-agent.mjs) so
// that a server needs only Node to become a node; `npm run build:agent <outfile>` writes it too.
import { chmod, mkdir, rename, stat } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ESM_BANNER } from "../../scripts/esm-banner.mjs";

const ENTRY = path.join(path.dirname(fileURLToPath(import.meta.url)), "cli.ts");

/** Writes the bundle to `outfile` (under a temporary name, then renamed into place). */
export async function buildAgentBundle(outfile: string): Promise<string> {
  const { build } = await import("esbuild");
  const tmp = `${outfile}.${process.pid}.tmp`;
  await mkdir(path.dirname(outfile), { recursive: true });
  await build({
    entryPoints: [ENTRY],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outfile: tmp,
    logLevel: "error",
    legalComments: "none",
    // Optional native speed-ups of ws and ssh2 (dockerode's); both run without them.
    external: ["bufferutil", "utf-8-validate", "cpu-features"],
    banner: { js: ESM_BANNER },
  });
  await chmod(tmp, 0o755);
  await rename(tmp, outfile);
  return outfile;
}

/** The bundle at `outfile`, built once per process (a server serves the same file until restarted). */
export class AgentBundle {
  private built: Promise<string> | undefined;

  constructor(private readonly outfile: string) {}

  file(): Promise<string> {
    this.built ??= buildAgentBundle(this.outfile).catch((err: unknown) => {
      this.built = undefined;
      throw err;
    });
    return this.built;
  }

  async size(): Promise<number> {
    return (await stat(await this.file())).size;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = process.argv[2];
  if (!out) {
    process.stderr.write("usage: npm run build:agent <outfile>\n");
    process.exit(2);
  }
  process.stdout.write(`${await buildAgentBundle(path.resolve(out))}\n`);
}
