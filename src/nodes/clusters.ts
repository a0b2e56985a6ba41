// Node clusters: the create rules that need the catalogue (region, node type, disk and provider
// options per provider kind; the shapes and bounds are the route schema's, contract/nodes.ts),
// creating a cluster, and the work its operations do on nodes through the provisioners: adding
// node rows, deploying them, terminating one, and settling the cluster's state afterwards.
// The action kinds that run this work are in action-kinds.ts.
import { randomUUID } from "node:crypto";
import type { StepContext } from "../actions/types.ts";
import { type Catalogue, defaultDisk, type ProviderData } from "../catalogue/catalogue.ts";
import type { ProviderOptions } from "../contract/nodes.ts";
import { ApiError, conflict, invalidField } from "../domain/errors.ts";
import { type NodeState, settledClusterState } from "../domain/states.ts";
import type { Clock } from "../domain/time.ts";
import { canonicalUri, uriSegments } from "../domain/uri.ts";
import type { NamespacePolicies } from "../identity/privileges.ts";
import type { ClusterRow } from "../store/nodes.ts";
import type { Store } from "../store/store.ts";
import { engineFields, type NodeProbe } from "./probe.ts";
import type { Provisioner } from "./provisioners.ts";
import { newNodeRow, tagNames } from "./records.ts";

export interface ClusterInput {
  name: string;
  node_type: string;
  region: string;
  disk?: number;
  nickname?: string;
  target_num_nodes?: number;
  tags?: ({ name: string } | string)[];
  provider_options?: ProviderOptions | null;
}

/** What an operation's work needs of its action step: the action log and the cancel signal. */
export type WorkContext = Pick<StepContext<unknown>, "log" | "signal">;

export interface NodeClustersOptions {
  store: Store;
  /** Provider `local` runs engines on the Berth host: only namespaces allowed `local_nodes` get them. */
  policies: NamespacePolicies;
  probe: NodeProbe;
  catalogue: Catalogue;
  provisioners: Record<string, Provisioner>;
  clock: Clock;
}

export class NodeClusters {
  constructor(private readonly o: NodeClustersOptions) {}

  private get store() {
    return this.o.store;
  }

  // ---- create ----------------------------------------------------------------------------------

  /** Checks a create body against the catalogue and the provider kind's rules. */
  validate(input: ClusterInput): { provider: ProviderData; disk: number | null; tags: string[] } {
    const { catalogue } = this.o;
    const region = catalogue.listRegions().find((r) => r.resource_uri === canonicalUri(input.region));
    if (!region) throw invalidField("region", "must be the resource URI of a region of the catalogue");
    const [, , , , providerName] = uriSegments(region.resource_uri);
    const provider = catalogue.providerData(providerName!);
    if (!provider) throw invalidField("region", "unknown provider");
    if (provider.name === "byon") {
      throw invalidField(
        "region",
        "engines of your own are attached with POST /api/infra/v1/node/, not deployed in clusters",
      );
    }
    const nodeType = canonicalUri(input.node_type);
    if (!catalogue.listNodeTypes().some((n) => n.resource_uri === nodeType)) {
      throw invalidField("node_type", "must be the resource URI of a node type of the catalogue");
    }
    if (!region.node_types.includes(nodeType)) {
      throw invalidField("node_type", `is not available in region ${region.name} of ${provider.name}`);
    }
    let disk: number | null = input.disk ?? null;
    if (provider.kind.disk === "none") {
      if (input.disk !== undefined) throw invalidField("disk", `cannot be set for provider ${provider.name}`);
    } else {
      disk = input.disk ?? defaultDisk(provider.kind);
      if (provider.kind.disk === "fixed" && (disk === null || !provider.kind.disk_sizes?.includes(disk))) {
        throw invalidField(
          "disk",
          `must be one of ${provider.kind.disk_sizes?.join(", ")} for provider ${provider.name}`,
        );
      }
    }
    if (input.provider_options && !provider.kind.provider_options) {
      throw invalidField("provider_options", `are not supported by provider ${provider.name}`);
    }
    if (!input.name.trim()) throw invalidField("name", "must not be empty");
    return { provider, disk, tags: tagNames(input.tags) };
  }

