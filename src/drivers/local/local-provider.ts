// The `local` node provider: each node is a real Docker engine on this host, in a network
// namespace of its own, reachable from the host at its address on the lab bridge.
//
// Every operation is an idempotent ensure step that can be repeated after a crash. Whatever is
// created is recorded (StateFiles) before it is created, and removal acts on those records only.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import {
  cidrsOverlap,
  type LabPlan,
  type NodeAddresses,
  planLab,
  planNodeAddresses,
  shortNodeId,
} from "./addresses.ts";
import { type CommandResult, type CommandRunner, createCommandRunner, formatCommand } from "./commands.ts";
import {
  clearStaleContainerdPidFile,
  daemonConfig,
  engineClient,
  pidFileProcess,
  removeAllContainers,
  spawnEngine,
  waitForEngine,
} from "./engine.ts";
import { type HostTools, locateHostTools, searchPath } from "./host-tools.ts";
import { ensureBusyboxImage, loadArchive } from "./images.ts";
import { deleteRule, detectIptables, ensureRule, type IptablesRule, type IptablesSetup } from "./iptables.ts";
import {
  isProcessAlive,
  killNodeProcesses,
  killProcess,
  type NodeProcessScope,
  namespaceInode,
  removeCgroup,
  stopProcess,
  unescapeMountPath,
  waitForExit,
} from "./processes.ts";
import { type NodeRecord, StateFiles } from "./state.ts";
import {
  ensureRemapUser,
  ensureTraversable,
  type RemapRange,
  RemapUnavailable,
  type UsernsRemapMode,
} from "./userns.ts";

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
}

export interface RecoveredNode {
  nodeId: string;
  engineWasRunning: boolean;
  started: boolean;
  /** A terminate interrupted by a crash was finished. */
  terminated: boolean;
}

export class LocalProviderError extends Error {}

const LINK_NAME = "eth0";
const NODE_BRIDGE_NAME = "berth-br0";
// Unix socket paths are limited to 108 bytes; the longest engine socket below exec-root is
// containerd/containerd-debug.sock.
const LONGEST_SOCKET_SUFFIX = "/containerd/containerd-debug.sock";
const MAX_SOCKET_PATH = 100;

/** Serializes work per key (one host, one node) inside this process. */
class KeyedMutex {
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    let release = (): void => {};
    const current = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => current);
    this.tails.set(key, tail);
    await previous;
    try {
      return await work();
    } finally {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}

/** The parts of `ip -j addr show` we read. */
interface IpLinkJson {
  flags: string[];
  master?: string;
  addr_info: { family: string; local: string; prefixlen: number }[];
}

/** The parts of `ip -j route show` we read. */
interface IpRouteJson {
  dst: string;
  type?: string;
  gateway?: string;
  dev?: string;
}

interface LinkState {
  up: boolean;
  master?: string;
  /** IPv4 addresses as CIDR. */
  addresses: string[];
}

interface Setup {
  tools: HostTools;
  iptables: IptablesSetup;
  enginePath: string;
}

function mountPointsUnder(dir: string): string[] {
  const prefix = dir.endsWith("/") ? dir : `${dir}/`;
  const points: string[] = [];
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const field = line.split(" ")[4];
    if (!field) continue;
    const point = unescapeMountPath(field);
    if (point === dir || point.startsWith(prefix)) points.push(point);
  }
  // Deepest first, so nested mounts come off before their parents.
  return points.sort((a, b) => b.length - a.length);
}

export class LocalProvider {
  private readonly state: StateFiles;
  private readonly lab: LabPlan;
  private readonly bridgeName: string;
  private readonly imagesToLoad: string[];
  private readonly insecureRegistries: string[];
  private readonly log: (line: string) => void;
  private readonly commands: CommandRunner;
  private readonly engineStartTimeoutMs: number;
  private readonly engineStopTimeoutMs: number;
  private readonly locks = new KeyedMutex();
  private setupPromise: Promise<Setup> | undefined;
  private readonly usernsRemap: UsernsRemapMode;
  private readonly traversableFrom: string;
  private remapPromise: Promise<RemapRange> | undefined;

  constructor(options: LocalProviderOptions) {
    this.state = new StateFiles(path.resolve(options.stateDir));
    this.lab = planLab(options.labRange ?? "10.231.0.0/16");
    this.bridgeName = options.bridgeName ?? "berth0";
    if (!/^[\w-]{1,15}$/.test(this.bridgeName)) {
      throw new LocalProviderError(`bridgeName must be a valid interface name, got "${this.bridgeName}"`);
    }
    this.imagesToLoad = options.imagesToLoad ?? [];
    this.insecureRegistries = options.insecureRegistries ?? [];
    this.log = options.log ?? (() => {});
    this.commands = options.commands ?? createCommandRunner();
    this.engineStartTimeoutMs = options.engineStartTimeoutMs ?? 30_000;
    this.engineStopTimeoutMs = options.engineStopTimeoutMs ?? 20_000;
    this.usernsRemap = options.usernsRemap ?? "required";
    this.traversableFrom = path.resolve(options.traversableFrom ?? options.stateDir);
  }

