// Node clusters and nodes: creation rules, the asynchronous operations as action kinds, probing
// engines, and attaching existing engines. State tables live in domain/states.ts.
import { randomUUID } from "node:crypto";
import type { ActionEngine, ActionKind, StepContext } from "../actions/engine.ts";
import type { Catalogue, ProviderData } from "../catalogue/catalogue.ts";
import { ApiError, conflict, forbidden, invalidField, notFound } from "../domain/errors.ts";
import {
  assertAllowed,
  CLUSTER_OPERATIONS,
  type ClusterState,
  NODE_OPERATIONS,
  type NodeState,
  settledClusterState,
} from "../domain/states.ts";
import type { Clock } from "../domain/time.ts";
import { canonicalUri, uriSegments } from "../domain/uri.ts";
import type { EngineInfo } from "../drivers/engine.ts";
import type { ClusterRow, NewNode, NodeRow } from "../store/nodes.ts";
import type { Store } from "../store/store.ts";
import type { EngineAddress, EngineSource, Provisioner } from "./provisioners.ts";
import { clusterUri, nodeUri } from "./views.ts";

export interface NodeServiceOptions {
  store: Store;
  catalogue: Catalogue;
  provisioners: Record<string, Provisioner>;
  engines: EngineSource;
  clock: Clock;
  actions: ActionEngine;
  /** A node whose engine has not answered for this long becomes Unreachable. */
  unreachableGraceMs: number;
  probeTimeoutMs?: number;
  /** Seals secrets at rest (the TLS key of an attached engine). */
  sealSecret?: (plain: string) => string;
}

export interface ClusterInput {
  name: string;
  node_type: string;
  region: string;
  disk?: number;
  nickname?: string;
  target_num_nodes?: number;
  tags?: ({ name: string } | string)[];
  provider_options?: Record<string, unknown> | null;
}

const MAX_NODES_PER_CLUSTER = 100;

export function tagNames(tags: ({ name: string } | string)[] | undefined, field = "tags"): string[] {
  const names = (tags ?? []).map((t, i) => {
    const name = typeof t === "string" ? t : t?.name;
    if (typeof name !== "string" || name.trim() === "")
      throw invalidField(`${field}[${i}].name`, "must be a non-empty string");
    return name.trim();
  });
  return [...new Set(names)];
}

export class NodeService {
  /**
   * Silence counts only while this process could hear it: after Berth itself was down (a restart,
   * a restore), a node's `last_seen` is old through no fault of its own.
   */
  private readonly listeningSince: number;

  constructor(private readonly o: NodeServiceOptions) {
    this.listeningSince = o.clock.now();
  }

  private get store() {
    return this.o.store;
  }

  provisioner(provider: string): Provisioner {
    const p = this.o.provisioners[provider];
    if (!p) throw new Error(`no provisioner for provider ${provider}`);
    return p;
  }

  // ---- changes ---------------------------------------------------------------------------------

  async emitCluster(tx: Store, c: ClusterRow, action: "create" | "update" | "delete" = "update") {
    await tx.appendChange({
      namespace: c.namespace,
      type: "nodecluster",
      action,
      resource_uri: clusterUri(c),
      state: c.state,
      parents: "[]",
      datetime: this.o.clock.now(),
    });
  }

  async emitNode(tx: Store, n: NodeRow, action: "create" | "update" | "delete" = "update") {
    await tx.appendChange({
      namespace: n.namespace,
      type: "node",
      action,
      resource_uri: nodeUri(n),
      state: n.state,
      parents: JSON.stringify(
        n.cluster_uuid ? [clusterUri({ namespace: n.namespace, uuid: n.cluster_uuid })] : [],
      ),
      datetime: this.o.clock.now(),
    });
  }

  /** Applies a patch to a node, re-reading on version conflicts, and emits the change. */
  async patchNode(
    uuid: string,
    patch: (n: NodeRow) => Partial<NodeRow> | undefined,
  ): Promise<NodeRow | undefined> {
    return this.store.mutate({
      read: (store) => store.nodes.findNode(uuid),
      change: patch,
      write: (tx, n, p) => tx.nodes.updateNode(n, p),
      after: (tx, n, r) =>
        this.emitNode(tx, r, r.state === "Terminated" && n.state !== "Terminated" ? "delete" : "update"),
    });
  }

