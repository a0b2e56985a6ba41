// The local provider's view of its nodes: the options and answers of its API, and the record of
// a node planned from its id and index (names, addresses, paths), described to callers.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { type LabPlan, type NodeAddresses, planNodeAddresses, shortNodeId } from "./addresses.ts";
import type { CommandRunner } from "./commands.ts";
import { daemonConfig } from "./engine.ts";
import { LocalProviderError } from "./host-net.ts";
import { isProcessAlive } from "./processes.ts";
import type { NodeRecord, StateFiles } from "./state.ts";
import type { RemapRange, UsernsRemapMode } from "./userns.ts";

export interface LocalProviderOptions {
  /** Where records, engine data and the image cache live (under Berth's data dir). */
  stateDir: string;
  /** A /16 that belongs to Berth alone; default 10.231.0.0/16. */
  labRange?: string;
  /** The host bridge the nodes are attached to; default berth0. */
  bridgeName?: string;
  /** Further image archives (docker save format) loaded into every new node. */
  imagesToLoad?: string[];
  /** Registries (host[:port]) the nodes' engines reach over plain HTTP (`insecure-registries`). */
  insecureRegistries?: string[];
  /** Receives one line per action taken, for action logs. */
  log?: (line: string) => void;
  /** Runs host tools; replaceable to record or fake them. */
  commands?: CommandRunner;
  /** How long a starting engine may take to answer on TCP; default 30 s. */
  engineStartTimeoutMs?: number;
  /** How long a graceful engine stop may take before SIGKILL; default 20 s. */
  engineStopTimeoutMs?: number;
  /** User-namespace remapping of new nodes' engines (userns.ts); default `required`. */
  usernsRemap?: UsernsRemapMode;
  /**
   * The directory from which down to the engines' data-roots the provider may let a remapped root
   * pass through (o+x): Berth's data directory; default the state directory itself.
   */
  traversableFrom?: string;
}

export interface Prerequisites {
  available: boolean;
  reason?: string;
}

export interface DeployNodeOptions {
  nodeId: string;
  /** Small integer that picks the node's addresses (0 to 155), unique among local nodes. */
  index: number;
  /** Defaults to berth-<first 12 hex digits of the node id>. */
  hostname?: string;
}

export interface LocalNode {
  nodeId: string;
  index: number;
  /** The node's address on the host bridge; also its public_ip. */
  address: string;
  engineUrl: string;
  containerSubnet: string;
  netnsName: string;
  /** Absent while the engine is not running. */
  dockerdPid?: number;
  hostname: string;
  /** The host uid and gid a container's root is, when the engine remaps user namespaces. */
  usernsRemap?: RemapRange;
  /** Why the engine runs without remapping, when it does. */
  usernsRemapSkipped?: string;
  /** Its removal has begun (terminate.ts): nothing may be started in its namespace any more. */
  terminating?: true;
}

export interface RecoveredNode {
  nodeId: string;
  engineWasRunning: boolean;
  started: boolean;
  /** A terminate interrupted by a crash was finished. */
  terminated: boolean;
}

export const LINK_NAME = "eth0";
const NODE_BRIDGE_NAME = "berth-br0";
// Unix socket paths are limited to 108 bytes; the longest engine socket below exec-root is
// containerd/containerd-debug.sock.
const LONGEST_SOCKET_SUFFIX = "/containerd/containerd-debug.sock";
const MAX_SOCKET_PATH = 100;

export function describeNode(record: NodeRecord): LocalNode {
  const running = record.dockerd && isProcessAlive(record.dockerd) ? record.dockerd.pid : undefined;
  return {
    nodeId: record.nodeId,
    index: record.index,
    address: record.address,
    engineUrl: record.engineUrl,
    containerSubnet: record.containerSubnet,
    netnsName: record.netnsName,
    hostname: record.hostname,
    ...(running !== undefined ? { dockerdPid: running } : {}),
    ...(record.usernsRemap ? { usernsRemap: record.usernsRemap } : {}),
    ...(record.usernsRemapSkipped ? { usernsRemapSkipped: record.usernsRemapSkipped } : {}),
    ...(record.terminating ? { terminating: true as const } : {}),
  };
}

/** Re-reads the record, applies a change and writes it back (records are shared by flows). */
export function updateRecord(
  state: StateFiles,
  record: NodeRecord,
  change: (fresh: NodeRecord) => void,
): NodeRecord {
  const fresh = state.findNode(record.shortId) ?? record;
  change(fresh);
  state.saveNode(fresh);
  return fresh;
}

/** The record of a new node: its names, addresses and paths, from its id and index. */
export function planRecord(state: StateFiles, lab: LabPlan, options: DeployNodeOptions): NodeRecord {
  const shortId = shortNodeId(options.nodeId);
  const addresses: NodeAddresses = planNodeAddresses({ labRange: lab.labRange, index: options.index });
  const hostname = options.hostname ?? `berth-${shortId}`;
  if (!/^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$/.test(hostname)) {
    throw new LocalProviderError(`"${hostname}" is not a valid hostname`);
  }
  const nodeDir = state.nodeDir(shortId);
  // The engine's sockets live under exec-root; a long data directory would overflow them.
  const execRoot =
    `${nodeDir}/exec${LONGEST_SOCKET_SUFFIX}`.length <= MAX_SOCKET_PATH
      ? path.join(nodeDir, "exec")
      : `/run/berth-${shortId}`;
  return {
    version: 1,
    nodeId: options.nodeId,
    shortId,
    index: options.index,
    hostname,
    netnsName: `berth-${shortId}`,
    hostVethName: `bv-${shortId}`,
    linkName: LINK_NAME,
    nodeBridgeName: NODE_BRIDGE_NAME,
    ...addresses,
    nodeDir,
    dataRoot: path.join(nodeDir, "data"),
    execRoot,
    daemonConfigPath: path.join(nodeDir, "daemon.json"),
    pidFilePath: path.join(nodeDir, "dockerd.pid"),
    keyFilePath: path.join(nodeDir, "key.json"),
    logPath: path.join(nodeDir, "dockerd.log"),
    unixSocketPath: path.join(execRoot, "docker.sock"),
    utsNamespacePath: path.join(nodeDir, "uts"),
    cgroupPath: `/berth-${shortId}`,
    routesToSubnet: [],
    iptablesRules: [],
    createdAt: new Date().toISOString(),
  };
}

/** The node engine's daemon.json (only root may read it). */
export function writeDaemonConfig(record: NodeRecord, insecureRegistries: string[]): void {
  writeFileSync(
    record.daemonConfigPath,
    `${JSON.stringify(daemonConfig(record, { insecureRegistries }), null, 2)}\n`,
    { mode: 0o600 },
  );
}