  // ---------------------------------------------------------------- prerequisites

  async prerequisites(): Promise<Prerequisites> {
    if (process.platform !== "linux") return { available: false, reason: "local nodes need Linux" };
    if (process.getuid?.() !== 0) return { available: false, reason: "local nodes need root" };
    try {
      await this.setup();
    } catch (error) {
      return { available: false, reason: (error as Error).message };
    }
    return { available: true };
  }

  private setup(): Promise<Setup> {
    this.setupPromise ??= (async () => {
      const lookup = locateHostTools();
      if ("missing" in lookup) {
        throw new LocalProviderError(`missing on this host: ${lookup.missing.join(", ")}`);
      }
      const iptables = await detectIptables({
        commands: this.commands,
        iptables: lookup.tools.iptables,
        shimDir: path.join(this.state.stateDir, "bin"),
      });
      const dirs = searchPath();
      const enginePath = [...(iptables.pathPrefix ? [iptables.pathPrefix] : []), ...dirs].join(":");
      return { tools: lookup.tools, iptables, enginePath };
    })();
    // A failed detection is retried on the next call instead of being cached.
    this.setupPromise.catch(() => {
      this.setupPromise = undefined;
    });
    return this.setupPromise;
  }

  // ---------------------------------------------------------------- commands

  private async run(file: string, args: string[], options: { mutate: boolean }): Promise<CommandResult> {
    if (options.mutate) this.log(`$ ${formatCommand(file, args)}`);
    return this.commands.run({ file, args });
  }

  /** Runs a command that must succeed. */
  private async must(file: string, args: string[]): Promise<void> {
    const result = await this.run(file, args, { mutate: true });
    if (result.exitCode !== 0) {
      throw new LocalProviderError(`${formatCommand(file, args)} failed: ${result.stderr.trim()}`);
    }
  }

  /** Runs a removal; an object that is already gone is fine. */
  private async removal(file: string, args: string[]): Promise<void> {
    const result = await this.run(file, args, { mutate: true });
    if (result.exitCode !== 0) this.log(`  (already gone: ${result.stderr.trim()})`);
  }

  private async readLink(tools: HostTools, name: string, netns?: string): Promise<LinkState | undefined> {
    const args = [...(netns ? ["-n", netns] : []), "-j", "addr", "show", "dev", name];
    const result = await this.run(tools.ip, args, { mutate: false });
    if (result.exitCode !== 0) return undefined;
    const [link] = JSON.parse(result.stdout) as IpLinkJson[];
    if (!link) return undefined;
    return {
      up: link.flags.includes("UP"),
      ...(link.master ? { master: link.master } : {}),
      addresses: link.addr_info.filter((a) => a.family === "inet").map((a) => `${a.local}/${a.prefixlen}`),
    };
  }

  private async linkExists(tools: HostTools, name: string, netns?: string): Promise<boolean> {
    return (await this.readLink(tools, name, netns)) !== undefined;
  }

  /** Brings a link up (and onto a bridge) and gives it an address, changing only what differs. */
  private async ensureLink(
    tools: HostTools,
    options: { name: string; netns?: string; master?: string; addressCidr?: string },
  ): Promise<void> {
    const ns = options.netns ? ["-n", options.netns] : [];
    const link = await this.readLink(tools, options.name, options.netns);
    if (!link) {
      const where = options.netns ? ` in ${options.netns}` : "";
      throw new LocalProviderError(`link ${options.name} is missing${where}`);
    }
    if (options.master && link.master !== options.master) {
      await this.must(tools.ip, [...ns, "link", "set", options.name, "master", options.master]);
    }
    // Up before the address: other nodes' route syncs take the address to mean "link ready".
    if (!link.up) await this.must(tools.ip, [...ns, "link", "set", options.name, "up"]);
    if (options.addressCidr && !link.addresses.includes(options.addressCidr)) {
      await this.must(tools.ip, [...ns, "addr", "replace", options.addressCidr, "dev", options.name]);
    }
  }

  private async readRoutes(tools: HostTools, netns?: string): Promise<IpRouteJson[]> {
    const args = [...(netns ? ["-n", netns] : []), "-j", "-4", "route", "show"];
    const result = await this.run(tools.ip, args, { mutate: false });
    return result.exitCode === 0 ? (JSON.parse(result.stdout) as IpRouteJson[]) : [];
  }

