// The action kinds of node clusters and nodes, registered with the action engine: cluster deploy,
// scale and terminate (`nodecluster.*`), node terminate and engine upgrade (`node.*`). Each checks
// the state table and moves the object to its transitional state in `prepare`, runs the work of
// clusters.ts in its steps, and leaves a truthful state in `finish` whatever the outcome.
import type { ActionEngine } from "../actions/engine.ts";
import type { ActionKind } from "../actions/types.ts";
import {
  ClusterActionParams,
  type ClusterActionParams as ClusterParams,
  ClusterScaleParams,
  NodeActionParams,
  type NodeActionParams as NodeParams,
  type ClusterScaleParams as ScaleParams,
} from "../contract/action-params.ts";
import { conflict, forbidden, notFound } from "../domain/errors.ts";
import {
  assertAllowed,
  CLUSTER_OPERATIONS,
  type ClusterState,
  NODE_OPERATIONS,
  type NodeState,
} from "../domain/states.ts";
import type { Clock } from "../domain/time.ts";
import type { ClusterRow, NodeRow } from "../store/nodes.ts";
import type { Store } from "../store/store.ts";
import type { NodeClusters } from "./clusters.ts";
import type { NodeProbe } from "./probe.ts";

export interface NodeActionKindsOptions {
  store: Store;
  probe: NodeProbe;
  clusters: NodeClusters;
  clock: Clock;
}

/** Registers the five node and cluster action kinds with the action engine. */
export function registerNodeActionKinds(actions: ActionEngine, o: NodeActionKindsOptions): void {
  const kinds = [deploy(o), scale(o), terminateCluster(o), terminateNode(o), upgradeEngine(o)];
  for (const kind of kinds) actions.register(kind as ActionKind<unknown>);
}

async function getCluster(tx: Store, uuid: string): Promise<ClusterRow> {
  const c = await tx.nodes.findCluster(uuid);
  if (!c) throw notFound("node cluster");
  return c;
}

async function getNode(tx: Store, uuid: string): Promise<NodeRow> {
  const n = await tx.nodes.findNode(uuid);
  if (!n) throw notFound("node");
  return n;
}

const TEN_MINUTES_MS = 10 * 60_000;

function deploy({ clusters }: NodeActionKindsOptions): ActionKind<ClusterParams> {
  return {
    kind: "nodecluster.deploy",
    name: "Node Cluster Deploy",
    params: ClusterActionParams,
    prepare: async (tx, { cluster }) => {
      const c = await getCluster(tx, cluster);
      assertAllowed(CLUSTER_OPERATIONS, `node cluster ${c.name}`, c.state as ClusterState, "deploy");
      clusters.assertProviderAvailable(c.provider);
      const r = await tx.nodes.updateCluster(c, { state: "Deploying" });
      await clusters.addNodes(tx, r, r.target_num_nodes);
    },
    steps: [
      {
        name: "deploy nodes",
        timeoutMs: TEN_MINUTES_MS,
        run: (ctx) => clusters.deployPendingNodes(ctx, ctx.params.cluster),
      },
    ],
    finish: (ctx) => clusters.settle(ctx, ctx.params.cluster),
  };
}

function scale({ store, clusters }: NodeActionKindsOptions): ActionKind<ScaleParams> {
  return {
    kind: "nodecluster.scale",
    params: ClusterScaleParams,
    name: "Node Cluster Scale",
    prepare: async (tx, { cluster, target }) => {
      const c = await getCluster(tx, cluster);
      assertAllowed(CLUSTER_OPERATIONS, `node cluster ${c.name}`, c.state as ClusterState, "scale");
      const live = (await tx.nodes.nodesOfCluster(c.uuid)).filter((n) => n.state !== "Terminated").length;
      if (target > live) clusters.assertProviderAvailable(c.provider);
      await tx.quotas.enforce(c.namespace, "nodes", target - c.target_num_nodes, { now: Date.now() });
      await tx.nodes.updateCluster(c, { state: "Scaling", target_num_nodes: target });
    },
    steps: [
      {
        name: "add or remove nodes",
        timeoutMs: TEN_MINUTES_MS,
        run: async (ctx) => {
          const { target } = ctx.params;
          const c = await getCluster(store, ctx.params.cluster);
          const live = (await store.nodes.nodesOfCluster(c.uuid)).filter((n) => n.state !== "Terminated");
          if (live.length < target) {
            await ctx.log(`Adding ${target - live.length} node(s) to reach ${target}`);
            await store.transaction((tx) => clusters.addNodes(tx, c, target - live.length));
          } else if (live.length > target) {
            // Unreachable nodes go first, then the newest.
            const order = [...live].sort(
              (a, b) => Number(b.state === "Unreachable") - Number(a.state === "Unreachable") || b.id - a.id,
            );
            const doomed = order.slice(0, live.length - target);
            await ctx.log(`Removing ${doomed.length} node(s) to reach ${target}`);
            for (const n of doomed) {
              await store.mutate("node", n.uuid, () => ({ phase: "terminating" as const }));
              await clusters.terminateNode(ctx, n.uuid);
            }
          }
          await clusters.deployPendingNodes(ctx, c.uuid);
        },
      },
    ],
    finish: (ctx) => clusters.settle(ctx, ctx.params.cluster),
  };
}

