// Nodes: the provisioners (local engines, simulated providers, attached and agent engines), the
// engines of nodes, probes and the health watcher, node clusters; their action kinds, relations
// and routes (nodes, registration tokens, agents).
import path from "node:path";
import type { ActionEngine } from "../actions/engine.ts";
import type { Relations } from "../actions/relations.ts";
import { AgentBundle } from "../agent/bundle.ts";
import { agentRoutes } from "../api/routes/agents.ts";
import { nodeRoutes } from "../api/routes/nodes.ts";
import { tokenRoutes } from "../api/routes/tokens.ts";
import { Catalogue } from "../catalogue/catalogue.ts";
import type { Core, Routes } from "../composition.ts";
import { lastSegment } from "../domain/uri.ts";
import type { Engine } from "../drivers/engine.ts";
import { FakeEngine, type FakeEngineOptions } from "../drivers/fake/index.ts";
import { SyncedFakeEngine } from "../drivers/fake/synced.ts";
import { LocalProvider } from "../drivers/local/index.ts";
import { TunnelHub } from "../drivers/tunnel/hub.ts";
import type { NamespacePolicies } from "../identity/privileges.ts";
import type { ReplicasModule } from "../ops/module.ts";
import { registerNodeActionKinds } from "./action-kinds.ts";
import { AgentNodes, ByonProvisioner } from "./agents.ts";
import { AttachedEngines } from "./attach.ts";
import { NodeClusters } from "./clusters.ts";
import { Engines, type FakeNodeFacts } from "./engines.ts";
import { HealthWatcher } from "./health.ts";
import { LocalProvisioner } from "./local.ts";
import { NodeProbe } from "./probe.ts";
import { AttachedProvisioner, type Provisioner, SimulatedProvisioner } from "./provisioners.ts";
import { SimulatedEngines } from "./simulated-engines.ts";
import { clusterUri, nodeUri } from "./views.ts";

export type NodesModule = ReturnType<typeof nodesModule>;

