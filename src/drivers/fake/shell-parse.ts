// The fake shell's parser (shell.ts runs what it parses): `sh -c` scripts of simple commands joined
// by `;`, `&&`, `||` and `&`, words with quotes and `$VAR`, redirects of stdout and stderr, and
// integer arithmetic `$((…))`. Anything else is refused with Unsupported, which the shell turns
// into a message on stderr and exit status 2.

export class Unsupported extends Error {}

// ---- parsing ---------------------------------------------------------------------------------------

type Segment =
  | { kind: "text"; value: string }
  | { kind: "var"; name: string }
  | { kind: "arith"; expression: string };
export type Word = Segment[];
type Redirect = { fd: 1 | 2; to: "stdout" | "stderr" | "null" };

export interface SimpleCommand {
  words: Word[];
  redirects: Redirect[];
}

export interface AndOr {
  /** Each command runs when the previous status fits its connector. */
  steps: Array<{ connector: "&&" | "||" | undefined; command: SimpleCommand }>;
  background: boolean;
}

const RESERVED = new Set([
  "if",
  "then",
  "else",
  "elif",
  "fi",
  "for",
  "while",
  "until",
  "do",
  "done",
  "case",
  "esac",
]);

export function parseScript(script: string): AndOr[] {
  const lists: AndOr[] = [];
  let steps: AndOr["steps"] = [];
  let command: SimpleCommand = { words: [], redirects: [] };
  let connector: "&&" | "||" | undefined;
  let i = 0;

  const finishCommand = (): boolean => {
    if (command.words.length === 0) {
      if (command.redirects.length > 0) throw new Unsupported("a redirection without a command");
      return false;
    }
    const first = command.words[0]!;
    const literal = first.length === 1 && first[0]!.kind === "text" ? first[0]!.value : undefined;
    if (literal !== undefined && RESERVED.has(literal)) throw new Unsupported(`"${literal}"`);
    if (literal?.endsWith("()")) throw new Unsupported("functions");
    steps.push({ connector, command });
    command = { words: [], redirects: [] };
    return true;
  };
  const finishList = (background: boolean) => {
    const had = finishCommand();
    if (!had && connector) throw new Unsupported(`a command after "${connector}"`);
    if (steps.length > 0) lists.push({ steps, background });
    steps = [];
    connector = undefined;
  };

  while (i < script.length) {
    const ch = script[i]!;
    if (ch === " " || ch === "\t") {
      i += 1;
    } else if (ch === "#") {
      while (i < script.length && script[i] !== "\n") i += 1;
    } else if (ch === ";" || ch === "\n") {
      finishList(false);
      i += 1;
    } else if (script.startsWith("&&", i) || script.startsWith("||", i)) {
      if (!finishCommand()) throw new Unsupported(`"${script.slice(i, i + 2)}" without a command before it`);
      connector = script.slice(i, i + 2) as "&&" | "||";
      i += 2;
    } else if (ch === "&") {
      finishList(true);
      i += 1;
    } else if (ch === "|") {
      throw new Unsupported("pipes");
    } else if (ch === "(" || ch === ")" || ch === "{" || ch === "}" || ch === "`" || ch === "<") {
      throw new Unsupported(`"${ch}"`);
    } else if (/^(?:[12])?>/.test(script.slice(i, i + 2))) {
      const match = /^([12])?>(&[12]|\s*\/dev\/null)/.exec(script.slice(i));
      if (!match) throw new Unsupported("redirection to files");
      const fd = match[1] === "2" ? 2 : 1;
      const target = match[2]!.trim();
      command.redirects.push({ fd, to: target === "&1" ? "stdout" : target === "&2" ? "stderr" : "null" });
      i += match[0].length;
    } else {
      const [word, next] = readWord(script, i);
      command.words.push(word);
      i = next;
    }
  }
  finishList(false);
  return lists;
}