  async patchCluster(uuid: string, patch: (c: ClusterRow) => Partial<ClusterRow> | undefined) {
    return this.store.mutate({
      read: (store) => store.nodes.findCluster(uuid),
      change: patch,
      write: (tx, c, p) => tx.nodes.updateCluster(c, p),
      after: (tx, c, r) =>
        this.emitCluster(tx, r, r.state === "Terminated" && c.state !== "Terminated" ? "delete" : "update"),
    });
  }

  // ---- create ----------------------------------------------------------------------------------

  /** Validates a create body against the catalogue and the provider kind's rules. */
  validateCluster(input: ClusterInput): { provider: ProviderData; disk: number | null; tags: string[] } {
    const region = this.o.catalogue.listRegions().find((r) => r.resource_uri === canonicalUri(input.region));
    if (!region) throw invalidField("region", "must be the resource URI of a region of the catalogue");
    const [, , , , providerName] = uriSegments(region.resource_uri);
    const provider = this.o.catalogue.providerData(providerName!);
    if (!provider) throw invalidField("region", "unknown provider");
    if (provider.name === "byon") {
      throw invalidField(
        "region",
        "engines of your own are attached with POST /api/infra/v1/node/, not deployed in clusters",
      );
    }
    const nodeType = canonicalUri(input.node_type);
    if (!this.o.catalogue.listNodeTypes().some((n) => n.resource_uri === nodeType)) {
      throw invalidField("node_type", "must be the resource URI of a node type of the catalogue");
    }
    if (!region.node_types.includes(nodeType)) {
      throw invalidField("node_type", `is not available in region ${region.name} of ${provider.name}`);
    }
    let disk: number | null = input.disk ?? null;
    if (provider.kind.disk === "none") {
      if (input.disk !== undefined) throw invalidField("disk", `cannot be set for provider ${provider.name}`);
    } else {
      disk = input.disk ?? 60;
      if (provider.kind.disk === "fixed" && !provider.kind.disk_sizes?.includes(disk)) {
        throw invalidField(
          "disk",
          `must be one of ${provider.kind.disk_sizes?.join(", ")} for provider ${provider.name}`,
        );
      }
      if (disk < 1 || disk > 16384) throw invalidField("disk", "must be between 1 and 16384 GB");
    }
    const opts = input.provider_options;
    if (opts !== undefined && opts !== null) {
      if (!provider.kind.provider_options) {
        throw invalidField("provider_options", `are not supported by provider ${provider.name}`);
      }
      validateProviderOptions(opts);
    }
    const target = input.target_num_nodes ?? 1;
    if (target < 0 || target > MAX_NODES_PER_CLUSTER) {
      throw invalidField("target_num_nodes", `must be between 0 and ${MAX_NODES_PER_CLUSTER}`);
    }
    if (!input.name.trim()) throw invalidField("name", "must not be empty");
    return { provider, disk, tags: tagNames(input.tags) };
  }

  async createCluster(namespace: string, input: ClusterInput): Promise<ClusterRow> {
    const { provider, disk, tags } = this.validateCluster(input);
    return this.store.transaction(async (tx) => {
      const c = await tx.nodes.insertCluster({
        uuid: randomUUID(),
        namespace,
        name: input.name.trim(),
        nickname: input.nickname ?? input.name.trim(),
        state: "Init",
        provider: provider.name,
        region: canonicalUri(input.region),
        node_type: canonicalUri(input.node_type),
        disk,
        target_num_nodes: input.target_num_nodes ?? 1,
        tags: JSON.stringify(tags),
        provider_options: input.provider_options ? JSON.stringify(input.provider_options) : null,
        deployed_at: null,
        destroyed_at: null,
        created: this.o.clock.now(),
      });
      await this.emitCluster(tx, c, "create");
      return c;
    });
  }