export function nodesModule(
  core: Core,
  parts: {
    actions: ActionEngine;
    relations: Relations;
    policies: NamespacePolicies;
    replicas: ReplicasModule;
    /** Replaces the engine of simulated nodes (tests). */
    makeFakeEngine?(node: FakeNodeFacts): Engine;
  },
) {
  const { config, store, clock, log, onError, metrics, box, answers } = core;
  const { actions, relations, policies, replicas } = parts;
  const local = new LocalProvider({
    stateDir: path.join(config.dataDir, "local-nodes"),
    labRange: config.nodes.localLabRange,
    bridgeName: config.nodes.localBridge,
    imagesToLoad: config.nodes.localNodeImages,
    insecureRegistries: core.insecureRegistries,
    usernsRemap: config.nodes.localUsernsRemap,
    // The engines' remapped roots pass through the data directory to their data-roots.
    traversableFrom: config.dataDir,
  });
  const localProvisioner = new LocalProvisioner(local);
  const catalogue = Catalogue.load(undefined, { local: () => localProvisioner.availability() });
  // A simulated node's engine has its node type's size and its own container subnet.
  let nodeTypes: ReturnType<Catalogue["listNodeTypes"]> | undefined;
  const simulatedOptions = (n: FakeNodeFacts): FakeEngineOptions => {
    nodeTypes ??= catalogue.listNodeTypes();
    const type = nodeTypes.find((t) => t.resource_uri === n.node_type);
    const data = type
      ? catalogue.providerData(lastSegment(type.provider)!)?.node_types.find((t) => t.name === type.name)
      : undefined;
    return {
      name: `sim-${n.uuid.slice(0, 8)}`,
      cpus: data?.cpu || 1,
      memoryMb: data?.memory_mb || 1024,
      subnet: `10.${128 + Math.floor(n.slot / 256)}.${n.slot % 256}.0/24`,
    };
  };
  const simulatedEngine = (n: FakeNodeFacts) => new FakeEngine(simulatedOptions(n));
  // Replicas on one PostgreSQL keep each simulated node's engine equal through the store.
  const sharedSimulated =
    store.dialect === "postgres" && !parts.makeFakeEngine
      ? new SimulatedEngines(
          store,
          (n) => new SyncedFakeEngine(simulatedOptions(n)),
          onError("simulated engines"),
        )
      : undefined;
  const labPrefix = `tcp://${config.nodes.localLabRange.split(".").slice(0, 2).join(".")}.`;
  // Agent nodes' tunnels; `AgentNodes` listens to the hub for their state changes.
  const graceMs = config.nodes.unreachableGraceMs;
  const tunnels = new TunnelHub({
    pingIntervalMs: Math.max(200, Math.min(5000, Math.floor(graceMs / 3))),
    onError: onError("agent tunnel"),
  });
  tunnels.listen({
    changed: (uuid, connected, why) =>
      log.info(`node ${uuid}: agent tunnel ${connected ? "up" : "down"}: ${why}`),
  });
  const engines = new Engines(
    parts.makeFakeEngine ?? simulatedEngine,
    (sealed) => box.open(sealed),
    (url) => !url.startsWith(labPrefix) || local.listNodes().some((n) => n.engineUrl === url),
    tunnels,
    (_node, operation, seconds, ok) =>
      metrics.engineCalls.observe({ operation, result: ok ? "ok" : "error" }, seconds),
    sharedSimulated,
  );
  const nodeProbe = new NodeProbe({
    store,
    engines,
    clock,
    unreachableGraceMs: config.nodes.unreachableGraceMs,
    onUnreachable: (uuid, reason) => log.warn(`node ${uuid} is Unreachable: ${reason}`),
  });
  const agents = new AgentNodes({
    store,
    clock,
    actions,
    probe: nodeProbe,
    hub: tunnels,
    publicUrl: config.publicUrl,
    tokenTtlS: config.nodes.agentTokenTtlS,
    reconnectGraceMs: Math.max(100, Math.min(5000, Math.floor(graceMs / 2))),
    onError: onError("agent nodes"),
  });
  const provisioners: Record<string, Provisioner> = {
    local: localProvisioner,
    byon: new ByonProvisioner(new AttachedProvisioner(), agents),
  };
  for (const p of catalogue.listProviders()) {
    const data = catalogue.providerData(p.name)!;
    if (data.driver !== "sim") continue;
    provisioners[p.name] = new SimulatedProvisioner({
      provider: p.name,
      delaysMs: data.delays_ms ?? { deploy_node: 3000, terminate_node: 1500 },
      delayFactor: config.nodes.simDelayFactor,
      dropEngine: (uuid) => engines.dropFake(uuid),
    });
  }
  const clusters = new NodeClusters({ store, policies, probe: nodeProbe, catalogue, provisioners, clock });
  const attachedEngines = new AttachedEngines({
    store,
    policies,
    probe: nodeProbe,
    clock,
    sealSecret: (plain) => box.seal(plain),
  });
  registerNodeActionKinds(actions, { store, probe: nodeProbe, clusters, clock });
  relations.register("node", async (s, _uri, parsed) => {
    const n = await s.nodes.findNode(parsed.id);
    return n?.cluster_uuid ? [clusterUri({ namespace: n.namespace, uuid: n.cluster_uuid })] : [];
  });
  relations.register("nodecluster", async (s, _uri, parsed) =>
    (await s.nodes.nodesOfCluster(parsed.id)).map((n) => nodeUri(n)),
  );
  const health = new HealthWatcher({
    store,
    probe: nodeProbe,
    intervalMs: config.nodes.healthIntervalMs,
    duties: replicas.duties,
    onError: onError("node health watcher"),
  });
  replicas.onNodesChanged((gained) => void health.probeNow(gained));
  const routes: Routes = [
    (a) =>
      nodeRoutes(a, {
        store,
        actions,
        probe: nodeProbe,
        clusters,
        attachedEngines,
        allowUserEngines: config.nodes.allowUserEngines,
        containersOnNodes: (uuids, namespaces) =>
          store.services.countLiveContainersOnNodes(uuids, namespaces),
        answers,
      }),
    (a) => tokenRoutes(a, { agents }),
    (a) =>
      agentRoutes(a, {
        agents,
        hub: tunnels,
        clock,
        bundle: new AgentBundle(path.join(config.dataDir, "agent", "berth-agent.mjs")),
      }),
  ];
  return {
    local,
    catalogue,
    tunnels,
    engines,
    nodeProbe,
    agents,
    clusters,
    attachedEngines,
    health,
    routes,
    /** Writes what simulated engines changed and stops reading other replicas' (PostgreSQL). */
    async stopSimulated(): Promise<void> {
      await sharedSimulated?.stop();
    },
    /**
     * After a crash or a reboot, before any action resumes: finish interrupted node terminates,
     * re-create lost lab networking and start the engines that no longer run (those of a Berth
     * that was only killed keep running and are left alone).
     */
    async recover(): Promise<void> {
      await localProvisioner.refresh();
      if (localProvisioner.availability().available) {
        await local
          .recover()
          .catch((err: Error) => log.error(`local nodes: recovery failed: ${err.message}`));
      }
    },
  };
}
