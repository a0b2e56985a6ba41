// Why Berth could not open its database at start, in one line a person can act on: which database
// (its URL without the password), which variable chose it, what went wrong and what to change.
// `connect ECONNREFUSED 127.0.0.1:50521` alone named neither the database nor the variable (issue 27).
// The errors of both drivers (pg, better-sqlite3) and of the file system are read here, in the store,
// the only code that knows them.
import fs from "node:fs";
import path from "node:path";

/** Where the database's URL came from (config/index.ts decides). */
export interface DatabaseOrigin {
  /** BERTH_DATABASE_URL when it is set; otherwise the SQLite file in BERTH_DATA_DIR. */
  variable: "BERTH_DATABASE_URL" | "BERTH_DATA_DIR";
  /** False when BERTH_DATA_DIR is unset and its default (./data) applies. */
  set: boolean;
}

/** A database Berth cannot use at start; `message` says which and what to change. */
export class DatabaseStartError extends Error {
  override name = "DatabaseStartError";
}

/** The URL with its password (and any `password=` parameter) replaced by `***`. */
export function redactDatabaseUrl(url: string): string {
  if (url.startsWith("sqlite:")) return url;
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    if (u.searchParams.has("password")) u.searchParams.set("password", "***");
    return u.toString();
  } catch {
    // Not a URL pg could read either: hide whatever sits between `//` and `@`.
    return url.replace(/\/\/[^@/]*@/, "//***@");
  }
}

interface Coded {
  code?: unknown;
  message?: unknown;
  errors?: unknown;
  address?: unknown;
  port?: unknown;
}

/** The error's code; an AggregateError (every address of a host refused) has its parts' codes. */
function codeOf(error: unknown): string | undefined {
  const e = error as Coded | undefined;
  if (typeof e?.code === "string") return e.code;
  if (Array.isArray(e?.errors)) for (const part of e.errors) if (codeOf(part)) return codeOf(part);
  return undefined;
}

function messageOf(error: unknown): string {
  const e = error as Coded | undefined;
  if (typeof e?.message === "string" && e.message) return e.message;
  if (Array.isArray(e?.errors)) return e.errors.map(messageOf).join("; ");
  return String(error);
}

/**
 * Whether a statement failed only because the database was busy: no PostgreSQL connection came
 * free within the pool's wait, or SQLite stayed locked past its busy timeout. Nothing was written;
 * the same request can succeed a moment later.
 */
export function isDatabaseBusy(error: unknown): boolean {
  if (codeOf(error) === "SQLITE_BUSY") return true;
  return /timeout exceeded when trying to connect/i.test(messageOf(error));
}

/** The file system's refusals of mkdir, and what to do about each. */
const MKDIR_PROBLEMS: Record<string, { problem: string; fix: string }> = {
  EACCES: { problem: "permission denied", fix: "make its parent folder writable by this user" },
  EPERM: { problem: "operation not permitted", fix: "make its parent folder writable by this user" },
  EROFS: { problem: "the file system is read-only", fix: "choose a folder on a writable file system" },
  ENOTDIR: { problem: "a part of its path is a file, not a folder", fix: "move that file away" },
  EEXIST: { problem: "a file of that name is in the way", fix: "move that file away" },
  ENOSPC: { problem: "no space is left on the device", fix: "free some space" },
};

const uid = (): string => String(process.getuid?.() ?? "?");