  async create(namespace: string, input: ClusterInput): Promise<ClusterRow> {
    const { provider, disk, tags } = this.validate(input);
    // Engines of provider local run as root on the Berth host, beside its data and secret key.
    if (provider.driver === "local") await this.o.policies.checkLocalNodes(namespace, "region");
    const now = this.o.clock.now();
    const name = input.name.trim();
    return this.store.transaction(async (tx) => {
      // Checked in the transaction that inserts: two creates of one name cannot both pass.
      if (await tx.nodes.findLiveClusterByName(namespace, name)) {
        throw conflict(`A node cluster named "${name}" already exists in ${namespace}.`, "name_taken");
      }
      await tx.quotas.enforce(namespace, "nodeclusters", 1, { now });
      await tx.quotas.enforce(namespace, "nodes", input.target_num_nodes ?? 1, { now });
      const c = await tx.nodes.insertCluster({
        uuid: randomUUID(),
        namespace,
        name,
        nickname: input.nickname ?? name,
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
      return c;
    });
  }

  /**
   * A cluster that grows (deploy, scale up) on provider local needs its namespace's `local_nodes`
   * now: a cluster made while the namespace was allowed gets no new node once it no longer is.
   */
  async checkGrowth(c: Pick<ClusterRow, "namespace" | "provider">): Promise<void> {
    if (this.o.catalogue.providerData(c.provider)?.driver === "local")
      await this.o.policies.checkLocalNodes(c.namespace, "region");
  }

  // ---- the work of cluster operations ------------------------------------------------------------

  provisioner(provider: string): Provisioner {
    const p = this.o.provisioners[provider];
    if (!p) throw new Error(`no provisioner for provider ${provider}`);
    return p;
  }

  /** Refuses an operation that needs new nodes from a provider that cannot deploy them now. */
  assertProviderAvailable(provider: string): void {
    const a = this.provisioner(provider).availability();
    if (!a.available) {
      throw new ApiError(
        "conflict",
        "provider_unavailable",
        `Provider ${provider} is not available: ${a.reason ?? "prerequisites missing"}.`,
      );
    }
  }

  /** Node rows for a cluster, in state Deploying, inside the caller's transaction. */
  async addNodes(tx: Store, c: ClusterRow, count: number): Promise<void> {
    const provider = this.o.catalogue.providerData(c.provider)!;
    const region = uriSegments(c.region)[5]!;
    const zones = provider.regions.find((r) => r.name === region)?.availability_zones ?? [];
    for (let i = 0; i < count; i++) {
      const slot = await tx.nodes.freeSlot(c.provider);
      const live = (await tx.nodes.nodesOfCluster(c.uuid)).filter((n) => n.state !== "Terminated").length;
      const zone = zones.length ? zones[live % zones.length]! : null;
      const row = newNodeRow({
        uuid: randomUUID(),
        namespace: c.namespace,
        cluster_uuid: c.uuid,
        provider: c.provider,
        region: c.region,
        node_type: c.node_type,
        availability_zone: zone ? `/api/infra/v1/az/${c.provider}/${region}/${zone}/` : null,
        phase: "deploying",
        disk: c.disk ?? 0,
        slot,
        tags: c.tags,
        created: this.o.clock.now(),
      });
      await tx.nodes.insertNode(row);
    }
  }

  /** Deploys every node of the cluster still Deploying; a node that fails is cleaned up and Terminated. */
  async deployPendingNodes(ctx: WorkContext, clusterUuid: string): Promise<void> {
    const nodes = (await this.store.nodes.nodesOfCluster(clusterUuid)).filter((n) => n.state === "Deploying");
    const failed: string[] = [];
    for (const node of nodes) {
      const prov = this.provisioner(node.provider);
      try {
        const p = await prov.deployNode({ node, log: ctx.log, signal: ctx.signal });
        const info = await this.o.probe.engineInfo({ ...node, engine_url: p.engine_url, engine_tls: null });
        const now = this.o.clock.now();
        await this.o.store.mutate("node", node.uuid, () => ({
          ...p,
          ...engineFields(info, now),
          // The deploy ends its phase with what it just saw: the engine answers.
          phase: null,
          observed: "reachable" as const,
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
        await this.terminateNode(ctx, node.uuid);
      }
    }
    // The operation did not do what was asked: the action ends Failed (the cluster's state, derived
    // afterwards, says Partly deployed or Empty cluster).
    if (failed.length)
      throw new Error(
        `${failed.length} of ${nodes.length} node${nodes.length === 1 ? "" : "s"} failed to deploy (${failed.join(", ")})`,
      );
  }

  /** Removes a node at its provider and marks it Terminated; a node already Terminated is left alone. */
  async terminateNode(ctx: WorkContext, uuid: string): Promise<void> {
    const node = await this.store.nodes.findNode(uuid);
    if (!node || node.state === "Terminated") return;
    await this.provisioner(node.provider).terminateNode({ node, log: ctx.log, signal: ctx.signal });
    const now = this.o.clock.now();
    await this.o.store.mutate("node", uuid, () => ({ phase: null, destroyed_at: now }));
    await ctx.log(`Node ${uuid} is Terminated`);
  }

  /**
   * After an operation ends: nodes left mid-way end their phase (and are probed again, or cleaned
   * up when they never got an engine), and the cluster is derived from them.
   */
  async settle(ctx: WorkContext, clusterUuid: string): Promise<void> {
    for (const n of await this.store.nodes.nodesOfCluster(clusterUuid)) {
      if (n.state === "Deploying" || n.state === "Terminating" || n.state === "Upgrading") {
        if (n.engine_url) {
          await this.o.store.mutate("node", n.uuid, () => ({ phase: null }));
          await this.o.probe.probe(n.uuid, { immediate: true });
        } else {
          await this.terminateNode(ctx, n.uuid).catch(async (err) => {
            await ctx.log(`Could not clean up node ${n.uuid}: ${String(err)}`);
          });
        }
      }
    }
    const nodes = await this.store.nodes.nodesOfCluster(clusterUuid);
    const now = this.o.clock.now();
    await this.o.store.mutate("nodecluster", clusterUuid, (c) => {
      const state = settledClusterState(
        nodes.map((n) => n.state as NodeState),
        c.target_num_nodes,
      );
      const anyDeployed = nodes.some((n) => n.state === "Deployed");
      return { state, ...(anyDeployed && c.deployed_at === null ? { deployed_at: now } : {}) };
    });
  }
}
