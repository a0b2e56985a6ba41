// Output for people and for scripts: aligned tables (colours on a terminal, off when piped or with
// NO_COLOR), `-q` for uuids only, `--json` for the API's objects as they are.
import pc from "picocolors";
import { lastSegment as segmentOf } from "../domain/uri.ts";

export interface OutputOptions {
  json: boolean;
  quiet: boolean;
  color: boolean;
  /** Whether stdout is a terminal (spinners, glyphs). */
  tty: boolean;
}

/** The `uuid` of an answer, or "" when it has none. */
function uuidIn(obj: unknown): string {
  return typeof obj === "object" && obj !== null && "uuid" in obj && typeof obj.uuid === "string"
    ? obj.uuid
    : "";
}

/** What a list prints: a page of the API (its envelope), or the objects of several pages. */
export type Listed<T> = readonly T[] | { objects?: readonly T[]; meta?: unknown };

const isList = <T>(page: Listed<T>): page is readonly T[] => Array.isArray(page);

/** A table column over objects of the API (`T`: their contract type, such as `Service`). */
export interface Column<T> {
  header: string;
  value: (o: T) => unknown;
  /** Cells are states: coloured by what they mean. */
  state?: boolean;
}

export function colorEnabled(env: NodeJS.ProcessEnv, stream: { isTTY?: boolean }, flag: boolean): boolean {
  if (!flag || "NO_COLOR" in env) return false;
  if (env.FORCE_COLOR && env.FORCE_COLOR !== "0") return true;
  return stream.isTTY === true && env.TERM !== "dumb";
}

const GOOD = new Set(["Running", "Deployed", "Success", "Partly running", "Partly deployed"]);
const BUSY = new Set([
  "Starting",
  "Stopping",
  "Deploying",
  "In progress",
  "Pending",
  "Scaling",
  "Redeploying",
  "Terminating",
  "Upgrading",
  "Canceling",
]);
const BAD = new Set(["Failed", "Unreachable", "Stopped", "Canceled"]);

export function str(v: unknown): string {
  if (v === null || v === undefined) return "";
  if (typeof v === "boolean") return v ? "yes" : "no";
  return String(v);
}

export function short(uuid: unknown): string {
  return str(uuid).slice(0, 8);
}

/** Last segment of a resource URI (`/api/infra/v1/region/aws/us-east-1/` → `us-east-1`). */
export function lastSegment(uri: unknown): string {
  return typeof uri === "string" ? (segmentOf(uri) ?? "") : "";
}

/** "3 minutes ago" (or "in an hour") for an API timestamp (`Sun, 22 Nov 2026 03:17:08 +0000` or ISO 8601). */
export function ago(timestamp: unknown, nowMs = Date.now()): string {
  if (typeof timestamp !== "string" || timestamp === "") return "";
  const at = Date.parse(timestamp);
  if (Number.isNaN(at)) return timestamp;
  const s = Math.round((nowMs - at) / 1000);
  if (s < -9) return `in ${duration(-s * 1000)}`;
  if (s < 0) return "just now";
  if (s < 10) return "just now";
  return `${duration(s * 1000)} ago`;
}

/** "2 minutes", "an hour", "3 days" for a length of time. */
export function duration(ms: number): string {
  const s = Math.round(ms / 1000);
  const units: [number, string][] = [
    [86_400 * 365, "year"],
    [86_400 * 30, "month"],
    [86_400 * 7, "week"],
    [86_400, "day"],
    [3600, "hour"],
    [60, "minute"],
    [1, "second"],
  ];
  for (const [size, name] of units) {
    const n = Math.floor(s / size);
    if (n >= 1) return n === 1 ? `${name === "hour" ? "an" : "a"} ${name}` : `${n} ${name}s`;
  }
  return "0 seconds";
}

/** Seconds between two timestamps as "1.2s" or "3m 04s"; "" when one is missing. */
export function elapsed(start: unknown, end: unknown, nowMs = Date.now()): string {
  if (typeof start !== "string") return "";
  const a = Date.parse(start);
  const b = typeof end === "string" ? Date.parse(end) : nowMs;
  if (Number.isNaN(a) || Number.isNaN(b)) return "";
  return stopwatch(b - a);
}

/** A running time: tenths of a second under 10 s, seconds under a minute, then minutes. */
export function stopwatch(span: number): string {
  const ms = Math.max(0, span);
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)}s`;
  const m = Math.floor(ms / 60_000);
  return `${m}m ${String(Math.floor((ms % 60_000) / 1000)).padStart(2, "0")}s`;
}

export class Output {
  readonly c: ReturnType<typeof pc.createColors>;

  constructor(
    readonly opts: OutputOptions,
    readonly stdout: NodeJS.WritableStream = process.stdout,
    readonly stderr: NodeJS.WritableStream = process.stderr,
  ) {
    this.c = pc.createColors(opts.color);
  }

  state(state: unknown): string {
    const s = str(state);
    if (GOOD.has(s)) return this.c.green(s);
    if (BUSY.has(s)) return this.c.yellow(s);
    if (BAD.has(s)) return this.c.red(s);
    if (s === "Terminated" || s === "Not running" || s === "Not Running") return this.c.dim(s);
    return s;
  }

  write(text: string): void {
    this.stdout.write(text);
  }

  line(text = ""): void {
    this.stdout.write(`${text}\n`);
  }

  /** Progress and notes: stderr, so stdout stays the command's answer. */
  note(text: string): void {
    this.stderr.write(`${text}\n`);
  }

  json(value: unknown): void {
    this.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  }

  table<T>(columns: readonly Column<T>[], objects: readonly T[]): void {
    const rows = objects.map((o) => columns.map((col) => str(col.value(o)).replace(/\s*\n\s*/g, " ")));
    const widths = columns.map((col, i) => Math.max(col.header.length, ...rows.map((r) => r[i]!.length)));
    const render = (cells: readonly string[], paint: (cell: string, i: number) => string) =>
      cells
        .map((cell, i) => {
          const padded = i === cells.length - 1 ? cell : cell.padEnd(widths[i]!);
          return paint(padded, i);
        })
        .join("   ")
        .trimEnd();
    this.line(
      render(
        columns.map((c) => c.header),
        (cell) => this.c.bold(cell),
      ),
    );
    for (const row of rows) {
      this.line(
        render(row, (cell, i) => {
          if (!columns[i]!.state) return cell;
          const trimmed = cell.trimEnd();
          return this.state(trimmed) + cell.slice(trimmed.length);
        }),
      );
    }
  }

  /** A list: `--json` the API's envelope, `-q` the uuids (or another id), a table otherwise. */
  list<T>(page: Listed<T>, columns: readonly Column<T>[], idOf: (o: T) => string = uuidIn): void {
    const objects: readonly T[] = isList(page) ? page : (page?.objects ?? []);
    if (this.opts.json) {
      // Objects gathered from several pages print as one page of the API's envelope.
      this.json(Array.isArray(page) ? { meta: { total_count: page.length }, objects: page } : page);
      return;
    }
    if (this.opts.quiet) {
      for (const o of objects) this.line(idOf(o));
      return;
    }
    this.table(columns, objects);
  }

  /** The result of an operation on one object: JSON, or its uuid (what the historical CLI printed). */
  done(obj: unknown, id: string = uuidIn(obj)): void {
    if (this.opts.json) this.json(obj);
    else this.line(id);
  }
}