  /** Node rows for a cluster, in state Deploying, inside the caller's transaction. */
  private async addNodeRows(tx: Store, c: ClusterRow, count: number): Promise<void> {
    const provider = this.o.catalogue.providerData(c.provider)!;
    const region = uriSegments(c.region)[5]!;
    const zones = provider.regions.find((r) => r.name === region)?.availability_zones ?? [];
    for (let i = 0; i < count; i++) {
      const uuid = randomUUID();
      const slot = await tx.nodes.freeSlot(c.provider);
      const live = (await tx.nodes.nodesOfCluster(c.uuid)).filter((n) => n.state !== "Terminated").length;
      const zone = zones.length ? zones[live % zones.length]! : null;
      const row: NewNode = {
        uuid,
        namespace: c.namespace,
        cluster_uuid: c.uuid,
        provider: c.provider,
        region: c.region,
        node_type: c.node_type,
        availability_zone: zone ? `/api/infra/v1/az/${c.provider}/${region}/${zone}/` : null,
        state: "Deploying",
        external_fqdn: `${uuid.slice(0, 8)}.${c.namespace}.node.berth.internal`,
        nickname: "",
        engine_url: "",
        engine_tls: null,
        engine_id: "",
        engine_execdriver: "",
        engine_graphdriver: "",
        engine_version: "",
        cpu: 0,
        memory: 0,
        disk: c.disk ?? 0,
        public_ip: "",
        tunnel: null,
        private_subnet: "",
        slot,
        last_seen: null,
        unreachable_since: null,
        deployed_at: null,
        destroyed_at: null,
        tags: c.tags,
        created: this.o.clock.now(),
      };
      row.nickname = row.external_fqdn;
      const n = await tx.nodes.insertNode(row);
      await this.emitNode(tx, n, "create");
    }
  }

  // ---- engines ---------------------------------------------------------------------------------

