// Stack files in YAML or JSON (a JSON document is YAML too): `{<service name>: {<keys>}}`, as
// export writes them, or a stack body `{name?, services: [...]}`. Syntax errors and the server's
// field problems are reported at the file's line.
import fs from "node:fs";
import path from "node:path";
import { type Document, isMap, isSeq, LineCounter, parseDocument } from "yaml";
import { ApiError } from "./client.ts";
import { CliError, usageError } from "./errors.ts";

export const DEFAULT_FILES = ["berth.yml", "berth.yaml", "docker-cloud.yml", "docker-cloud.yaml"];

export interface StackFile {
  /** What messages call the file: its path, or "<stdin>". */
  label: string;
  /** The stack's default name: the file's folder name for a default file, else the file's base name. */
  defaultName: string;
  /** `name` from a stack body, if it has one. */
  name: string | undefined;
  services: Record<string, unknown>[];
  /** Where services[i] sits in the document: its path there. */
  servicePaths: (string | number)[][];
  doc: Document;
  lines: LineCounter;
}

/** Reads `-f` (a path, or `-` for stdin) or the first default file in `cwd`. */
export function readStackFile(file: string | undefined, cwd: string, stdin: () => string): StackFile {
  let label: string;
  let text: string;
  let defaultName: string;
  if (file === "-") {
    label = "<stdin>";
    text = stdin();
    defaultName = stackNameOf(path.basename(cwd));
  } else {
    let chosen = file;
    if (chosen === undefined) {
      chosen = DEFAULT_FILES.find((f) => fs.existsSync(path.join(cwd, f)));
      if (!chosen)
        throw usageError(
          `no stack file: give -f <file>, or put one of ${DEFAULT_FILES.join(", ")} in ${cwd}`,
        );
    }
    label = chosen;
    try {
      text = fs.readFileSync(path.resolve(cwd, chosen), "utf8");
    } catch (err) {
      throw new CliError(`cannot read ${chosen}: ${(err as NodeJS.ErrnoException).message}`);
    }
    defaultName = stackNameOf(
      DEFAULT_FILES.includes(path.basename(chosen))
        ? path.basename(path.dirname(path.resolve(cwd, chosen)))
        : path.basename(chosen).replace(/\.(ya?ml|json)$/i, ""),
    );
  }
  return parseStackFile(text, label, defaultName);
}

/** A stack name from a file or folder name: a lower-case DNS label, as the server wants. */
export function stackNameOf(base: string): string {
  const name = base
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 63)
    .replace(/-+$/, "");
  return name || "stack";
}

export function parseStackFile(text: string, label: string, defaultName: string): StackFile {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true });
  const first = doc.errors[0];
  if (first) {
    const at = first.linePos?.[0];
    const where = at ? `${label}:${at.line}:${at.col}` : label;
    const message = (first.message.split("\n")[0] ?? "").replace(/ at line \d+, column \d+:?$/, "");
    throw new CliError(`${where}: ${message}`);
  }
  const at = (node: unknown) => {
    const range = (node as { range?: [number, number, number] } | null)?.range;
    return range ? `${label}:${lines.linePos(range[0]).line}` : label;
  };
  const root = doc.contents;
  const js: unknown = doc.toJS();
  if (!isMap(root) || !js || typeof js !== "object" || Array.isArray(js))
    throw new CliError(`${at(root)}: a stack file maps service names to services (web: {image: ...})`);
  const value = js as Record<string, unknown>;

  if (Array.isArray(value.services)) {
    // A stack body: {name?, nickname?, services: [...]}.
    const services = value.services as unknown[];
    services.forEach((s, i) => {
      if (!s || typeof s !== "object" || Array.isArray(s))
        throw new CliError(
          `${at(doc.getIn(["services", i], true))}: services[${i}] must be a service (a mapping)`,
        );
    });
    return {
      label,
      defaultName,
      name: typeof value.name === "string" ? value.name : undefined,
      services: services as Record<string, unknown>[],
      servicePaths: services.map((_, i) => ["services", i]),
      doc,
      lines,
    };
  }
  const services: Record<string, unknown>[] = [];
  const servicePaths: string[][] = [];
  for (const [name, service] of Object.entries(value)) {
    if (name === "version" || name === "services")
      throw new CliError(
        `${at(doc.getIn([name], true))}: ${name} is not supported: a stack file's top-level keys are its services`,
      );
    if (!service || typeof service !== "object" || Array.isArray(service))
      throw new CliError(
        `${at(doc.getIn([name], true))}: ${name} must be a service (a mapping of stack-file keys)`,
      );
    services.push({ name, ...(service as Record<string, unknown>) });
    servicePaths.push([name]);
  }
  return { label, defaultName, name: undefined, services, servicePaths, doc, lines };
}

/** `services[1].ports[0].inner_port` → ["services", 1, "ports", 0, "inner_port"]. */
export function fieldPath(field: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const m of field.matchAll(/([^.[\]]+)|\[(\d+)\]/g))
    out.push(m[2] !== undefined ? Number(m[2]) : m[1]!);
  return out;
}

/** The line in the file of a field the server named, as precisely as the document allows. */
export function lineOf(file: StackFile, field: string): number | undefined {
  let p = fieldPath(field);
  if (p[0] === "services" && p[1] !== undefined) {
    // The server names a service by its place in the list or by its name.
    const index = typeof p[1] === "number" ? p[1] : file.services.findIndex((s) => s.name === p[1]);
    const base = file.servicePaths[index];
    if (!base) return undefined;
    const rest = p.slice(2);
    // The CLI adds `name` from the mapping key: its line is the key's.
    p = rest[0] === "name" && base.length === 1 ? base : [...base, ...rest];
  }
  for (let n = p.length; n > 0; n--) {
    const node = file.doc.getIn(p.slice(0, n), true) as { range?: [number, number, number] } | undefined;
    if (node?.range) {
      const parent = n > 1 ? file.doc.getIn(p.slice(0, n - 1), true) : file.doc.contents;
      // A mapping value's line is where its key is; in a sequence, the item's own line.
      if (isMap(parent)) {
        const pair = parent.items.find((it) => (it.key as { value?: unknown } | null)?.value === p[n - 1]);
        const keyRange = (pair?.key as { range?: [number, number, number] } | null)?.range;
        if (keyRange) return file.lines.linePos(keyRange[0]).line;
      }
      if (isSeq(parent) || !isMap(parent)) return file.lines.linePos(node.range[0]).line;
      return file.lines.linePos(node.range[0]).line;
    }
  }
  return undefined;
}

/** A server refusal of the file's content, with each problem at its line of the file. */
export function explain(file: StackFile, err: unknown): unknown {
  if (!(err instanceof ApiError) || err.details.length === 0) return err;
  const lines = err.details.map((d) => {
    const line = lineOf(file, d.field);
    return `${file.label}${line ? `:${line}` : ""}: ${d.field}: ${d.problem}`;
  });
  return new CliError(`${err.message}\n${lines.join("\n")}`, err.exitCode);
}
