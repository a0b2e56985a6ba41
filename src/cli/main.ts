// The `berth` command line: one commander program, one file per noun under commands/. It talks to
// a Berth server over HTTP and WebSocket only (see client.ts); credentials come from the config
// file `berth login` writes and from BERTH_* / DOCKERCLOUD_* variables (config.ts).
import { Command, CommanderError } from "commander";
import { separateCommandWords } from "./command-words.ts";
import { registerAccount } from "./commands/account.ts";
import { registerAction } from "./commands/action.ts";
import { registerAdmin } from "./commands/admin.ts";
import { registerAgent, runAgent } from "./commands/agent.ts";
import { registerAlert } from "./commands/alert.ts";
import { registerCompletion } from "./commands/completion.ts";
import { registerContainer } from "./commands/container.ts";
import { registerInfra } from "./commands/infra.ts";
import { registerNamespace } from "./commands/namespace.ts";
import { registerRepo } from "./commands/repo.ts";
import { registerService } from "./commands/service.ts";
import { registerStack } from "./commands/stack.ts";
import { registerTag, registerTrigger } from "./commands/trigger.ts";
import { registerUser } from "./commands/user.ts";
import { registerControlBackup, registerVolumeBackup } from "./commands/volume-backup.ts";
import { contextOf } from "./context.ts";
import { CliError, EXIT } from "./errors.ts";

// Kept equal to packages/cli/package.json (test/cli/package.test.ts checks it).
export const VERSION = "0.2.0";

export function buildProgram(): Command {
  const program = new Command("berth")
    .description("Berth's command line: nodes, services, stacks and actions on a Berth server")
    .version(VERSION, "--version")
    .option("--namespace <namespace>", "act in this namespace (a user or an organization)")
    .option("--json", "print the API's JSON instead of tables")
    .option("--no-color", "no colours (also: NO_COLOR, or when output is not a terminal)")
    .showSuggestionAfterError()
    .exitOverride();
  program.addHelpText(
    "after",
    `
Environment: BERTH_URL, BERTH_USER, BERTH_APIKEY (or DOCKERCLOUD_REST_HOST, DOCKERCLOUD_USER,
DOCKERCLOUD_APIKEY) override the config file written by berth login (BERTH_CONFIG moves it).
Exit codes: 0 done, 1 refused or failed (an action that ended Failed or Canceled with --sync),
2 usage error, 130 interrupted; exec passes on the command's own exit code.`,
  );
  const ctx = (cmd: Command) => contextOf(cmd);
  registerAccount(program, ctx);
  registerNamespace(program, ctx);
  registerUser(program, ctx);
  registerService(program, ctx);
  registerContainer(program, ctx);
  registerStack(program, ctx);
  registerInfra(program, ctx);
  registerRepo(program, ctx);
  registerTrigger(program, ctx);
  registerVolumeBackup(program, ctx);
  registerControlBackup(program, ctx);
  registerTag(program, ctx);
  registerAction(program, ctx);
  registerAlert(program, ctx);
  registerAgent(program);
  registerAdmin(program);
  registerCompletion(program);
  return program;
}

/** Applies exitOverride to every command, so usage errors reach main's handler. */
function overrideExits(cmd: Command): void {
  cmd.exitOverride();
  for (const sub of cmd.commands) overrideExits(sub);
}

export async function main(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  overrideExits(program);
  try {
    // The agent parses its own arguments (berth's global options mean nothing to it).
    if (argv[0] === "agent") return await runAgent(argv.slice(1));
    await program.parseAsync(separateCommandWords(program, argv), { from: "user" });
    return typeof process.exitCode === "number" ? process.exitCode : 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and --version end with 0; every other parse error is a usage error.
      return err.exitCode === 0 ? 0 : EXIT.usage;
    }
    if (err instanceof CliError) {
      process.stderr.write(`berth: ${err.message}\n`);
      return err.exitCode;
    }
    process.stderr.write(`berth: ${(err as Error).stack ?? String(err)}\n`);
    return EXIT.failure;
  }
}

const code = await main(process.argv.slice(2));
// Exits as soon as the command is done, even if a stream it opened is still closing; output
// written to a pipe or file is already out (synchronous there), a terminal gets its last bytes.
if (process.stdout.writableLength > 0) process.stdout.once("drain", () => process.exit(code));
else process.exit(code);
