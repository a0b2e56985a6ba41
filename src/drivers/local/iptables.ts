// iptables rules added by the provider, and which backend (nf_tables or legacy) to use.
//
// Docker 20.10 runs whatever `iptables` is first on its PATH, so our rules inside a node go
// through the same binary. On the host both backends can be live at once (the kernel runs
// both rule sets, and a DROP in either one drops), so host rules go to every live backend.
import { existsSync, mkdirSync, readFileSync, symlinkSync, unlinkSync } from "node:fs";
import path from "node:path";
import { type CommandRunner, formatCommand } from "./commands.ts";
import { findExecutable } from "./host-tools.ts";

export interface IptablesRule {
  /** Absolute path of the iptables binary that holds the rule. */
  binary: string;
  /** Network namespace name under /run/netns, or absent for the host. */
  netns?: string;
  table: "filter";
  chain: string;
  spec: string[];
}

export interface IptablesSetup {
  /** The binary dockerd and node rules use. */
  nodeBinary: string;
  /** Binaries whose rule sets are live on the host. */
  hostBinaries: string[];
  /** Prepended to dockerd's PATH when `iptables` itself does not work but the legacy one does. */
  pathPrefix?: string;
  description: string;
}

const SHIMMED = [
  "iptables",
  "iptables-save",
  "iptables-restore",
  "ip6tables",
  "ip6tables-save",
  "ip6tables-restore",
];

async function works(commands: CommandRunner, binary: string): Promise<boolean> {
  const result = await commands.run({ file: binary, args: ["-w", "-t", "filter", "-S", "FORWARD"] });
  return result.exitCode === 0;
}

function legacyTablesLive(): boolean {
  // Listing legacy tables through iptables-legacy would load the module and create them;
  // this file only lists tables that are already in use.
  try {
    return readFileSync("/proc/net/ip_tables_names", "utf8").split("\n").includes("filter");
  } catch {
    return false;
  }
}

export async function detectIptables(options: {
  commands: CommandRunner;
  iptables: string;
  shimDir: string;
}): Promise<IptablesSetup> {
  const { commands, iptables } = options;
  const version = (await commands.run({ file: iptables, args: ["--version"] })).stdout.trim();
  const primaryIsNft = version.includes("nf_tables");
  const legacy = findExecutable("iptables-legacy");
  if (await works(commands, iptables)) {
    const hostBinaries = [iptables];
    if (primaryIsNft && legacy && legacyTablesLive()) hostBinaries.push(legacy);
    return { nodeBinary: iptables, hostBinaries, description: version };
  }
  if (primaryIsNft && legacy && (await works(commands, legacy))) {
    // nf_tables is unavailable in this kernel: point dockerd's `iptables` at the legacy tools.
    mkdirSync(options.shimDir, { recursive: true, mode: 0o700 });
    for (const name of SHIMMED) {
      const target = findExecutable(name.replace("tables", "tables-legacy"));
      const link = path.join(options.shimDir, name);
      if (!target) continue;
      if (existsSync(link)) unlinkSync(link);
      symlinkSync(target, link);
    }
    return {
      nodeBinary: legacy,
      hostBinaries: [legacy],
      pathPrefix: options.shimDir,
      description: `${version} does not work here; using iptables-legacy`,
    };
  }
  throw new Error(`iptables does not work here (${version || iptables})`);
}

function argv(nsenter: string, rule: IptablesRule, op: "-C" | "-I" | "-D"): { file: string; args: string[] } {
  const iptablesArgs = ["-w", "-t", rule.table, op, rule.chain, ...(op === "-I" ? ["1"] : []), ...rule.spec];
  if (!rule.netns) return { file: rule.binary, args: iptablesArgs };
  return { file: nsenter, args: [`--net=/run/netns/${rule.netns}`, rule.binary, ...iptablesArgs] };
}

/** Inserts the rule at the top of its chain unless it is already there. */
export async function ensureRule(options: {
  commands: CommandRunner;
  nsenter: string;
  rule: IptablesRule;
  log: (line: string) => void;
}): Promise<void> {
  const { commands, nsenter, rule } = options;
  const check = argv(nsenter, rule, "-C");
  if ((await commands.run(check)).exitCode === 0) return;
  const insert = argv(nsenter, rule, "-I");
  options.log(`$ ${formatCommand(insert.file, insert.args)}`);
  const result = await commands.run(insert);
  if (result.exitCode !== 0) throw new Error(`iptables insert failed: ${result.stderr.trim()}`);
}

/** Deletes every copy of the rule; a rule or chain that is already gone is fine. */
export async function deleteRule(options: {
  commands: CommandRunner;
  nsenter: string;
  rule: IptablesRule;
  log: (line: string) => void;
}): Promise<void> {
  const { commands, nsenter, rule } = options;
  for (let copy = 0; copy < 10; copy++) {
    if ((await commands.run(argv(nsenter, rule, "-C"))).exitCode !== 0) return;
    const del = argv(nsenter, rule, "-D");
    options.log(`$ ${formatCommand(del.file, del.args)}`);
    await commands.run(del);
  }
}
