// Words that belong to a command run in a container, not to berth. `berth container exec web-1
// sh -c '…'` passes everything after the container's name to the command, as `docker exec` does:
// commander would otherwise read `-c` (and any of berth's global options, `--help`, `--version`)
// wherever it appears. Before commander parses, `separateCommandWords` walks the command tree as
// commander will, and puts `--` after the arguments of a command marked by `takesCommandAfter`, so
// the rest reaches it untouched. An option value that starts with a dash (`-r --version`) is joined
// to its option (`--run-command=--version`), so no parent command reads it as an option of its own.
import type { Command, Option } from "commander";

const COMMAND_AFTER = new WeakMap<Command, number>();

/** Marks `cmd` as running a command made of the words after its first `args` arguments. */
export function takesCommandAfter(cmd: Command, args: number): Command {
  COMMAND_AFTER.set(cmd, args);
  return cmd;
}

function findOption(cmd: Command, flag: string): Option | undefined {
  for (let c: Command | null = cmd; c; c = c.parent) {
    const found = c.options.find((o) => o.short === flag || o.long === flag);
    if (found) return found;
  }
  return undefined;
}

/** `flag` with its value as one word that no parser can take for an option. */
function joined(option: Option, flag: string, value: string): string {
  return option.long ? `${option.long}=${value}` : `${flag}${value}`;
}

/** `argv` (the words after `berth`) as commander must read it: see the head of this file. */
export function separateCommandWords(program: Command, argv: readonly string[]): string[] {
  const out: string[] = [];
  let cmd = program;
  let positionals = 0;
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]!;
    if (arg === "--") return [...out, ...argv.slice(i)];
    if (arg.startsWith("--")) {
      const option = arg.includes("=") ? undefined : findOption(cmd, arg);
      const value = argv[i + 1];
      if (option?.required && value !== undefined) {
        out.push(
          value.startsWith("-") ? joined(option, arg, value) : arg,
          ...(value.startsWith("-") ? [] : [value]),
        );
        i += 1;
      } else out.push(arg);
      continue;
    }
    if (arg.startsWith("-") && arg.length > 1) {
      // A short option, or a group of them (`-tT`): a letter taking a value takes the rest of the
      // group, or the next word when it is the group's last letter.
      let consumed = false;
      for (let at = 1; at < arg.length; at += 1) {
        const flag = `-${arg[at]}`;
        const option = findOption(cmd, flag);
        if (!option) break;
        if (option.required) {
          const value = argv[i + 1];
          if (at === arg.length - 1 && value !== undefined) {
            const head = arg.slice(0, at);
            const prefix = head === "-" ? [] : [head];
            out.push(...prefix, ...(value.startsWith("-") ? [joined(option, flag, value)] : [flag, value]));
            consumed = true;
            i += 1;
          }
          break;
        }
      }
      if (!consumed) out.push(arg);
      continue;
    }
    out.push(arg);
    const sub =
      positionals === 0 ? cmd.commands.find((c) => c.name() === arg || c.aliases().includes(arg)) : undefined;
    if (sub) {
      cmd = sub;
      continue;
    }
    positionals += 1;
    if (COMMAND_AFTER.get(cmd) === positionals) {
      const rest = argv.slice(i + 1);
      return rest.length === 0 || rest[0] === "--" ? [...out, ...rest] : [...out, "--", ...rest];
    }
  }
  return out;
}

/** Words of a command as one `sh -c` line that runs exactly them (quoted where sh would change them). */
export function shellLine(words: readonly string[]): string {
  return words
    .map((w) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(w) ? w : `'${w.replaceAll("'", `'\\''`)}'`))
    .join(" ");
}
