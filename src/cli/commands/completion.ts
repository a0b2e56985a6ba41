// `berth completion bash|zsh`: a completion script generated from the command tree, so it never
// lists a command or option that does not exist. zsh loads the same function through bashcompinit.
import type { Command } from "commander";
import { usageError } from "../errors.ts";

/** Commands that parse their own arguments (berth's global options mean nothing to them). */
export const ownArguments = new WeakSet<Command>();

/** Every command path ("service env add") with its subcommands and options. */
export function commandTable(program: Command): Map<string, { subcommands: string[]; options: string[] }> {
  const table = new Map<string, { subcommands: string[]; options: string[] }>();
  const globals = program.options
    .filter((o) => o.long !== "--version")
    .flatMap((o) => [o.long, o.short].filter((x): x is string => !!x));
  const walk = (cmd: Command, path: string) => {
    const subs = cmd.commands.filter((c) => c.name() !== "help");
    const options = [
      ...(cmd === program ? ["--version"] : []),
      ...cmd.options.flatMap((o) => [o.long, o.short].filter((x): x is string => !!x)),
      ...(ownArguments.has(cmd) ? [] : globals),
      "--help",
    ];
    table.set(path, {
      subcommands: subs.flatMap((c) => [c.name(), ...c.aliases()]),
      options: [...new Set(options)],
    });
    for (const sub of subs)
      for (const name of [sub.name(), ...sub.aliases()]) walk(sub, path ? `${path} ${name}` : name);
  };
  walk(program, "");
  return table;
}

export function completionScript(program: Command, shell: string): string {
  const table = commandTable(program);
  const cases = [...table.entries()]
    .map(
      ([path, { subcommands, options }]) =>
        `    "${path}") words="${[...subcommands, ...options].join(" ")}" ;;`,
    )
    .join("\n");
  const fn = `_berth() {
  local cur path word i words
  cur="\${COMP_WORDS[COMP_CWORD]}"
  path=""
  # The command path: the words before the cursor that name commands (options and values skipped).
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[i]}"
    case "$word" in -*) continue ;; esac
    if _berth_has "\${path:+$path }$word"; then path="\${path:+$path }$word"; fi
  done
  case "$path" in
${cases}
    *) words="" ;;
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
_berth_has() {
  case "$1" in
${[...table.keys()].map((p) => `    "${p}") return 0 ;;`).join("\n")}
  esac
  return 1
}
complete -o default -F _berth berth
`;
  if (shell === "bash") return `# berth completion for bash: eval "$(berth completion bash)"\n${fn}`;
  if (shell === "zsh")
    return `# berth completion for zsh: eval "$(berth completion zsh)"\nautoload -U +X bashcompinit && bashcompinit\n${fn}`;
  throw usageError(`completion: unknown shell ${shell} (bash or zsh)`);
}

export function registerCompletion(program: Command): void {
  program
    .command("completion <shell>")
    .description('shell completion: eval "$(berth completion bash)" (or zsh) in your shell\'s start-up file')
    .action((shell: string) => {
      process.stdout.write(completionScript(program, shell));
    });
}
