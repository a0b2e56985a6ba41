// `npm run admin -- backup <file>` / `npm run admin -- restore <file>`, run where Berth runs, with
// its BERTH_* settings: the control plane's backup and restore (backup.ts). This is not part of the
// bundled `berth` CLI, which talks HTTP only and carries no native database driver.
import { ConfigError, loadConfig } from "../config/index.ts";
import { BackupError, backupControlPlane, restoreControlPlane } from "./backup.ts";

const [command, file] = process.argv.slice(2);
if ((command !== "backup" && command !== "restore") || !file) {
  process.stderr.write("usage: npm run admin -- backup <file> | restore <file>\n");
  process.exit(2);
}
try {
  const config = loadConfig();
  const header =
    command === "backup"
      ? await backupControlPlane({ config, file })
      : await restoreControlPlane({ config, file });
  process.stdout.write(
    `${command === "backup" ? "backed up to" : "restored from"} ${file} (${header.dialect} database, backup made ${header.createdAt})\n`,
  );
} catch (err) {
  if (err instanceof ConfigError || err instanceof BackupError) {
    process.stderr.write(`berth admin: ${err.message}\n`);
    process.exit(1);
  }
  throw err;
}