  private netnsExists(name: string): boolean {
    return namespaceInode(`/run/netns/${name}`) !== undefined;
  }

  // ---------------------------------------------------------------- host

  /** The host bridge with the host's address, the lab's unreachable route and forward rules. */
  async ensureHost(): Promise<void> {
    const { tools, iptables } = await this.setup();
    await this.locks.run("host", async () => {
      let record = this.state.findHost();
      if (!record) {
        await this.refuseForeignLab(tools);
        record = {
          version: 1,
          bridgeName: this.bridgeName,
          labRange: this.lab.labRange,
          hostAddressCidr: `${this.lab.hostAddress}/${this.lab.linkPrefixLength}`,
          iptablesRules: [],
        };
      } else if (record.bridgeName !== this.bridgeName || record.labRange !== this.lab.labRange) {
        throw new LocalProviderError(
          `${this.state.hostFile} records bridge ${record.bridgeName} and lab ${record.labRange}; ` +
            `this provider is configured for ${this.bridgeName} and ${this.lab.labRange}`,
        );
      }
      // Keep rules recorded earlier (another backend may have been live then) so that
      // teardown still removes them.
      const known = new Set(record.iptablesRules.map((rule) => JSON.stringify(rule)));
      for (const rule of this.hostRules(iptables)) {
        if (!known.has(JSON.stringify(rule))) record.iptablesRules.push(rule);
      }
      this.state.saveHost(record);

      // First, before any lab address exists: packets to unused lab addresses are refused
      // here instead of following the default route off the machine.
      const routes = await this.readRoutes(tools);
      if (!routes.some((r) => r.type === "unreachable" && r.dst === this.lab.labRange)) {
        await this.must(tools.ip, ["route", "replace", "unreachable", this.lab.labRange]);
      }
      if (!(await this.linkExists(tools, this.bridgeName))) {
        await this.must(tools.ip, ["link", "add", this.bridgeName, "type", "bridge"]);
      }
      await this.ensureLink(tools, { name: this.bridgeName, addressCidr: record.hostAddressCidr });
      // Forwarding only for packets that arrive on the lab bridge, not host-wide; node-to-node
      // traffic is switched by the bridge and the rules below keep lab traffic on the bridge.
      const forwarding = `/proc/sys/net/ipv4/conf/${this.bridgeName}/forwarding`;
      if (readFileSync(forwarding, "utf8").trim() !== "1") {
        this.log(`enable IPv4 forwarding on ${this.bridgeName}`);
        writeFileSync(forwarding, "1\n");
      }
      for (const rule of record.iptablesRules) {
        await ensureRule({ commands: this.commands, nsenter: tools.nsenter, rule, log: this.log });
      }
    });
  }

  /** Host FORWARD rules: lab ports talk to each other (the policy may be DROP) and nothing else. */
  private hostRules(iptables: IptablesSetup): IptablesRule[] {
    const comment = ["-m", "comment", "--comment", `berth-lab-${this.bridgeName}`];
    const br = this.bridgeName;
    return iptables.hostBinaries.flatMap((binary): IptablesRule[] => [
      { binary, table: "filter", chain: "FORWARD", spec: ["-i", br, "-o", br, ...comment, "-j", "ACCEPT"] },
      {
        binary,
        table: "filter",
        chain: "FORWARD",
        spec: ["-i", br, "!", "-o", br, ...comment, "-j", "DROP"],
      },
      {
        binary,
        table: "filter",
        chain: "FORWARD",
        spec: ["!", "-i", br, "-o", br, ...comment, "-j", "DROP"],
      },
    ]);
  }

  /** Refuses to take over a bridge or lab range that this state directory did not create. */
  private async refuseForeignLab(tools: HostTools): Promise<void> {
    if (await this.linkExists(tools, this.bridgeName)) {
      throw new LocalProviderError(
        `interface ${this.bridgeName} exists but is not recorded in ${this.state.hostFile}; not taking it over`,
      );
    }
    // Another lab, a VPN or a real network in this range: our unreachable route would cut it off.
    const clash = (await this.readRoutes(tools)).find((r) => cidrsOverlap(r.dst, this.lab.labRange));
    if (clash) {
      throw new LocalProviderError(
        `the lab range ${this.lab.labRange} is already routed on this host (${clash.type ?? "unicast"} ${clash.dst}` +
          `${clash.dev ? ` dev ${clash.dev}` : ""}) and not recorded in ${this.state.hostFile}`,
      );
    }
  }