  /** Asks the node's engine who it is, within the probe timeout. */
  async engineInfo(node: EngineAddress): Promise<EngineInfo> {
    const engine = this.o.engines.forNode(node);
    const timeoutMs = this.o.probeTimeoutMs ?? 4000;
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        engine.info(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  static engineFields(info: EngineInfo, now: number): Partial<NodeRow> {
    return {
      engine_id: info.id,
      engine_version: info.engineVersion,
      engine_graphdriver: info.storageDriver,
      engine_execdriver: info.execDriver,
      cpu: info.cpus,
      memory: info.memoryMb,
      ...(info.diskGb !== undefined ? { disk: info.diskGb } : {}),
      last_seen: now,
      unreachable_since: null,
    };
  }

  /**
   * Probes a node and records what it found: Deployed with fresh engine facts when the engine
   * answers, Unreachable otherwise (at once when `immediate`, else after the grace period).
   */
  async probe(uuid: string, opts: { immediate: boolean }): Promise<NodeRow | undefined> {
    const node = await this.store.nodes.findNode(uuid);
    if (!node?.engine_url) return node;
    const now = this.o.clock.now();
    // An agent's node is Deploying until Berth first reaches its engine through the tunnel.
    const joining = (n: NodeRow) => n.state === "Deploying" && n.engine_url.startsWith("tunnel://");
    try {
      const info = await this.engineInfo(node);
      return this.patchNode(uuid, (n) => {
        if (n.state !== "Deployed" && n.state !== "Unreachable" && !joining(n)) return undefined;
        return {
          ...NodeService.engineFields(info, now),
          state: "Deployed",
          ...(n.deployed_at === null ? { deployed_at: now } : {}),
        };
      });
    } catch {
      return this.patchNode(uuid, (n) => {
        if (n.state === "Unreachable") return undefined;
        if (n.state !== "Deployed" && !joining(n)) return undefined;
        const since = n.unreachable_since ?? now;
        const silentSince = Math.max(n.last_seen ?? since, this.listeningSince);
        const lapsed = opts.immediate || now - silentSince >= this.o.unreachableGraceMs;
        return lapsed ? { state: "Unreachable", unreachable_since: since } : { unreachable_since: since };
      });
    }
  }

  // ---- attach (bring your own engine) ------------------------------------------------------------

  async attachEngine(
    namespace: string,
    input: {
      engine_url: string;
      tls?: { ca: string; cert: string; key: string };
      nickname?: string;
      tags?: ({ name: string } | string)[];
    },
  ): Promise<NodeRow> {
    if (!/^(unix:\/\/\/|tcp:\/\/)/.test(input.engine_url)) {
      throw invalidField("engine_url", "must be unix:///path/to/docker.sock or tcp://host:port");
    }
    const tags = tagNames(input.tags);
    const tlsJson = input.tls ? (this.o.sealSecret ?? ((x: string) => x))(JSON.stringify(input.tls)) : null;
    const uuid = randomUUID();
    let info: EngineInfo;
    try {
      info = await this.engineInfo({ uuid, engine_url: input.engine_url, engine_tls: tlsJson });
    } catch (err) {
      throw invalidField(
        "engine_url",
        `no Docker engine answered there: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    const existing = (await this.store.nodes.liveNodes()).find((n) => n.engine_id === info.id);
    if (existing) throw conflict("That engine is already attached as a node.", "engine_already_attached");
    const now = this.o.clock.now();
    const host = input.engine_url.startsWith("tcp://")
      ? new URL(input.engine_url.replace(/^tcp/, "http")).hostname
      : "127.0.0.1";
    return this.store.transaction(async (tx) => {
      const fqdn = `${uuid.slice(0, 8)}.${namespace}.node.berth.internal`;
      const n = await tx.nodes.insertNode({
        uuid,
        namespace,
        cluster_uuid: null,
        provider: "byon",
        region: "/api/infra/v1/region/byon/byon/",
        node_type: "/api/infra/v1/nodetype/byon/byon/",
        availability_zone: null,
        state: "Deployed",
        external_fqdn: fqdn,
        nickname: input.nickname ?? info.name ?? fqdn,
        engine_url: input.engine_url,
        engine_tls: tlsJson,
        engine_id: "",
        engine_execdriver: "",
        engine_graphdriver: "",
        engine_version: "",
        cpu: 0,
        memory: 0,
        disk: 0,
        public_ip: host,
        tunnel: null,
        private_subnet: "",
        slot: 0,
        last_seen: now,
        unreachable_since: null,
        deployed_at: now,
        destroyed_at: null,
        tags: JSON.stringify(tags),
        created: now,
        ...NodeService.engineFields(info, now),
      } as Parameters<typeof tx.nodes.insertNode>[0]);
      await this.emitNode(tx, n, "create");
      return n;
    });
  }

  // ---- action kinds ------------------------------------------------------------------------------

  register(actions: ActionEngine): void {
    for (const kind of [
      this.deployKind(),
      this.scaleKind(),
      this.terminateClusterKind(),
      this.terminateNodeKind(),
      this.upgradeKind(),
    ]) {
      actions.register(kind as ActionKind<unknown>);
    }
  }

  private async requireCluster(tx: Store, uuid: string): Promise<ClusterRow> {
    const c = await tx.nodes.findCluster(uuid);
    if (!c) throw notFound("node cluster");
    return c;
  }

  private async requireNode(tx: Store, uuid: string): Promise<NodeRow> {
    const n = await tx.nodes.findNode(uuid);
    if (!n) throw notFound("node");
    return n;
  }

  private assertProviderAvailable(provider: string): void {
    const a = this.provisioner(provider).availability();
    if (!a.available) {
      throw new ApiError(
        "conflict",
        "provider_unavailable",
        `Provider ${provider} is not available: ${a.reason ?? "prerequisites missing"}.`,
      );
    }
  }

  /** Deploys every node of the cluster still Deploying; a node that fails is cleaned up and Terminated. */
  private async deployPendingNodes(ctx: StepContext<unknown>, clusterUuid: string): Promise<void> {
    const nodes = (await this.store.nodes.nodesOfCluster(clusterUuid)).filter((n) => n.state === "Deploying");
    const failed: string[] = [];
    for (const node of nodes) {
      const prov = this.provisioner(node.provider);
      try {
        const p = await prov.deployNode({ node, log: ctx.log, signal: ctx.signal });
        const info = await this.engineInfo({ ...node, engine_url: p.engine_url, engine_tls: null });
        const now = this.o.clock.now();
        await this.patchNode(node.uuid, () => ({
          ...p,
          ...NodeService.engineFields(info, now),
          state: "Deployed",
          deployed_at: now,
        }));
        await ctx.log(
          `Node ${node.uuid} is Deployed (${info.cpus} CPU, ${info.memoryMb} MB, engine ${info.engineVersion})`,
        );
      } catch (err) {
        if (ctx.signal.aborted) throw err;
        await ctx.log(
          `Node ${node.uuid} failed to deploy: ${err instanceof Error ? err.message : String(err)}`,
        );
        failed.push(node.uuid);
        await this.terminateNodeWork(ctx, node.uuid);
      }
    }
    // The operation did not do what was asked: the action ends Failed (the cluster's state, derived
    // afterwards, says Partly deployed or Empty cluster).
    if (failed.length)
      throw new Error(
        `${failed.length} of ${nodes.length} node${nodes.length === 1 ? "" : "s"} failed to deploy (${failed.join(", ")})`,
      );
  }

  private async terminateNodeWork(ctx: StepContext<unknown>, uuid: string): Promise<void> {
    const node = await this.store.nodes.findNode(uuid);
    if (!node || node.state === "Terminated") return;
    await this.provisioner(node.provider).terminateNode({ node, log: ctx.log, signal: ctx.signal });
    const now = this.o.clock.now();
    await this.patchNode(uuid, () => ({ state: "Terminated", destroyed_at: now }));
    await ctx.log(`Node ${uuid} is Terminated`);
  }

  /** After an operation ends: nodes left mid-way get a truthful state, and the cluster is derived from them. */
  async settleCluster(ctx: StepContext<unknown>, clusterUuid: string): Promise<void> {
    for (const n of await this.store.nodes.nodesOfCluster(clusterUuid)) {
      if (n.state === "Deploying" || n.state === "Terminating" || n.state === "Upgrading") {
        if (n.engine_url) {
          await this.patchNode(n.uuid, () => ({ state: "Deployed" }));
          await this.probe(n.uuid, { immediate: true });
        } else {
          await this.terminateNodeWork(ctx, n.uuid).catch(async (err) => {
            await ctx.log(`Could not clean up node ${n.uuid}: ${String(err)}`);
          });
        }
      }
    }
    const nodes = await this.store.nodes.nodesOfCluster(clusterUuid);
    const now = this.o.clock.now();
    await this.patchCluster(clusterUuid, (c) => {
      const state = settledClusterState(
        nodes.map((n) => n.state as NodeState),
        c.target_num_nodes,
      );
      const anyDeployed = nodes.some((n) => n.state === "Deployed");
      return { state, ...(anyDeployed && c.deployed_at === null ? { deployed_at: now } : {}) };
    });
  }

  private deployKind(): ActionKind<{ cluster: string }> {
    return {
      kind: "nodecluster.deploy",
      name: "Node Cluster Deploy",
      prepare: async (tx, { cluster }) => {
        const c = await this.requireCluster(tx, cluster);
        assertAllowed(CLUSTER_OPERATIONS, `node cluster ${c.name}`, c.state as ClusterState, "deploy");
        this.assertProviderAvailable(c.provider);
        const r = await tx.nodes.updateCluster(c, { state: "Deploying" });
        await this.emitCluster(tx, r);
        await this.addNodeRows(tx, r, r.target_num_nodes);
      },
      steps: [
        {
          name: "deploy nodes",
          timeoutMs: 10 * 60_000,
          run: (ctx) => this.deployPendingNodes(ctx as StepContext<unknown>, ctx.params.cluster),
        },
      ],
      finish: (ctx) => this.settleCluster(ctx as StepContext<unknown>, ctx.params.cluster),
    };
  }

  private scaleKind(): ActionKind<{ cluster: string; target: number }> {
    return {
      kind: "nodecluster.scale",
      name: "Node Cluster Scale",
      prepare: async (tx, { cluster, target }) => {
        const c = await this.requireCluster(tx, cluster);
        assertAllowed(CLUSTER_OPERATIONS, `node cluster ${c.name}`, c.state as ClusterState, "scale");
        const live = (await tx.nodes.nodesOfCluster(c.uuid)).filter((n) => n.state !== "Terminated").length;
        if (target > live) this.assertProviderAvailable(c.provider);
        const r = await tx.nodes.updateCluster(c, { state: "Scaling", target_num_nodes: target });
        await this.emitCluster(tx, r);
      },
      steps: [
        {
          name: "add or remove nodes",
          timeoutMs: 10 * 60_000,
          run: async (ctx) => {
            const c = await this.requireCluster(this.store, ctx.params.cluster);
            const live = (await this.store.nodes.nodesOfCluster(c.uuid)).filter(
              (n) => n.state !== "Terminated",
            );
            if (live.length < ctx.params.target) {
              await ctx.log(
                `Adding ${ctx.params.target - live.length} node(s) to reach ${ctx.params.target}`,
              );
              await this.store.transaction((tx) => this.addNodeRows(tx, c, ctx.params.target - live.length));
            } else if (live.length > ctx.params.target) {
              // Unreachable nodes go first, then the newest.
              const order = [...live].sort(
                (a, b) =>
                  Number(b.state === "Unreachable") - Number(a.state === "Unreachable") || b.id - a.id,
              );
              const doomed = order.slice(0, live.length - ctx.params.target);
              await ctx.log(`Removing ${doomed.length} node(s) to reach ${ctx.params.target}`);
              for (const n of doomed) {
                await this.patchNode(n.uuid, () => ({ state: "Terminating" }));
                await this.terminateNodeWork(ctx as StepContext<unknown>, n.uuid);
              }
            }
            await this.deployPendingNodes(ctx as StepContext<unknown>, c.uuid);
          },
        },
      ],
      finish: (ctx) => this.settleCluster(ctx as StepContext<unknown>, ctx.params.cluster),
    };
  }

  private terminateClusterKind(): ActionKind<{ cluster: string }> {
    return {
      kind: "nodecluster.terminate",
      name: "Node Cluster Terminate",
      prepare: async (tx, { cluster }) => {
        const c = await this.requireCluster(tx, cluster);
        assertAllowed(CLUSTER_OPERATIONS, `node cluster ${c.name}`, c.state as ClusterState, "terminate");
        const r = await tx.nodes.updateCluster(c, { state: "Terminating" });
        await this.emitCluster(tx, r);
        for (const n of await tx.nodes.nodesOfCluster(c.uuid)) {
          if (n.state === "Terminated") continue;
          const m = await tx.nodes.updateNode(n, { state: "Terminating" });
          await this.emitNode(tx, m);
        }
      },
      steps: [
        {
          name: "terminate nodes",
          timeoutMs: 10 * 60_000,
          run: async (ctx) => {
            for (const n of await this.store.nodes.nodesOfCluster(ctx.params.cluster)) {
              if (n.state !== "Terminated") await this.terminateNodeWork(ctx as StepContext<unknown>, n.uuid);
            }
          },
        },
      ],
      finish: async (ctx, outcome) => {
        const nodes = await this.store.nodes.nodesOfCluster(ctx.params.cluster);
        if (outcome === "Success" && nodes.every((n) => n.state === "Terminated")) {
          const now = this.o.clock.now();
          await this.patchCluster(ctx.params.cluster, () => ({ state: "Terminated", destroyed_at: now }));
        } else {
          await this.settleCluster(ctx as StepContext<unknown>, ctx.params.cluster);
        }
      },
    };
  }

  private terminateNodeKind(): ActionKind<{ node: string }> {
    return {
      kind: "node.terminate",
      name: "Node Terminate",
      prepare: async (tx, { node }) => {
        const n = await this.requireNode(tx, node);
        assertAllowed(NODE_OPERATIONS, `node ${n.nickname || n.uuid}`, n.state as NodeState, "terminate");
        const r = await tx.nodes.updateNode(n, { state: "Terminating" });
        await this.emitNode(tx, r);
      },
      steps: [
        {
          name: "terminate node",
          timeoutMs: 5 * 60_000,
          run: (ctx) => this.terminateNodeWork(ctx as StepContext<unknown>, ctx.params.node),
        },
      ],
      finish: async (ctx, outcome) => {
        const n = await this.store.nodes.findNode(ctx.params.node);
        if (!n) return;
        if (n.state === "Terminating") {
          await this.patchNode(n.uuid, () => ({ state: "Deployed" }));
          await this.probe(n.uuid, { immediate: true });
        }
        if (n.cluster_uuid) {
          if (outcome === "Success") {
            await this.patchCluster(n.cluster_uuid, (c) => ({
              target_num_nodes: Math.max(0, c.target_num_nodes - 1),
            }));
          }
          const c = await this.store.nodes.findCluster(n.cluster_uuid);
          if (c && !["Deploying", "Scaling", "Terminating", "Terminated", "Init"].includes(c.state)) {
            await this.settleCluster(ctx as StepContext<unknown>, c.uuid);
          }
        }
      },
    };
  }

  private upgradeKind(): ActionKind<{ node: string }> {
    return {
      kind: "node.engine-upgrade",
      name: "Node Engine Upgrade",
      prepare: async (tx, { node }) => {
        const n = await this.requireNode(tx, node);
        if (n.engine_url.startsWith("tunnel://")) {
          throw conflict(
            `The engine of node ${n.nickname || n.uuid} belongs to its host: the host's package manager installs and upgrades Docker there (for example apt-get install --only-upgrade docker-ce), the node shows the new version once Berth reaches the engine again.`,
            "engine_managed_by_host",
          );
        }
        assertAllowed(
          NODE_OPERATIONS,
          `node ${n.nickname || n.uuid}`,
          n.state as NodeState,
          "engine-upgrade",
        );
        if (n.provider === "byon") {
          throw forbidden(
            "Berth did not start this engine, so it cannot upgrade it; upgrade it where it runs.",
            "not_managed",
          );
        }
        const r = await tx.nodes.updateNode(n, { state: "Upgrading" });
        await this.emitNode(tx, r);
      },
      steps: [
        {
          name: "restart the engine",
          timeoutMs: 3 * 60_000,
          run: async (ctx) => {
            const n = await this.requireNode(this.store, ctx.params.node);
            await this.provisioner(n.provider).restartEngine({ node: n, log: ctx.log, signal: ctx.signal });
            const info = await this.engineInfo(n);
            await ctx.log(`Engine ${info.engineVersion} answers again`);
          },
        },
      ],
      finish: async (ctx) => {
        await this.patchNode(ctx.params.node, (n) =>
          n.state === "Upgrading" ? { state: "Deployed" } : undefined,
        );
        await this.probe(ctx.params.node, { immediate: true });
      },
    };
  }
}

