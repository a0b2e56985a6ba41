// The provider's records. Every object it creates on the host is written here before it is
// created, so tear-down and crash recovery act on recorded identities only, never on guesses.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { IptablesRule } from "./iptables.ts";
import type { ProcessIdentity } from "./processes.ts";
import type { RemapRange } from "./userns.ts";

export interface HostRecord {
  version: 1;
  bridgeName: string;
  labRange: string;
  hostAddressCidr: string;
  iptablesRules: IptablesRule[];
}

export interface NodeRecord {
  version: 1;
  nodeId: string;
  shortId: string;
  index: number;
  hostname: string;
  netnsName: string;
  /** Inode of the network namespace once created; processes inside it belong to the node. */
  netnsInode?: number;
  hostVethName: string;
  /** The veth end inside the namespace. */
  linkName: string;
  /** The bridge inside the namespace that dockerd uses (`--bridge`). */
  nodeBridgeName: string;
  address: string;
  addressCidr: string;
  containerSubnet: string;
  bridgeAddressCidr: string;
  engineUrl: string;
  nodeDir: string;
  dataRoot: string;
  /** Holds the engine's sockets; outside nodeDir when nodeDir is too long for a socket path. */
  execRoot: string;
  daemonConfigPath: string;
  pidFilePath: string;
  keyFilePath: string;
  logPath: string;
  unixSocketPath: string;
  /** A bind-mounted UTS namespace holding the node's hostname. */
  utsNamespacePath: string;
  utsInode?: number;
  /** cgroup parent of the node's containers, in every hierarchy. */
  cgroupPath: string;
  /**
   * The engine's user-namespace remapping (userns.ts), decided when the node is first deployed and
   * kept: images and containers live under the remapped root's part of the data-root. Absent in
   * records of releases before it, whose engines keep running without.
   */
  usernsRemap?: RemapRange;
  /** Why the engine runs without remapping (only when an administrator's setting allows it). */
  usernsRemapSkipped?: string;
  /**
   * Where a route to this node's container subnet was added: "host" or another node's netns
   * name. They are removed with this node.
   */
  routesToSubnet: string[];
  iptablesRules: IptablesRule[];
  dockerd?: ProcessIdentity;
  /** Set when removal starts; a crash leaves it set and recovery finishes the removal. */
  terminating?: boolean;
  createdAt: string;
}

function writeJsonAtomic(file: string, value: unknown): void {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(value, null, 2)}\n`, { mode: 0o600 });
  renameSync(temporary, file);
}

export class StateFiles {
  constructor(readonly stateDir: string) {}

  get hostFile(): string {
    return path.join(this.stateDir, "host.json");
  }

  get nodesDir(): string {
    return path.join(this.stateDir, "nodes");
  }

  get imagesDir(): string {
    return path.join(this.stateDir, "images");
  }

  nodeDir(shortId: string): string {
    return path.join(this.nodesDir, shortId);
  }

  nodeFile(shortId: string): string {
    return path.join(this.nodeDir(shortId), "node.json");
  }

  findHost(): HostRecord | undefined {
    if (!existsSync(this.hostFile)) return undefined;
    return JSON.parse(readFileSync(this.hostFile, "utf8")) as HostRecord;
  }

  saveHost(record: HostRecord): void {
    writeJsonAtomic(this.hostFile, record);
  }

  removeHost(): void {
    rmSync(this.hostFile, { force: true });
  }

  findNode(shortId: string): NodeRecord | undefined {
    const file = this.nodeFile(shortId);
    if (!existsSync(file)) return undefined;
    return JSON.parse(readFileSync(file, "utf8")) as NodeRecord;
  }

  saveNode(record: NodeRecord): void {
    writeJsonAtomic(this.nodeFile(record.shortId), record);
  }

  listNodes(): NodeRecord[] {
    if (!existsSync(this.nodesDir)) return [];
    const records: NodeRecord[] = [];
    for (const entry of readdirSync(this.nodesDir)) {
      const record = this.findNode(entry);
      if (record) records.push(record);
    }
    return records.sort((a, b) => a.index - b.index);
  }
}