  /** Removes the bridge, the forward rules and the unreachable route once no node is left. */
  async teardownHost(): Promise<void> {
    const { tools } = await this.setup();
    await this.locks.run("host", async () => {
      const remaining = this.state.listNodes();
      if (remaining.length > 0) {
        throw new LocalProviderError(
          `cannot tear down the host while nodes remain: ${remaining.map((n) => n.nodeId).join(", ")}`,
        );
      }
      const record = this.state.findHost();
      if (!record) return;
      for (const rule of record.iptablesRules) {
        await deleteRule({ commands: this.commands, nsenter: tools.nsenter, rule, log: this.log });
      }
      if (await this.linkExists(tools, record.bridgeName)) {
        await this.must(tools.ip, ["link", "del", record.bridgeName]);
      }
      // Last, after the lab's last address is gone.
      const routes = await this.readRoutes(tools);
      if (routes.some((r) => r.type === "unreachable" && r.dst === record.labRange)) {
        await this.must(tools.ip, ["route", "del", "unreachable", record.labRange]);
      }
      rmSync(path.join(this.state.stateDir, "bin"), { recursive: true, force: true });
      this.state.removeHost();
      this.log(`host lab ${record.labRange} on ${record.bridgeName} removed`);
    });
  }

  // ---------------------------------------------------------------- nodes

  listNodes(): LocalNode[] {
    return this.state.listNodes().map((record) => this.describe(record));
  }

  findNode(nodeId: string): LocalNode | undefined {
    const record = this.state.findNode(shortNodeId(nodeId));
    return record && record.nodeId === nodeId ? this.describe(record) : undefined;
  }