function validateProviderOptions(opts: Record<string, unknown>): void {
  for (const key of Object.keys(opts)) {
    if (key !== "vpc" && key !== "iam")
      throw invalidField(`provider_options.${key}`, "is not a known option (vpc, iam)");
  }
  const vpc = opts.vpc as Record<string, unknown> | undefined;
  if (vpc !== undefined) {
    if (typeof vpc !== "object" || vpc === null || Array.isArray(vpc))
      throw invalidField("provider_options.vpc", "must be an object");
    if (typeof vpc.id !== "string" || !vpc.id)
      throw invalidField("provider_options.vpc.id", "is required inside vpc");
    for (const k of ["subnets", "security_groups"] as const) {
      const v = vpc[k];
      if (v !== undefined && (!Array.isArray(v) || v.some((s) => typeof s !== "string"))) {
        throw invalidField(`provider_options.vpc.${k}`, "must be an array of strings");
      }
    }
    for (const k of Object.keys(vpc)) {
      if (!["id", "subnets", "security_groups"].includes(k))
        throw invalidField(`provider_options.vpc.${k}`, "is not a known option");
    }
  }
  const iam = opts.iam as Record<string, unknown> | undefined;
  if (iam !== undefined) {
    if (typeof iam !== "object" || iam === null || Array.isArray(iam))
      throw invalidField("provider_options.iam", "must be an object");
    if (typeof iam.instance_profile_name !== "string" || !iam.instance_profile_name) {
      throw invalidField("provider_options.iam.instance_profile_name", "is required inside iam");
    }
    for (const k of Object.keys(iam)) {
      if (k !== "instance_profile_name")
        throw invalidField(`provider_options.iam.${k}`, "is not a known option");
    }
  }
}
