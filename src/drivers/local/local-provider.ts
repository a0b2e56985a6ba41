// The `local` node provider: each node is a real Docker engine on this host, in a network
// namespace of its own, reachable from the host at its address on the lab bridge.
//
// Every operation is an idempotent ensure step that can be repeated after a crash. Whatever is
// created is recorded (StateFiles) before it is created, and removal acts on those records only.
//
// The flows are split by concern: the host's links and routes (host-net.ts), node records
// (node-records.ts), the host lab (host-lab.ts), node networks and routes (node-network.ts) and
// terminating a node (terminate.ts); this class deploys nodes, runs their engines, recovers them.
import { rmSync } from "node:fs";
import path from "node:path";
import { type LabPlan, planLab, shortNodeId } from "./addresses.ts";
import { type CommandRunner, createCommandRunner } from "./commands.ts";
import {
  clearStaleContainerdPidFile,
  engineClient,
  pidFileProcess,
  spawnEngine,
  waitForEngine,
} from "./engine.ts";
import { ensureHost, teardownHost } from "./host-lab.ts";
import { HostNet, KeyedMutex, LocalProviderError } from "./host-net.ts";
import { locateHostTools, searchPath } from "./host-tools.ts";
import { ensureBusyboxImage, loadArchive } from "./images.ts";
import { detectIptables, ensureRule, type IptablesRule } from "./iptables.ts";
import { ensureNodeNetwork, syncRoutes } from "./node-network.ts";
import {
  type DeployNodeOptions,
  describeNode,
  type LocalNode,
  type LocalProviderOptions,
  type Prerequisites,
  planRecord,
  type RecoveredNode,
  updateRecord,
  writeDaemonConfig,
} from "./node-records.ts";
import type { ProviderParts, Setup } from "./parts.ts";
import { isProcessAlive, killProcess, namespaceInode, stopProcess, waitForExit } from "./processes.ts";
import { type NodeRecord, StateFiles } from "./state.ts";
import { terminateNode } from "./terminate.ts";
import {
  ensureRemapUser,
  ensureTraversable,
  type RemapRange,
  RemapUnavailable,
  type UsernsRemapMode,
} from "./userns.ts";

export { LocalProviderError } from "./host-net.ts";
export type {
  DeployNodeOptions,
  LocalNode,
  LocalProviderOptions,
  Prerequisites,
  RecoveredNode,
} from "./node-records.ts";

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
  private readonly net: HostNet;
  /** What the flows in sibling modules share with this class. */
  private readonly parts: ProviderParts;

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
    this.net = new HostNet(this.commands, this.log);
    this.parts = {
      state: this.state,
      lab: this.lab,
      bridgeName: this.bridgeName,
      log: this.log,
      commands: this.commands,
      insecureRegistries: this.insecureRegistries,
      net: this.net,
      locks: this.locks,
      setup: () => this.setup(),
    };
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
  // ---------------------------------------------------------------- host (host-lab.ts)

  /** The host bridge with the host's address, the lab's unreachable route and forward rules. */
  ensureHost(): Promise<void> {
    return ensureHost(this.parts);
  }

  /** Removes the bridge, the forward rules and the unreachable route once no node is left. */
  teardownHost(): Promise<void> {
    return teardownHost(this.parts);
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
    return describeNode(record);
  }

  private getRecord(nodeId: string): NodeRecord {
    const record = this.state.findNode(shortNodeId(nodeId));
    if (!record || record.nodeId !== nodeId) {
      throw new LocalProviderError(`no local node ${nodeId} is recorded`);
    }
    return record;
  }

  private update(record: NodeRecord, change: (fresh: NodeRecord) => void): NodeRecord {
    return updateRecord(this.state, record, change);
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
        record = planRecord(this.state, this.lab, options);
        // Names derived from the id must be free; anything already there is not ours.
        if (
          this.net.netnsExists(record.netnsName) ||
          (await this.net.linkExists(tools, record.hostVethName))
        ) {
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
    writeDaemonConfig(record, this.insecureRegistries);
  }

  private ensureNodeNetwork(initial: NodeRecord): Promise<NodeRecord> {
    return ensureNodeNetwork(this.parts, initial);
  }

  /**
   * Every node (and the host) gets a route to every other node's container subnet via that
   * node's address, so containers reach each other by private IP with their source kept.
   */
  syncRoutes(): Promise<void> {
    return syncRoutes(this.parts);
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

  // ---------------------------------------------------------------- terminate (terminate.ts)

  /** Removes everything of the node: containers, processes, namespace, link, routes, rules, files. */
  terminateNode(nodeId: string): Promise<void> {
    return terminateNode(this.parts, nodeId);
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
