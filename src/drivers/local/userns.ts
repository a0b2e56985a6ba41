// User-namespace remapping of the engines Berth starts (dockerd `userns-remap`): a container's root
// is an unprivileged host uid (the first of a subordinate range), so a host path an administrator
// allowed a namespace to bind (even `/`) is seen with that uid's rights only, never as root.
//
// All local nodes remap to one dedicated system user, `berth-remap`, whose subordinate uid and gid
// ranges Berth provisions once: the user with `useradd` (run as an executable and arguments, never
// a shell string), the ranges by appending a line to /etc/subuid and /etc/subgid, after every range
// already there. Nothing is changed when the user and its ranges exist.
import { appendFileSync, chmodSync, existsSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import type { CommandRunner } from "./commands.ts";
import { findExecutable } from "./host-tools.ts";

export const REMAP_USER = "berth-remap";
/** Ids per range: a whole 16-bit id space, as useradd gives a user by default. */
export const REMAP_COUNT = 65_536;
/** The lowest id Berth hands out (useradd's SUB_UID_MIN): below it live the host's own users. */
const FIRST_ID = 100_000;
const LAST_ID = 2 ** 32 - 2;

/**
 * How the engines of local nodes run: `required` (the default) remaps every new node's engine and
 * fails the node when the host or the engine cannot; `optional` remaps when it can and otherwise
 * runs the engine without it, saying so in the node's log; `off` never remaps.
 */
export type UsernsRemapMode = "required" | "optional" | "off";

export interface RemapRange {
  user: string;
  /** The host uid and gid a container's root is. */
  uid: number;
  gid: number;
  count: number;
}

export class RemapUnavailable extends Error {}

interface SubidEntry {
  name: string;
  start: number;
  count: number;
}

export function parseSubids(text: string): SubidEntry[] {
  const entries: SubidEntry[] = [];
  for (const line of text.split("\n")) {
    const [name, start, count] = line.trim().split(":");
    if (!name || start === undefined || count === undefined) continue;
    const s = Number(start);
    const c = Number(count);
    if (Number.isInteger(s) && Number.isInteger(c) && c > 0) entries.push({ name, start: s, count: c });
  }
  return entries;
}

/**
 * The first range of REMAP_COUNT ids, aligned on REMAP_COUNT, at or above FIRST_ID and past every
 * range either file gives anyone (so uid and gid start at the same number).
 */
export function planRemapStart(taken: SubidEntry[]): number {
  const end = Math.max(FIRST_ID, ...taken.map((e) => e.start + e.count));
  const start = Math.ceil(end / REMAP_COUNT) * REMAP_COUNT;
  if (start + REMAP_COUNT - 1 > LAST_ID) throw new RemapUnavailable("no free subordinate id range is left");
  return start;
}

export interface RemapFiles {
  subuid: string;
  subgid: string;
}

const SYSTEM_FILES: RemapFiles = { subuid: "/etc/subuid", subgid: "/etc/subgid" };

function readOrEmpty(file: string): string {
  return existsSync(file) ? readFileSync(file, "utf8") : "";
}

/** Whether the kernel lets processes create user namespaces at all. */
function kernelAllowsUserNamespaces(): string | undefined {
  const limit = "/proc/sys/user/max_user_namespaces";
  if (!existsSync("/proc/self/ns/user")) return "this kernel has no user namespaces";
  if (existsSync(limit) && readFileSync(limit, "utf8").trim() === "0")
    return "user namespaces are disabled on this host (/proc/sys/user/max_user_namespaces is 0)";
  return undefined;
}

/**
 * Makes sure the remap user exists with subordinate uid and gid ranges, and answers them; throws
 * RemapUnavailable with the reason when the host cannot remap.
 */
export async function ensureRemapUser(options: {
  commands: CommandRunner;
  log: (line: string) => void;
  files?: RemapFiles;
}): Promise<RemapRange> {
  const files = options.files ?? SYSTEM_FILES;
  const kernel = kernelAllowsUserNamespaces();
  if (kernel) throw new RemapUnavailable(kernel);
  const getent = findExecutable("getent");
  if (!getent) throw new RemapUnavailable("getent is missing on this host (Debian package libc-bin)");
  const lookup = await options.commands.run({ file: getent, args: ["passwd", REMAP_USER] });
  if (lookup.exitCode !== 0) {
    const useradd = findExecutable("useradd");
    if (!useradd) throw new RemapUnavailable("useradd is missing on this host (Debian package passwd)");
    const args = [
      "--system",
      "--user-group",
      "--no-create-home",
      "--home-dir",
      "/nonexistent",
      "--shell",
      "/usr/sbin/nologin",
      "--comment",
      "Berth, root of containers on local nodes",
      REMAP_USER,
    ];
    options.log(`$ ${useradd} ${args.join(" ")}`);
    const added = await options.commands.run({ file: useradd, args });
    if (added.exitCode !== 0)
      throw new RemapUnavailable(
        `useradd ${REMAP_USER} failed: ${added.stderr.trim() || added.stdout.trim()}`,
      );
  }
  const uids = parseSubids(readOrEmpty(files.subuid));
  const gids = parseSubids(readOrEmpty(files.subgid));
  const ownUid = uids.find((e) => e.name === REMAP_USER && e.count >= REMAP_COUNT);
  const ownGid = gids.find((e) => e.name === REMAP_USER && e.count >= REMAP_COUNT);
  const start = ownUid && ownGid ? undefined : planRemapStart([...uids, ...gids]);
  for (const [file, own] of [
    [files.subuid, ownUid],
    [files.subgid, ownGid],
  ] as const) {
    if (own) continue;
    const line = `${REMAP_USER}:${start}:${REMAP_COUNT}\n`;
    const text = readOrEmpty(file);
    options.log(`append ${line.trim()} to ${file}`);
    // The files are world-readable lists of ranges (shadow's own mode); a missing final newline
    // of the last line must not join it to ours.
    appendFileSync(file, `${text && !text.endsWith("\n") ? "\n" : ""}${line}`, { mode: 0o644 });
  }
  return {
    user: REMAP_USER,
    uid: ownUid?.start ?? start!,
    gid: ownGid?.start ?? start!,
    count: REMAP_COUNT,
  };
}

/**
 * The remapped root must traverse every directory down to the engine's data-root (dockerd refuses
 * to start otherwise). Directories of Berth's own, from `ownedFrom` down, get the execute bit for
 * others (0701: they can be passed through, not listed; every file in them stays 0600); the ones
 * above must already allow it, or the reason names the directory to fix.
 */
export function ensureTraversable(dataRoot: string, ownedFrom: string): string[] {
  const changed: string[] = [];
  const owned = path.resolve(ownedFrom);
  for (let dir = path.dirname(path.resolve(dataRoot)); ; dir = path.dirname(dir)) {
    const mode = statSync(dir).mode & 0o7777;
    if (!(mode & 0o001)) {
      if (dir === owned || dir.startsWith(`${owned}/`)) {
        chmodSync(dir, mode | 0o001);
        changed.push(dir);
      } else {
        throw new RemapUnavailable(
          `${dir} does not let other users pass through it (o+x), which the engine's remapped root needs to reach ${dataRoot}`,
        );
      }
    }
    if (dir === path.dirname(dir)) break;
  }
  return changed;
}