function terminateCluster({ store, clusters, clock }: NodeActionKindsOptions): ActionKind<ClusterParams> {
  return {
    kind: "nodecluster.terminate",
    params: ClusterActionParams,
    name: "Node Cluster Terminate",
    prepare: async (tx, { cluster }) => {
      const c = await getCluster(tx, cluster);
      assertAllowed(CLUSTER_OPERATIONS, `node cluster ${c.name}`, c.state as ClusterState, "terminate");
      await tx.nodes.updateCluster(c, { state: "Terminating" });
      for (const n of await tx.nodes.nodesOfCluster(c.uuid)) {
        if (n.state === "Terminated") continue;
        await tx.nodes.updateNode(n, { phase: "terminating" });
      }
    },
    steps: [
      {
        name: "terminate nodes",
        timeoutMs: TEN_MINUTES_MS,
        run: async (ctx) => {
          for (const n of await store.nodes.nodesOfCluster(ctx.params.cluster)) {
            if (n.state !== "Terminated") await clusters.terminateNode(ctx, n.uuid);
          }
        },
      },
    ],
    finish: async (ctx, outcome) => {
      const nodes = await store.nodes.nodesOfCluster(ctx.params.cluster);
      if (outcome === "Success" && nodes.every((n) => n.state === "Terminated")) {
        const now = clock.now();
        await store.mutate("nodecluster", ctx.params.cluster, () => ({
          state: "Terminated",
          destroyed_at: now,
        }));
      } else {
        await clusters.settle(ctx, ctx.params.cluster);
      }
    },
  };
}

function terminateNode({ store, probe, clusters }: NodeActionKindsOptions): ActionKind<NodeParams> {
  return {
    kind: "node.terminate",
    params: NodeActionParams,
    name: "Node Terminate",
    prepare: async (tx, { node }) => {
      const n = await getNode(tx, node);
      assertAllowed(NODE_OPERATIONS, `node ${n.nickname || n.uuid}`, n.state as NodeState, "terminate");
      await tx.nodes.updateNode(n, { phase: "terminating" });
    },
    steps: [
      {
        name: "terminate node",
        timeoutMs: 5 * 60_000,
        run: (ctx) => clusters.terminateNode(ctx, ctx.params.node),
      },
    ],
    finish: async (ctx, outcome) => {
      const n = await store.nodes.findNode(ctx.params.node);
      if (!n) return;
      if (n.phase === "terminating" && n.destroyed_at === null) {
        // The terminate failed: its phase ends, and the node shows what a probe finds.
        await store.mutate("node", n.uuid, () => ({ phase: null }));
        await probe.probe(n.uuid, { immediate: true });
      }
      if (n.cluster_uuid) {
        if (outcome === "Success") {
          await store.mutate("nodecluster", n.cluster_uuid, (c) => ({
            target_num_nodes: Math.max(0, c.target_num_nodes - 1),
          }));
        }
        const c = await store.nodes.findCluster(n.cluster_uuid);
        if (c && !["Deploying", "Scaling", "Terminating", "Terminated", "Init"].includes(c.state)) {
          await clusters.settle(ctx, c.uuid);
        }
      }
    },
  };
}

function upgradeEngine({ store, probe, clusters }: NodeActionKindsOptions): ActionKind<NodeParams> {
  return {
    kind: "node.engine-upgrade",
    params: NodeActionParams,
    name: "Node Engine Upgrade",
    prepare: async (tx, { node }) => {
      const n = await getNode(tx, node);
      if (n.engine_url.startsWith("tunnel://")) {
        throw conflict(
          `The engine of node ${n.nickname || n.uuid} belongs to its host: the host's package manager installs and upgrades Docker there (for example apt-get install --only-upgrade docker-ce), the node shows the new version once Berth reaches the engine again.`,
          "engine_managed_by_host",
        );
      }
      assertAllowed(NODE_OPERATIONS, `node ${n.nickname || n.uuid}`, n.state as NodeState, "engine-upgrade");
      if (n.provider === "byon") {
        throw forbidden(
          "Berth did not start this engine, so it cannot upgrade it; upgrade it where it runs.",
          "not_managed",
        );
      }
      await tx.nodes.updateNode(n, { phase: "upgrading" });
    },
    steps: [
      {
        name: "restart the engine",
        timeoutMs: 3 * 60_000,
        run: async (ctx) => {
          const n = await getNode(store, ctx.params.node);
          await clusters.provisioner(n.provider).restartEngine({ node: n, log: ctx.log, signal: ctx.signal });
          const info = await probe.engineInfo(n);
          await ctx.log(`Engine ${info.engineVersion} answers again`);
        },
      },
    ],
    finish: async (ctx) => {
      await store.mutate("node", ctx.params.node, (n) =>
        n.phase === "upgrading" ? { phase: null } : undefined,
      );
      await probe.probe(ctx.params.node, { immediate: true });
    },
  };
}