function writable(folder: string): boolean {
  try {
    fs.accessSync(folder, fs.constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

function whereSet(origin: DatabaseOrigin): string {
  if (origin.variable === "BERTH_DATABASE_URL") return "set by BERTH_DATABASE_URL";
  return origin.set
    ? "the SQLite file in BERTH_DATA_DIR"
    : "the SQLite file in ./data, the default (BERTH_DATA_DIR is unset)";
}

function postgresProblem(error: unknown, url: string): { problem: string; fix: string } {
  let host = "localhost";
  let port = "5432";
  let database = "";
  let user = "";
  try {
    const u = new URL(url);
    host = u.hostname || host;
    port = u.port || port;
    database = decodeURIComponent(u.pathname.replace(/^\//, ""));
    user = decodeURIComponent(u.username);
  } catch {
    // pg read it some other way; the generic sentences below still hold
  }
  const at = `${host}:${port}`;
  const code = codeOf(error);
  switch (code) {
    case "ECONNREFUSED":
      return {
        problem: `connection refused at ${at}: no PostgreSQL server listens there`,
        fix: "start PostgreSQL there, or fix the host and port in BERTH_DATABASE_URL",
      };
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return {
        problem: `the host name ${host} does not resolve`,
        fix: "fix the host in BERTH_DATABASE_URL",
      };
    case "ETIMEDOUT":
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return {
        problem: `no answer from ${at} (${code})`,
        fix: "check that the server is up and reachable from here, or fix the host in BERTH_DATABASE_URL",
      };
    case "28P01":
    case "28000":
      return {
        problem: `PostgreSQL at ${at} refused ${user ? `user "${user}"` : "the connection"}: ${messageOf(error)}`,
        fix: "fix the user name or password in BERTH_DATABASE_URL (or the server's pg_hba.conf)",
      };
    case "3D000":
      return {
        problem: `PostgreSQL at ${at} has no database "${database}"`,
        fix: `create it (createdb ${database || "<name>"}) or name an existing one in BERTH_DATABASE_URL`,
      };
  }
  if (
    /timeout exceeded when trying to connect|Connection terminated due to connection timeout/i.test(
      messageOf(error),
    )
  )
    return {
      problem: `no answer from ${at} within 5 s`,
      fix: "check that the server is up and reachable from here, or fix the host in BERTH_DATABASE_URL",
    };
  return { problem: messageOf(error), fix: "fix BERTH_DATABASE_URL or the server it names" };
}

function sqliteProblem(
  error: unknown,
  url: string,
  origin: DatabaseOrigin,
): { problem: string; fix: string } {
  const file = url.slice("sqlite:".length);
  const folder = path.dirname(file);
  const elsewhere =
    origin.variable === "BERTH_DATABASE_URL"
      ? "or set BERTH_DATABASE_URL to a file in a folder this user can write"
      : "or set BERTH_DATA_DIR (or BERTH_DATABASE_URL) to a folder this user can write";
  const code = codeOf(error);
  const mkdir =
    code && (error as { syscall?: unknown }).syscall === "mkdir" ? MKDIR_PROBLEMS[code] : undefined;
  if (mkdir)
    return {
      problem: `cannot create the folder ${folder}: ${mkdir.problem}`,
      fix: `${mkdir.fix}, ${elsewhere}`,
    };
  // SQLite could not open the file, or the file system refused it (Berth creates the file itself
  // first, readable by its own user only: config/private-files.ts).
  if (code === "SQLITE_CANTOPEN" || code === "EACCES" || code === "EPERM" || code === "EROFS") {
    if (!writable(folder))
      return {
        problem: `cannot create ${file}: the folder ${folder} is not writable by this user (uid ${uid()})`,
        fix: `make ${folder} writable by this user, ${elsewhere}`,
      };
    const stat = fs.statSync(file, { throwIfNoEntry: false });
    if (stat?.isDirectory())
      return { problem: `${file} is a folder, not a file`, fix: `move it away, ${elsewhere}` };
    if (stat && !writable(file))
      return {
        problem: `${file} is not writable by this user (uid ${uid()})`,
        fix: `give ${file} to this user (it holds Berth's state), ${elsewhere}`,
      };
    return {
      problem: `cannot open ${file}: ${messageOf(error)}`,
      fix: `check ${file} and ${folder}, ${elsewhere}`,
    };
  }
  if (typeof code === "string" && code.startsWith("SQLITE_READONLY"))
    return {
      problem: `${file} (or its folder, where the -wal and -shm files go) is read-only for this user (uid ${uid()})`,
      fix: `make ${file} and ${folder} writable by this user, ${elsewhere}`,
    };
  if (code === "SQLITE_NOTADB")
    return { problem: `${file} is not a SQLite database`, fix: `move it away, ${elsewhere}` };
  if (code === "SQLITE_BUSY")
    return {
      problem: `${file} is locked by another process`,
      fix: "stop the other process (another Berth on the same data folder?)",
    };
  return { problem: messageOf(error), fix: `check ${file} and ${folder}, ${elsewhere}` };
}

/** `error`, raised while opening or migrating the database at start, as one actionable sentence. */
export function explainDatabaseFailure(
  error: unknown,
  url: string,
  origin: DatabaseOrigin,
): DatabaseStartError {
  const { problem, fix } = url.startsWith("sqlite:")
    ? sqliteProblem(error, url, origin)
    : postgresProblem(error, url);
  return new DatabaseStartError(
    `cannot use the database ${redactDatabaseUrl(url)} (${whereSet(origin)}): ${problem}. To fix: ${fix}.`,
    { cause: error },
  );
}
