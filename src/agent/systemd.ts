// The systemd unit the agent can install (`--install-systemd`): it runs the agent from the same
// script with the same settings, without the token (the identity file holds the node key).
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";

export const UNIT_NAME = "berth-agent.service";
/** Exit status for a refused identity (wrong key): restarting would not help. */
export const EXIT_REFUSED = 78;

/** Quotes one ExecStart argument for systemd (double quotes, backslash escapes). */
function quote(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `"${arg.replace(/(["\\$])/g, "\\$1").replace(/%/g, "%%")}"`;
}

export function unitText(opts: { node: string; script: string; args: string[] }): string {
  const exec = [opts.node, opts.script, ...opts.args].map(quote).join(" ");
  return `[Unit]
Description=Berth agent: keeps this host's Docker engine reachable by Berth through a reverse tunnel
After=network-online.target docker.service
Wants=network-online.target

[Service]
ExecStart=${exec}
Restart=on-failure
RestartSec=5
# A refused node key or a terminated node: restarting would not help.
RestartPreventExitStatus=${EXIT_REFUSED}
NoNewPrivileges=true

[Install]
WantedBy=multi-user.target
`;
}

export async function installUnit(opts: {
  unitDir: string;
  node: string;
  script: string;
  args: string[];
  log(line: string): void;
}): Promise<{ started: boolean; file: string }> {
  await mkdir(opts.unitDir, { recursive: true });
  const file = path.join(opts.unitDir, UNIT_NAME);
  await writeFile(file, unitText(opts), { mode: 0o644 });
  opts.log(`wrote ${file}`);
  const systemctl = ["/usr/bin/systemctl", "/bin/systemctl"].find((p) => existsSync(p));
  if (!systemctl || !existsSync("/run/systemd/system")) {
    opts.log("systemd is not running here: start the agent yourself (it keeps running in this terminal)");
    return { started: false, file };
  }
  const run = promisify(execFile);
  await run(systemctl, ["daemon-reload"]);
  await run(systemctl, ["enable", "--now", UNIT_NAME]);
  opts.log(`enabled and started ${UNIT_NAME}`);
  return { started: true, file };
}
