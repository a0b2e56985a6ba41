// Parts of berth that need more than HTTP live in files of their own beside the bundle and are
// loaded only by their commands: `agent.mjs` (the Berth agent, with its Docker client) and
// `admin.mjs` (backup and restore, with the database drivers, which stay outside every bundle).
// Every other command loads neither, so it needs no native module. From the TypeScript sources
// (bin/berth.mjs without a bundle) they are the agent's and ops' own modules.
import { CliError } from "./errors.ts";

const PARTS = {
  agent: { bundle: "./agent.mjs", source: "../agent/main.ts" },
  admin: { bundle: "./admin.mjs", source: "../ops/admin.ts" },
} as const;

export type Part = keyof typeof PARTS;

/** The database drivers admin.mjs imports (external to the bundle: one is native). */
const DRIVERS = ["better-sqlite3", "pg"];

export async function loadPart<T>(part: Part, here: string = import.meta.url): Promise<T> {
  const { bundle, source } = PARTS[part];
  const url = new URL(here.endsWith(".ts") ? source : bundle, here);
  try {
    return (await import(url.href)) as T;
  } catch (err) {
    const message = (err as Error).message;
    const code = (err as { code?: string }).code;
    const driver = DRIVERS.find((d) => message.includes(`'${d}'`));
    if (code === "ERR_MODULE_NOT_FOUND" && driver)
      throw new CliError(
        `berth ${part} needs the database driver ${driver}, which is not installed here: ` +
          `install it beside berth (npm install -g ${DRIVERS.join(" ")}), or run npm run admin in Berth's checkout`,
      );
    if (code === "ERR_MODULE_NOT_FOUND" && message.includes(url.pathname))
      throw new CliError(`berth ${part} is not part of this installation (${url.pathname} is missing)`);
    throw err;
  }
}
