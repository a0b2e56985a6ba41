// Finding and stopping a node's processes by identity: the pid plus its start time (so a reused
// pid is never mistaken for ours), the node's namespaces and its cgroup. Never by process name.
import { existsSync, readdirSync, readFileSync, readlinkSync, rmdirSync, statSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

export interface ProcessIdentity {
  pid: number;
  /** Start time in clock ticks since boot (field 22 of /proc/<pid>/stat). */
  startTicks: number;
}

interface ProcStat {
  state: string;
  startTicks: number;
}

function readProcStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name (field 2) may contain spaces and parentheses; fields after the last ')'
  // are plain. They start at field 3 (state), so field 22 is at offset 19.
  const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
  const state = rest[0];
  const startTicks = Number(rest[19]);
  if (state === undefined || !Number.isFinite(startTicks)) return undefined;
  return { state, startTicks };
}

export function identifyProcess(pid: number): ProcessIdentity | undefined {
  const stat = readProcStat(pid);
  return stat ? { pid, startTicks: stat.startTicks } : undefined;
}

/** True while the very process we recorded runs; a zombie counts as gone. */
export function isProcessAlive(identity: ProcessIdentity): boolean {
  const stat = readProcStat(identity.pid);
  if (!stat || stat.startTicks !== identity.startTicks) return false;
  return stat.state !== "Z" && stat.state !== "X";
}

function signalIfSame(identity: ProcessIdentity, signal: NodeJS.Signals): void {
  if (!isProcessAlive(identity)) return;
  try {
    process.kill(identity.pid, signal);
  } catch {
    // Exited between the check and the signal.
  }
}

export async function waitForExit(identity: ProcessIdentity, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (isProcessAlive(identity)) {
    if (Date.now() >= deadline) return false;
    await sleep(50);
  }
  return true;
}

/** SIGTERM, then SIGKILL when the process has not exited within graceMs. */
export async function stopProcess(identity: ProcessIdentity, options: { graceMs: number }): Promise<void> {
  signalIfSame(identity, "SIGTERM");
  if (await waitForExit(identity, options.graceMs)) return;
  signalIfSame(identity, "SIGKILL");
  if (!(await waitForExit(identity, 5_000))) {
    throw new Error(`process ${identity.pid} did not exit after SIGKILL`);
  }
}

export function killProcess(identity: ProcessIdentity): void {
  signalIfSame(identity, "SIGKILL");
}

/** The inode of a namespace file (/run/netns/<name>, a bind-mounted namespace, or /proc/<pid>/ns/<kind>). */
export function namespaceInode(file: string): number | undefined {
  try {
    return statSync(file).ino;
  } catch {
    return undefined;
  }
}

function processNamespaceInode(pid: number, kind: "net" | "uts"): number | undefined {
  try {
    const match = /\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/ns/${kind}`));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Where each cgroup hierarchy is mounted (v1 controllers and the v2 unified tree). */
export function cgroupMounts(): string[] {
  const mounts: string[] = [];
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const [before, after] = line.split(" - ");
    const fsType = after?.split(" ")[0];
    const mountPoint = before?.split(" ")[4];
    if (mountPoint && (fsType === "cgroup" || fsType === "cgroup2")) {
      mounts.push(unescapeMountPath(mountPoint));
    }
  }
  return mounts;
}

export function unescapeMountPath(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
}

function cgroupDirs(cgroupPath: string): string[] {
  // A damaged record must never widen the scope to a whole hierarchy.
  if (!/^\/berth-[0-9a-f]{12}$/.test(cgroupPath)) throw new Error(`not a node cgroup path: "${cgroupPath}"`);
  return cgroupMounts()
    .map((mount) => path.join(mount, cgroupPath))
    .filter((dir) => existsSync(dir));
}

function pidsUnder(dir: string, into: Set<number>): void {
  try {
    for (const line of readFileSync(path.join(dir, "cgroup.procs"), "utf8").split("\n")) {
      if (line) into.add(Number(line));
    }
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) pidsUnder(path.join(dir, entry.name), into);
    }
  } catch {
    // The cgroup was removed while we read it.
  }
}

export interface NodeProcessScope {
  netnsInode?: number;
  utsInode?: number;
  /** The cgroup parent the node's engine puts containers under, e.g. /berth-0123456789ab. */
  cgroupPath: string;
}

/**
 * Every process that belongs to a node: in its network namespace (dockerd, containerd, shims,
 * docker-proxy), in its UTS namespace, or in its cgroup subtree (container processes, which
 * have namespaces of their own).
 */
export function findNodeProcesses(scope: NodeProcessScope): ProcessIdentity[] {
  const pids = new Set<number>();
  for (const dir of cgroupDirs(scope.cgroupPath)) pidsUnder(dir, pids);
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (scope.netnsInode !== undefined && processNamespaceInode(pid, "net") === scope.netnsInode) {
      pids.add(pid);
    } else if (scope.utsInode !== undefined && processNamespaceInode(pid, "uts") === scope.utsInode)
      pids.add(pid);
  }
  // Never this process or init, whatever a namespace comparison says.
  pids.delete(process.pid);
  pids.delete(1);
  const found: ProcessIdentity[] = [];
  for (const pid of pids) {
    const stat = readProcStat(pid);
    if (stat && stat.state !== "Z" && stat.state !== "X") found.push({ pid, startTicks: stat.startTicks });
  }
  return found;
}

/** SIGKILLs the node's processes until none is left (shims may still be forking when we start). */
export async function killNodeProcesses(
  scope: NodeProcessScope,
  options: { timeoutMs: number },
): Promise<number> {
  const deadline = Date.now() + options.timeoutMs;
  let killed = 0;
  for (;;) {
    const found = findNodeProcesses(scope);
    if (found.length === 0) return killed;
    if (Date.now() >= deadline) {
      throw new Error(`processes of the node are still running: ${found.map((p) => p.pid).join(", ")}`);
    }
    for (const identity of found) killProcess(identity);
    killed += found.length;
    await sleep(100);
  }
}

/** Removes the node's cgroup subtree in every hierarchy, deepest first. */
export async function removeCgroup(cgroupPath: string, options: { timeoutMs: number }): Promise<void> {
  const removeTree = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) removeTree(path.join(dir, entry.name));
    }
    rmdirSync(dir);
  };
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    const dirs = cgroupDirs(cgroupPath);
    if (dirs.length === 0) return;
    let lastError: unknown;
    for (const dir of dirs) {
      try {
        removeTree(dir);
      } catch (error) {
        // EBUSY while the kernel still releases exited tasks; retry shortly.
        lastError = error;
      }
    }
    if (lastError === undefined) continue;
    if (Date.now() >= deadline) throw lastError;
    await sleep(100);
  }
}