  private describe(record: NodeRecord): LocalNode {
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
    };
  }

  private getRecord(nodeId: string): NodeRecord {
    const record = this.state.findNode(shortNodeId(nodeId));
    if (!record || record.nodeId !== nodeId) {
      throw new LocalProviderError(`no local node ${nodeId} is recorded`);
    }
    return record;
  }

  /** Re-reads the record, applies a change and writes it back (records are shared by flows). */
  private update(record: NodeRecord, change: (fresh: NodeRecord) => void): NodeRecord {
    const fresh = this.state.findNode(record.shortId) ?? record;
    change(fresh);
    this.state.saveNode(fresh);
    return fresh;
  }

  private planRecord(options: DeployNodeOptions): NodeRecord {
    const shortId = shortNodeId(options.nodeId);
    const addresses: NodeAddresses = planNodeAddresses({ labRange: this.lab.labRange, index: options.index });
    const hostname = options.hostname ?? `berth-${shortId}`;
    if (!/^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$/.test(hostname)) {
      throw new LocalProviderError(`"${hostname}" is not a valid hostname`);
    }
    const nodeDir = this.state.nodeDir(shortId);
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

  /**
   * Creates the node (or completes a half-created one): namespace, link, addresses, routes, a
   * running engine that answers on TCP, and the images every local node starts with.
   */
  async deployNode(options: DeployNodeOptions): Promise<LocalNode> {
    const { tools } = await this.setup();
    await this.ensureHost();
    const shortId = shortNodeId(options.nodeId);
    return this.locks.run(`node:${shortId}`, async () => {
      const startedAtMs = Date.now();
      let record = this.state.findNode(shortId);
      if (record) {
        if (record.terminating) {
          throw new LocalProviderError(`local node ${record.nodeId} is being terminated; finish that first`);
        }
        if (record.nodeId !== options.nodeId || record.index !== options.index) {
          throw new LocalProviderError(
            `${this.state.nodeFile(shortId)} records node ${record.nodeId} with index ${record.index}`,
          );
        }
      } else {
        record = this.planRecord(options);
        // Names derived from the id must be free; anything already there is not ours.
        if (this.netnsExists(record.netnsName) || (await this.linkExists(tools, record.hostVethName))) {
          throw new LocalProviderError(
            `netns ${record.netnsName} or link ${record.hostVethName} exists but is not recorded; not taking it over`,
          );
        }
        const remap = await this.decideRemap(record.shortId);
        record = { ...record, ...remap };
        // Checked and saved without an await in between, so parallel deploys cannot share an index.
        const clash = this.state.listNodes().find((other) => other.index === options.index);
        if (clash) {
          throw new LocalProviderError(`index ${options.index} is used by local node ${clash.nodeId}`);
        }
        this.state.saveNode(record);
        this.log(`node ${shortId}: deploying at ${record.address} (containers ${record.containerSubnet})`);
      }
      record = await this.ensureNodeNetwork(record);
      await this.syncRoutes();
      record = await this.ensureEngine(record, { mayDropRemap: this.usernsRemap === "optional" });
      await this.ensureImages(record);
      this.log(`node ${shortId}: ready at ${record.engineUrl} in ${Date.now() - startedAtMs} ms`);
      return this.describe(record);
    });
  }

  /**
   * Whether a new node's engine remaps user namespaces: the remap user and its ranges are made once
   * per provider. When the host cannot, the node fails with the reason unless the setting is
   * `optional`, and then runs without it, saying why in its log.
   */
  private async decideRemap(
    shortId: string,
  ): Promise<Pick<NodeRecord, "usernsRemap" | "usernsRemapSkipped">> {
    if (this.usernsRemap === "off") {
      this.log(
        `node ${shortId}: user-namespace remapping is off (BERTH_LOCAL_USERNS_REMAP=off): container root is host root`,
      );
      return { usernsRemapSkipped: "BERTH_LOCAL_USERNS_REMAP=off" };
    }
    this.remapPromise ??= ensureRemapUser({ commands: this.commands, log: this.log });
    // A failure is looked at again on the next deploy (the administrator may have fixed the host).
    this.remapPromise.catch(() => {
      this.remapPromise = undefined;
    });
    try {
      return { usernsRemap: await this.remapPromise };
    } catch (error) {
      if (!(error instanceof RemapUnavailable)) throw error;
      return this.withoutRemap(shortId, error.message);
    }
  }

  /** Refuses the node, or (setting `optional`) records why it runs without remapping. */
  private withoutRemap(shortId: string, reason: string): Pick<NodeRecord, "usernsRemapSkipped"> {
    if (this.usernsRemap !== "optional") {
      throw new LocalProviderError(
        `the engine cannot run with user-namespace remapping: ${reason}; ` +
          "an administrator may set BERTH_LOCAL_USERNS_REMAP=optional to run local nodes without it (container root is then host root)",
      );
    }
    this.log(
      `node ${shortId}: running WITHOUT user-namespace remapping (container root is host root): ${reason} (BERTH_LOCAL_USERNS_REMAP=optional)`,
    );
    return { usernsRemapSkipped: reason };
  }

  private writeDaemonConfig(record: NodeRecord): void {
    writeFileSync(
      record.daemonConfigPath,
      `${JSON.stringify(daemonConfig(record, { insecureRegistries: this.insecureRegistries }), null, 2)}\n`,
      { mode: 0o600 },
    );
  }

  private async ensureNodeNetwork(initial: NodeRecord): Promise<NodeRecord> {
    const { tools } = await this.setup();
    let record = initial;
    const ns = record.netnsName;
    if (!this.netnsExists(ns)) await this.must(tools.ip, ["netns", "add", ns]);
    const netnsInode = namespaceInode(`/run/netns/${ns}`);
    record = this.update(record, (r) => {
      if (netnsInode !== undefined) r.netnsInode = netnsInode;
    });
    await this.ensureLink(tools, { name: "lo", netns: ns });

    // A host end without its peer in the namespace is a leftover of a lost namespace.
    const hostEnd = await this.linkExists(tools, record.hostVethName);
    const nsEnd = await this.linkExists(tools, record.linkName, ns);
    if (hostEnd && !nsEnd) await this.must(tools.ip, ["link", "del", record.hostVethName]);
    if (!hostEnd || !nsEnd) {
      await this.must(tools.ip, [
        "link",
        "add",
        record.hostVethName,
        "type",
        "veth",
        "peer",
        "name",
        record.linkName,
        "netns",
        ns,
      ]);
    }
    await this.ensureLink(tools, { name: record.hostVethName, master: this.bridgeName });
    await this.ensureLink(tools, { name: record.linkName, netns: ns, addressCidr: record.addressCidr });
    // No default route inside the node: only the link network and the other nodes' subnets.
    if (!(await this.linkExists(tools, record.nodeBridgeName, ns))) {
      await this.must(tools.ip, ["-n", ns, "link", "add", record.nodeBridgeName, "type", "bridge"]);
    }
    await this.ensureLink(tools, {
      name: record.nodeBridgeName,
      netns: ns,
      addressCidr: record.bridgeAddressCidr,
    });

    for (const dir of [record.nodeDir, record.dataRoot, record.execRoot]) {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
    }
    this.writeDaemonConfig(record);

    // The hostname lives in a persistent UTS namespace, set before dockerd starts, so the
    // engine reports it from the first moment and no shell wrapper is needed.
    if (!mountPointsUnder(record.utsNamespacePath).includes(record.utsNamespacePath)) {
      writeFileSync(record.utsNamespacePath, "");
      await this.must(tools.unshare, [
        `--uts=${record.utsNamespacePath}`,
        tools.busybox,
        "hostname",
        record.hostname,
      ]);
    }
    const utsInode = namespaceInode(record.utsNamespacePath);
    return this.update(record, (r) => {
      if (utsInode !== undefined) r.utsInode = utsInode;
    });
  }

  /**
   * Every node (and the host) gets a route to every other node's container subnet via that
   * node's address, so containers reach each other by private IP with their source kept.
   */
  async syncRoutes(): Promise<void> {
    const { tools } = await this.setup();
    await this.locks.run("routes", async () => {
      // Only nodes whose link already has its address; a node still being set up (in parallel)
      // runs this sync itself once its link is ready.
      const ready: NodeRecord[] = [];
      for (const record of this.state.listNodes()) {
        if (record.terminating || !this.netnsExists(record.netnsName)) continue;
        const link = await this.readLink(tools, record.linkName, record.netnsName);
        if (link?.up && link.addresses.includes(record.addressCidr)) ready.push(record);
      }
      const existing = new Map<string, IpRouteJson[]>([["host", await this.readRoutes(tools)]]);
      for (const record of ready) {
        existing.set(record.netnsName, await this.readRoutes(tools, record.netnsName));
      }

      for (const target of ready) {
        const places = ["host", ...ready.filter((r) => r !== target).map((r) => r.netnsName)];
        // Recorded before the routes exist, so an interrupted sync is still cleaned up.
        this.update(target, (r) => {
          r.routesToSubnet = [...new Set([...r.routesToSubnet, ...places])];
        });
        for (const place of places) {
          const dev = place === "host" ? this.bridgeName : LINK_NAME;
          const present = existing
            .get(place)
            ?.some((r) => r.dst === target.containerSubnet && r.gateway === target.address && r.dev === dev);
          if (present) continue;
          const route = ["route", "replace", target.containerSubnet, "via", target.address, "dev", dev];
          await this.must(tools.ip, place === "host" ? route : ["-n", place, ...route]);
        }
      }
    });
  }

  private async ensureEngine(
    initial: NodeRecord,
    opts: { mayDropRemap?: boolean } = {},
  ): Promise<NodeRecord> {
    const { tools, iptables, enginePath } = await this.setup();
    let record = initial;
    if (record.usernsRemap) {
      try {
        for (const dir of ensureTraversable(record.dataRoot, this.traversableFrom)) {
          this.log(`node ${record.shortId}: ${dir} is now passable (o+x) for the engine's remapped root`);
        }
      } catch (error) {
        if (!(error instanceof RemapUnavailable) || !opts.mayDropRemap) throw this.remapFailure(error);
        record = this.dropRemap(record, error.message);
      }
    }
    let identity = record.dockerd && isProcessAlive(record.dockerd) ? record.dockerd : undefined;
    if (!identity) {
      // A dockerd started just before a crash may not be recorded yet: adopt it only when its
      // pidfile names a process inside this node's own network namespace.
      const fromPidFile = pidFileProcess(record.pidFilePath);
      if (fromPidFile && namespaceInode(`/proc/${fromPidFile.pid}/ns/net`) === record.netnsInode) {
        identity = fromPidFile;
        this.log(`node ${record.shortId}: adopting running dockerd ${identity.pid}`);
      } else {
        // dockerd refuses to start when its pidfile names a live process, even an unrelated one.
        rmSync(record.pidFilePath, { force: true });
        if (clearStaleContainerdPidFile(record)) {
          this.log(`node ${record.shortId}: removed stale containerd pidfile`);
        }
        this.log(`node ${record.shortId}: starting dockerd (log ${record.logPath})`);
        identity = await spawnEngine({ record, tools, commands: this.commands, path: enginePath });
      }
      const recorded = identity;
      record = this.update(record, (r) => {
        r.dockerd = recorded;
      });
    }
    try {
      await waitForEngine({ record, identity, timeoutMs: this.engineStartTimeoutMs });
    } catch (error) {
      // An engine that would not start with remapping (its storage driver, its kernel): with the
      // setting `optional`, a node being deployed starts once more without it, and says so.
      if (!record.usernsRemap || !opts.mayDropRemap || isProcessAlive(identity)) throw error;
      record = this.dropRemap(record, `the engine did not start with it: ${(error as Error).message}`);
      return this.ensureEngine(record, { mayDropRemap: false });
    }

    // dockerd sends new inbound connections to unpublished ports to its FORWARD policy (DROP);
    // lab traffic from the link to this node's containers is let through.
    const rule: IptablesRule = {
      binary: iptables.nodeBinary,
      netns: record.netnsName,
      table: "filter",
      chain: "DOCKER-USER",
      spec: [
        "-i",
        record.linkName,
        "-o",
        record.nodeBridgeName,
        "-s",
        this.lab.labRange,
        "-d",
        record.containerSubnet,
        "-m",
        "comment",
        "--comment",
        `berth-${record.shortId}`,
        "-j",
        "ACCEPT",
      ],
    };
    record = this.update(record, (r) => {
      if (!r.iptablesRules.some((known) => JSON.stringify(known) === JSON.stringify(rule))) {
        r.iptablesRules.push(rule);
      }
    });
    await ensureRule({ commands: this.commands, nsenter: tools.nsenter, rule, log: this.log });
    return record;
  }

  /** A host that cannot remap for this node: the reason, and the setting that would allow it. */
  private remapFailure(error: unknown): Error {
    if (!(error instanceof RemapUnavailable)) return error as Error;
    return new LocalProviderError(
      `the engine cannot run with user-namespace remapping: ${error.message}; ` +
        "an administrator may set BERTH_LOCAL_USERNS_REMAP=optional to run local nodes without it (container root is then host root)",
    );
  }

  /** The node's engine runs without remapping from now on (setting `optional`); its log says why. */
  private dropRemap(record: NodeRecord, reason: string): NodeRecord {
    const dropped = this.update(record, (r) => {
      delete r.usernsRemap;
      Object.assign(r, this.withoutRemap(r.shortId, reason));
      delete r.dockerd;
    });
    this.writeDaemonConfig(dropped);
    return dropped;
  }

  private async ensureImages(record: NodeRecord): Promise<void> {
    const { tools } = await this.setup();
    const docker = engineClient(record, { timeoutMs: 120_000 });
    // One build at a time: the first engine builds busybox:local, the others load its archive.
    await this.locks.run("images", () =>
      ensureBusyboxImage({
        docker,
        commands: this.commands,
        busybox: tools.busybox,
        tar: tools.tar,
        imagesDir: this.state.imagesDir,
        log: this.log,
      }),
    );
    for (const archive of this.imagesToLoad) {
      this.log(`node ${record.shortId}: loading ${archive}`);
      await loadArchive(docker, archive);
    }
  }

  // ---------------------------------------------------------------- engines

  engineRunning(nodeId: string): boolean {
    const record = this.state.findNode(shortNodeId(nodeId));
    return !!record?.dockerd && record.nodeId === nodeId && isProcessAlive(record.dockerd);
  }

  /** Starts the engine again if it is not running (recreating lost network pieces first). */
  async startEngine(nodeId: string): Promise<LocalNode> {
    const record = this.getRecord(nodeId);
    await this.ensureHost();
    return this.locks.run(`node:${record.shortId}`, async () => {
      const networked = await this.ensureNodeNetwork(this.getRecord(nodeId));
      await this.syncRoutes();
      return this.describe(await this.ensureEngine(networked));
    });
  }

  /** Graceful restart (for engine upgrades): containers come back per their restart policy. */
  async restartEngine(nodeId: string): Promise<LocalNode> {
    const record = this.getRecord(nodeId);
    await this.locks.run(`node:${record.shortId}`, async () => {
      const current = this.getRecord(nodeId);
      if (current.dockerd) {
        this.log(`node ${current.shortId}: stopping dockerd ${current.dockerd.pid}`);
        await stopProcess(current.dockerd, { graceMs: this.engineStopTimeoutMs });
      }
    });
    return this.startEngine(nodeId);
  }

  /** SIGKILLs the engine, as a crash would; its shims and containers keep running. */
  async killEngine(nodeId: string): Promise<void> {
    const record = this.getRecord(nodeId);
    await this.locks.run(`node:${record.shortId}`, async () => {
      const current = this.getRecord(nodeId);
      if (!current.dockerd) return;
      this.log(`node ${current.shortId}: killing dockerd ${current.dockerd.pid}`);
      killProcess(current.dockerd);
      if (!(await waitForExit(current.dockerd, 5_000))) {
        throw new LocalProviderError(`dockerd ${current.dockerd.pid} survived SIGKILL`);
      }
    });
  }

  // ---------------------------------------------------------------- terminate

  /** Removes everything of the node: containers, processes, namespace, link, routes, rules, files. */
  async terminateNode(nodeId: string): Promise<void> {
    const shortId = shortNodeId(nodeId);
    await this.locks.run(`node:${shortId}`, async () => {
      const record = this.state.findNode(shortId);
      if (!record) return;
      if (record.nodeId !== nodeId) {
        throw new LocalProviderError(
          `${this.state.nodeFile(shortId)} records another node, ${record.nodeId}`,
        );
      }
      const { tools } = await this.setup();
      const startedAtMs = Date.now();
      this.update(record, (r) => {
        r.terminating = true;
      });

      if (record.dockerd && isProcessAlive(record.dockerd)) {
        try {
          const removed = await removeAllContainers(engineClient(record, { timeoutMs: 30_000 }), {
            parallel: 8,
          });
          this.log(`node ${shortId}: removed ${removed} containers`);
        } catch (error) {
          // The processes are killed below either way; the engine API is only the fast path.
          this.log(`node ${shortId}: removing containers failed: ${(error as Error).message}`);
        }
        await stopProcess(record.dockerd, { graceMs: 10_000 });
      }
      const scope: NodeProcessScope = {
        cgroupPath: record.cgroupPath,
        // Only the namespaces we recorded: a same-named one with another inode is not ours.
        ...(record.netnsInode !== undefined &&
        namespaceInode(`/run/netns/${record.netnsName}`) === record.netnsInode
          ? { netnsInode: record.netnsInode }
          : {}),
        ...(record.utsInode !== undefined && namespaceInode(record.utsNamespacePath) === record.utsInode
          ? { utsInode: record.utsInode }
          : {}),
      };
      const killed = await killNodeProcesses(scope, { timeoutMs: 15_000 });
      if (killed > 0) this.log(`node ${shortId}: killed ${killed} leftover processes`);
      await removeCgroup(record.cgroupPath, { timeoutMs: 10_000 });

      await this.locks.run("routes", async () => {
        // Re-read: a sync that was already running may have added places since.
        const places = this.state.findNode(shortId)?.routesToSubnet ?? record.routesToSubnet;
        for (const place of places) {
          const route = ["route", "del", record.containerSubnet, "via", record.address];
          if (place === "host") await this.removal(tools.ip, route);
          else if (this.netnsExists(place)) await this.removal(tools.ip, ["-n", place, ...route]);
        }
        this.update(record, (r) => {
          r.routesToSubnet = [];
        });
        // Routes inside this node's namespace vanish with it; the other records stop naming it.
        for (const other of this.state.listNodes()) {
          if (other.shortId === record.shortId || !other.routesToSubnet.includes(record.netnsName)) continue;
          this.update(other, (r) => {
            r.routesToSubnet = r.routesToSubnet.filter((place) => place !== record.netnsName);
          });
        }
      });
      if (this.netnsExists(record.netnsName)) {
        for (const rule of record.iptablesRules) {
          await deleteRule({ commands: this.commands, nsenter: tools.nsenter, rule, log: this.log });
        }
        await this.must(tools.ip, ["netns", "del", record.netnsName]);
      }
      // Normally gone with the namespace; a leftover host end would block a later deploy.
      // The kernel removes it after `netns del` returns, so it may vanish between the check and
      // the delete: a failed delete only counts when the link is still there afterwards.
      if (await this.linkExists(tools, record.hostVethName)) {
        await this.removal(tools.ip, ["link", "del", record.hostVethName]);
        if (await this.linkExists(tools, record.hostVethName)) {
          throw new LocalProviderError(`link ${record.hostVethName} could not be removed`);
        }
      }

      for (const dir of [record.nodeDir, record.execRoot]) {
        for (const point of mountPointsUnder(dir)) await this.must(tools.umount, [point]);
      }
      if (!record.execRoot.startsWith(`${record.nodeDir}/`)) {
        rmSync(record.execRoot, { recursive: true, force: true });
      }
      // The record goes last, so an interrupted removal is finished by the next call.
      if (existsSync(record.nodeDir)) {
        for (const entry of readdirSync(record.nodeDir)) {
          if (entry !== "node.json") {
            rmSync(path.join(record.nodeDir, entry), { recursive: true, force: true });
          }
        }
      }
      rmSync(record.nodeDir, { recursive: true, force: true });
      this.log(`node ${shortId}: terminated in ${Date.now() - startedAtMs} ms`);
    });
  }

  // ---------------------------------------------------------------- recovery

  /**
   * After a crash or reboot: re-creates the host lab and, unless told otherwise, starts every
   * recorded engine that is not running. The platform may instead decide per node (via health)
   * and call startEngine itself.
   */
  async recover(options: { startEngines?: boolean } = {}): Promise<RecoveredNode[]> {
    const records = this.state.listNodes();
    if (records.length === 0) return [];
    await this.ensureHost();
    const report: RecoveredNode[] = [];
    for (const record of records) {
      const engineWasRunning = !!record.dockerd && isProcessAlive(record.dockerd);
      if (record.terminating) {
        await this.terminateNode(record.nodeId);
        report.push({ nodeId: record.nodeId, engineWasRunning, started: false, terminated: true });
        continue;
      }
      let started = false;
      if (!engineWasRunning && options.startEngines !== false) {
        await this.startEngine(record.nodeId);
        started = true;
      }
      report.push({ nodeId: record.nodeId, engineWasRunning, started, terminated: false });
    }
    return report;
  }
}
