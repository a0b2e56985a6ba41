// Services and containers: engine specs, the runtime, the orchestrator's action kinds, the service
// manager, views and the reconciler's controllers; their relations and routes.
import type { ActionEngine } from "../actions/engine.ts";
import type { Relations } from "../actions/relations.ts";
import { overviewRoutes } from "../api/routes/overview.ts";
import { serviceRoutes } from "../api/routes/services.ts";
import { unknownContainerRoutes } from "../api/routes/unknown-containers.ts";
import type { Core, Routes } from "../composition.ts";
import { containerUri, serviceUri, stackUri } from "../domain/uri.ts";
import type { NamespacePolicies } from "../identity/privileges.ts";
import type { IdentityService } from "../identity/service.ts";
import type { Engines } from "../nodes/engines.ts";
import type { ReplicasModule } from "../ops/module.ts";
import type { RegistryService } from "../registry/service.ts";
import type { ContainerRow } from "../store/services.ts";
import { Adoption } from "./adoption.ts";
import { EngineSpecs } from "./engine-specs.ts";
import { rollbackKind } from "./kinds/rollback.ts";
import { ServiceManager } from "./manager.ts";
import { Reconciler } from "./reconciler.ts";
import { ContainerRuntime } from "./runtime.ts";
import { Orchestrator } from "./services.ts";
import { Views } from "./views.ts";

export type OrchestratorModule = ReturnType<typeof orchestratorModule>;

export function orchestratorModule(
  core: Core,
  parts: {
    actions: ActionEngine;
    relations: Relations;
    identity: IdentityService;
    policies: NamespacePolicies;
    engines: Engines;
    registries: RegistryService;
    replicas: ReplicasModule;
    /** Takes leaving containers out of their routers first (router/drains.ts). */
    drain?(rows: readonly ContainerRow[]): Promise<void>;
    /** Keeps a start-first redeploy's old containers routed until their replacements are ready. */
    hold?(rows: readonly ContainerRow[]): Promise<void>;
    release?(rows: readonly ContainerRow[]): Promise<void>;
    /** A paused rollout's holds stay routed while it is paused (router/drains.ts pause). */
    pause?(containerUuids: readonly string[]): Promise<void>;
  },
) {
  const { config, store, clock, box, onError, answers } = core;
  const { actions, relations, identity, policies, engines, registries, replicas } = parts;
  const specs = new EngineSpecs({ store, box, publicUrl: config.publicUrl, policies });
  const runtime = new ContainerRuntime({
    store,
    engines,
    clock,
    specFor: (c, o) => specs.specFor(c, o),
    pullAuth: (image, namespace) => registries.pullAuth(image, namespace),
    refreshesOnRedeploy: (image, namespace) => registries.refreshesOnRedeploy(image, namespace),
    stopTimeoutS: config.containerStopTimeoutS,
    linkHostsFor: (c) => specs.desiredLinkHosts(c),
    drain: parts.drain,
    hold: parts.hold,
    release: parts.release,
    pause: parts.pause,
    readiness: { minUpMs: config.startMinUpMs, maxWaitMs: config.startMaxWaitMs },
  });
  const orchestrator = new Orchestrator({
    store,
    clock,
    runtime,
    revokeServiceKey: (uuid) => identity.revokeServiceKeys(uuid),
    linkWaitMs: config.linkWaitS * 1000,
    duties: replicas.duties,
  });
  orchestrator.register(actions);
  const services = new ServiceManager({
    store,
    clock,
    identity,
    policies,
    box,
    orchestrator,
    revisionsKept: config.serviceRevisionsKept,
  });
  actions.register(
    rollbackKind({ store, orchestrator, restore: (tx, s, rev) => services.restoreRevision(tx, s, rev) }),
  );
  const views = new Views({ store, publicUrl: config.publicUrl });
  const adoption = new Adoption({ store, engines, runtime, orchestrator, actions });
  const reconciler = new Reconciler({
    adoption,
    onError: onError("reconciler"),
    store,
    clock,
    engines,
    runtime,
    orchestrator,
    actions,
    intervalMs: config.reconcileIntervalMs,
    duties: replicas.duties,
    onPass: (at) => {
      void store.replicas.putFact("reconcile_pass_at", String(at)).catch(onError("reconciler"));
    },
  });
  replicas.onNodesChanged((gained) => void reconciler.nodesChanged(gained));
  replicas.onLeadChanged((job, leading) => {
    if (job === "reconcile" && leading && !replicas.stopping) void reconciler.resync();
  });
  relations.register("container", async (s, _uri, parsed) => {
    const c = await s.services.findContainer(parsed.id);
    if (!c) return [];
    const svc = await s.services.findService(c.service_uuid);
    return [
      serviceUri({ namespace: c.namespace, uuid: c.service_uuid }),
      ...(svc?.stack_uuid ? [stackUri(c.namespace, svc.stack_uuid)] : []),
    ];
  });
  relations.register("service", async (s, _uri, parsed) => {
    const svc = await s.services.findService(parsed.id);
    if (!svc) return [];
    const cs = await s.services.containersOfService(svc.uuid);
    return [...cs.map(containerUri), ...(svc.stack_uuid ? [stackUri(svc.namespace, svc.stack_uuid)] : [])];
  });
  const routes: Routes = [
    (a) => serviceRoutes(a, { store, actions, services, views, answers }),
    (a) => overviewRoutes(a, { store }),
    (a) => unknownContainerRoutes(a, { store, engines }),
  ];
  return {
    runtime,
    orchestrator,
    services,
    views,
    reconciler,
    routes,
    /** Re-adopts the containers still running on the nodes, once after a restore (ops/backup.ts). */
    adoptAfterRestore: () => adoption.afterRestore(),
  };
}