function readWord(script: string, start: number): [Word, number] {
  const word: Word = [];
  let text = "";
  const flush = () => {
    if (text) word.push({ kind: "text", value: text });
    text = "";
  };
  const readVar = (i: number): number => {
    // i points at "$"
    const rest = script.slice(i + 1);
    if (rest.startsWith("((")) {
      const end = arithmeticEnd(script, i + 3);
      flush();
      word.push({ kind: "arith", expression: script.slice(i + 3, end) });
      return end + 2;
    }
    if (rest.startsWith("(")) throw new Unsupported("command substitution");
    const braced = /^\{([A-Za-z_][A-Za-z0-9_]*)\}/.exec(rest);
    const plain = /^([A-Za-z_][A-Za-z0-9_]*|[?$#0-9])/.exec(rest);
    const match = braced ?? plain;
    if (!match) {
      text += "$";
      return i + 1;
    }
    flush();
    word.push({ kind: "var", name: match[1]! });
    return i + 1 + match[0].length;
  };
  let i = start;
  while (i < script.length) {
    const ch = script[i]!;
    if (" \t\n;&|<>()`{}".includes(ch)) break;
    if (ch === "'") {
      const end = script.indexOf("'", i + 1);
      if (end < 0) throw new Unsupported("an unterminated quote");
      text += script.slice(i + 1, end);
      i = end + 1;
    } else if (ch === '"') {
      i += 1;
      while (i < script.length && script[i] !== '"') {
        if (script[i] === "\\" && i + 1 < script.length && '$`"\\\n'.includes(script[i + 1]!)) {
          text += script[i + 1];
          i += 2;
        } else if (script[i] === "$") {
          i = readVar(i);
        } else if (script[i] === "`") {
          throw new Unsupported("command substitution");
        } else {
          text += script[i];
          i += 1;
        }
      }
      if (i >= script.length) throw new Unsupported("an unterminated quote");
      i += 1;
    } else if (ch === "\\") {
      text += script[i + 1] ?? "";
      i += 2;
    } else if (ch === "$") {
      i = readVar(i);
    } else {
      text += ch;
      i += 1;
    }
  }
  flush();
  return [word, i];
}

/** The index of the "))" closing an arithmetic expansion whose expression starts at `start`. */
function arithmeticEnd(script: string, start: number): number {
  let depth = 0;
  for (let i = start; i < script.length; i += 1) {
    const ch = script[i];
    if (ch === "(") depth += 1;
    else if (ch === ")") {
      if (depth === 0) {
        if (script[i + 1] !== ")") throw new Unsupported("command substitution");
        return i;
      }
      depth -= 1;
    }
  }
  throw new Unsupported("an unterminated $((");
}

/**
 * Evaluates an arithmetic expansion as sh does for the operators the fake has: integers, variables
 * (unset or empty is 0), unary + and -, * / %, + -, parentheses; anything else is unsupported.
 */
export function evaluateArithmetic(expression: string, variable: (name: string) => string): number {
  const tokens =
    expression.match(/\s+|\d+|[A-Za-z_][A-Za-z0-9_]*|\$[A-Za-z_][A-Za-z0-9_]*|[-+*/%()]|./g) ?? [];
  const list = tokens.filter((t) => !/^\s+$/.test(t));
  let at = 0;
  const fail = (): never => {
    throw new Unsupported(`arithmetic "${expression}"`);
  };
  const value = (text: string): number => {
    const trimmed = text.trim();
    if (trimmed === "") return 0;
    if (!/^-?\d+$/.test(trimmed)) return fail();
    return Number(trimmed);
  };
  const primary = (): number => {
    const token = list[at++];
    if (token === undefined) return fail();
    if (token === "(") {
      const inner = sum();
      if (list[at++] !== ")") fail();
      return inner;
    }
    if (token === "-") return -primary();
    if (token === "+") return primary();
    if (/^\d+$/.test(token)) return Number(token);
    if (/^\$?[A-Za-z_]/.test(token)) return value(variable(token.replace(/^\$/, "")));
    return fail();
  };
  const product = (): number => {
    let left = primary();
    while (list[at] === "*" || list[at] === "/" || list[at] === "%") {
      const op = list[at++];
      const right = primary();
      if (op !== "*" && right === 0) throw new Unsupported("division by zero");
      left = op === "*" ? left * right : op === "/" ? Math.trunc(left / right) : left % right;
    }
    return left;
  };
  const sum = (): number => {
    let left = product();
    while (list[at] === "+" || list[at] === "-") {
      const op = list[at++];
      const right = product();
      left = op === "+" ? left + right : left - right;
    }
    return left;
  };
  const result = sum();
  if (at !== list.length) fail();
  return result;
}

/** The backslash escapes of `echo -e` and `printf`: \n, \t, \r, \\ and octal \0NNN. */
export function interpretEscapes(text: string): string {
  return text.replace(/\\([ntr\\]|0[0-7]{0,3})/g, (_, code: string) => {
    if (code === "n") return "\n";
    if (code === "t") return "\t";
    if (code === "r") return "\r";
    if (code === "\\") return "\\";
    return String.fromCharCode(Number.parseInt(code, 8));
  });
}
