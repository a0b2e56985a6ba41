// Files Berth keeps under its data directory hold every tenant's secrets (the database, the key
// file, backups, local nodes' state): only the user Berth runs as may read them. Directories Berth
// creates are 0700 and files 0600, set when they are created (never widened afterwards by a umask),
// and a file an older release left readable by others is tightened when Berth opens it.
import fs from "node:fs";

/** Creates `dir` and its missing parents 0700; a directory that exists is left as it is. */
export function ensurePrivateDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
}

/**
 * Removes the group and other bits of `file`'s mode, by path: opening and closing a descriptor of
 * a database file would drop the POSIX locks another connection of this process holds on it.
 * Answers false when there is no such file.
 */
function tighten(file: string): boolean {
  let mode: number;
  try {
    mode = fs.statSync(file).mode & 0o7777;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
  if (mode & 0o077) fs.chmodSync(file, mode & ~0o077);
  return true;
}

/**
 * Makes sure `file` exists, readable by its owner only: created empty with mode 0600 (before any
 * data is written to it), or tightened when it exists with group or other bits.
 */
export function ensurePrivateFile(file: string): void {
  if (tighten(file)) return;
  try {
    // wx: a new file nobody else has open, so closing it drops nobody's locks.
    fs.closeSync(fs.openSync(file, "wx", 0o600));
  } catch (err) {
    // Made meanwhile by another process: it went through the same rules.
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    tighten(file);
  }
}

/** Tightens `file` to its owner's bits when it exists (an older release's 0644); nothing otherwise. */
export function tightenIfPresent(file: string): void {
  tighten(file);
}
