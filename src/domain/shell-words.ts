// Shell-style splitting of run_command and entrypoint, without running a shell. Pure functions.

export class ShellSyntaxError extends Error {
  override readonly name = "ShellSyntaxError";
}

/**
 * Splits a command like a POSIX shell splits words, without running a shell: whitespace separates
 * words, '…' is literal, "…" keeps \" \\ \$ \` escapes, a backslash outside quotes escapes the next
 * character. There is no variable expansion or globbing: the words become the process's argv as
 * they are. Users who want a shell say so: `sh -c "echo $HOME"`.
 */
export function splitShellWords(command: string): string[] {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  let i = 0;
  while (i < command.length) {
    const c = command[i]!;
    if (c === "'") {
      const end = command.indexOf("'", i + 1);
      if (end < 0) throw new ShellSyntaxError("has an unterminated ' quote");
      word += command.slice(i + 1, end);
      inWord = true;
      i = end + 1;
    } else if (c === '"') {
      inWord = true;
      i++;
      for (;;) {
        if (i >= command.length) throw new ShellSyntaxError('has an unterminated " quote');
        const d = command[i]!;
        if (d === '"') {
          i++;
          break;
        }
        const next = command[i + 1];
        if (d === "\\" && next !== undefined && '"\\$`\n'.includes(next)) {
          if (next !== "\n") word += next;
          i += 2;
        } else {
          word += d;
          i++;
        }
      }
    } else if (c === "\\") {
      const next = command[i + 1];
      if (next === undefined) throw new ShellSyntaxError("ends with a lone backslash");
      // A backslash-newline joins lines, as in a shell.
      if (next !== "\n") {
        word += next;
        inWord = true;
      }
      i += 2;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
      i++;
    } else {
      word += c;
      inWord = true;
      i++;
    }
  }
  if (inWord) words.push(word);
  return words;
}
