// Locating the host tools the provider depends on, and checking that they can work here.
import { accessSync, closeSync, constants, openSync, readSync } from "node:fs";
import path from "node:path";

export interface HostTools {
  dockerd: string;
  ip: string;
  nsenter: string;
  unshare: string;
  iptables: string;
  tar: string;
  umount: string;
  busybox: string;
}

// Root's PATH may lack the sbin directories when Berth runs under a service manager.
const EXTRA_PATH_DIRS = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];

export function searchPath(): string[] {
  const dirs = (process.env.PATH ?? "").split(":").filter(Boolean);
  for (const dir of EXTRA_PATH_DIRS) if (!dirs.includes(dir)) dirs.push(dir);
  return dirs;
}

export function findExecutable(name: string): string | undefined {
  for (const dir of searchPath()) {
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not in this directory.
    }
  }
  return undefined;
}

/**
 * True when an ELF executable has no program interpreter (PT_INTERP), i.e. it is statically
 * linked. busybox:local has no libc, so a dynamically linked busybox would not start in it.
 */
export function isStaticElf(file: string): boolean {
  const fd = openSync(file, "r");
  try {
    const header = Buffer.alloc(64);
    readSync(fd, header, 0, 64, 0);
    if (header.readUInt32BE(0) !== 0x7f454c46) return false;
    const is64 = header[4] === 2;
    const little = header[5] === 1;
    const u16 = (b: Buffer, o: number) => (little ? b.readUInt16LE(o) : b.readUInt16BE(o));
    const u32 = (b: Buffer, o: number) => (little ? b.readUInt32LE(o) : b.readUInt32BE(o));
    const programHeaderOffset = is64
      ? Number(little ? header.readBigUInt64LE(32) : header.readBigUInt64BE(32))
      : u32(header, 28);
    const entrySize = u16(header, is64 ? 54 : 42);
    const entryCount = u16(header, is64 ? 56 : 44);
    const entry = Buffer.alloc(entrySize);
    for (let i = 0; i < entryCount; i++) {
      readSync(fd, entry, 0, entrySize, programHeaderOffset + i * entrySize);
      const PT_INTERP = 3;
      if (u32(entry, 0) === PT_INTERP) return false;
    }
    return true;
  } finally {
    closeSync(fd);
  }
}

const BUSYBOX_CANDIDATES = ["/usr/bin/busybox", "/bin/busybox"];

export type ToolLookup = { tools: HostTools } | { missing: string[] };

export function locateHostTools(): ToolLookup {
  const missing: string[] = [];
  const need = (name: string): string => {
    const found = findExecutable(name);
    if (!found) missing.push(name);
    return found ?? "";
  };
  const tools: HostTools = {
    dockerd: need("dockerd"),
    ip: need("ip"),
    nsenter: need("nsenter"),
    unshare: need("unshare"),
    iptables: need("iptables"),
    tar: need("tar"),
    umount: need("umount"),
    busybox: "",
  };
  // dockerd starts these itself; checking here gives a clear reason instead of a failed start.
  for (const name of ["containerd", "containerd-shim-runc-v2", "runc"]) need(name);
  const busybox = [...BUSYBOX_CANDIDATES, findExecutable("busybox")].find((candidate) => {
    if (!candidate) return false;
    try {
      return isStaticElf(candidate);
    } catch {
      return false;
    }
  });
  if (busybox) tools.busybox = busybox;
  else missing.push("a static busybox (Debian package busybox-static)");
  return missing.length > 0 ? { missing } : { tools };
}
