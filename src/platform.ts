// Assembles Berth's parts from a Config: store → identity → actions → nodes → http.
// `main.ts` starts it as the server; tests assemble it on a temporary database.
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { LoginLimiter } from "./accounts/limiter.ts";
import { LogOutbox, type Outbox, SmtpOutbox } from "./accounts/outbox.ts";
import { AccountsService } from "./accounts/service.ts";
import { ActionEngine } from "./actions/engine.ts";
import { Relations } from "./actions/relations.ts";
import { type AppDeps, buildApp } from "./api/app.ts";
import { accountsRoutes } from "./api/routes/accounts.ts";
import { agentRoutes } from "./api/routes/agents.ts";
import { nodeRoutes } from "./api/routes/nodes.ts";
import { REGISTRY_WEBHOOK_PATH, registryRoutes } from "./api/routes/registries.ts";
import { serviceRoutes } from "./api/routes/services.ts";
import { stackRoutes } from "./api/routes/stacks.ts";
import { tokenRoutes } from "./api/routes/tokens.ts";
import { triggerRoutes } from "./api/routes/triggers.ts";
import { streamRoutes } from "./api/streams/index.ts";
import { Catalogue } from "./catalogue/catalogue.ts";
import type { Config } from "./config/index.ts";
import { type Clock, systemClock } from "./domain/time.ts";
import type { Engine } from "./drivers/engine.ts";
import { FakeEngine } from "./drivers/fake/index.ts";
import { LocalProvider } from "./drivers/local/index.ts";
import { TunnelHub } from "./drivers/tunnel/hub.ts";
import { SecretBox } from "./identity/secret-box.ts";
import { IdentityService } from "./identity/service.ts";
import { AgentNodes, ByonProvisioner } from "./nodes/agents.ts";
import { Engines, type FakeNodeFacts } from "./nodes/engines.ts";
import { HealthWatcher } from "./nodes/health.ts";
import { LocalProvisioner } from "./nodes/local.ts";
import { AttachedProvisioner, type Provisioner, SimulatedProvisioner } from "./nodes/provisioners.ts";
import { NodeService } from "./nodes/service.ts";
import { clusterUri, nodeUri } from "./nodes/views.ts";
import { AppChanges, containerUri, serviceUri, stackUri } from "./orchestrator/changes.ts";
import { ServiceManager } from "./orchestrator/manager.ts";
import { Reconciler } from "./orchestrator/reconciler.ts";
import { ContainerRuntime } from "./orchestrator/runtime.ts";
import { Orchestrator } from "./orchestrator/services.ts";
import { NativeRegistry } from "./registry/native.ts";
import type { HostLookup } from "./registry/outbound.ts";
import { RegistryService } from "./registry/service.ts";
import { StackService } from "./stacks/service.ts";
import { type Db, openDatabase } from "./store/db.ts";
import { migrateToLatest } from "./store/migrations.ts";
import { Store } from "./store/store.ts";
import { TriggerService } from "./triggers/service.ts";

export interface PlatformOptions {
  clock?: Clock;
  /** Registers extra action kinds and routes (test fixtures). */
  extend?(parts: {
    actions: ActionEngine;
    store: Store;
    relations: Relations;
    identity: IdentityService;
  }): Pick<AppDeps, "routes"> | undefined;
  /** Replaces the engine of simulated nodes (tests). */
  makeFakeEngine?(node: FakeNodeFacts): Engine;
  /** Replaces the mail outbox of confirmation messages (tests record them). */
  outbox?: Outbox;
  /** Replaces the resolver of registry hosts users name (tests: no outside DNS). */
  resolveRegistryHost?: HostLookup;
  /** Where the server log goes instead of stdout (tests read it). */
  logStream?: NodeJS.WritableStream;
}

export interface Platform {
  config: Config;
  db: Db;
  store: Store;
  identity: IdentityService;
  actions: ActionEngine;
  relations: Relations;
  catalogue: Catalogue;
  engines: Engines;
  local: LocalProvider;
  nodes: NodeService;
  /** Agent nodes: registration tokens, node keys, tunnel states. */
  agents: AgentNodes;
  /** Live agent tunnels, one per connected agent node. */
  tunnels: TunnelHub;
  health: HealthWatcher;
  runtime: ContainerRuntime;
  orchestrator: Orchestrator;
  services: ServiceManager;
  stacks: StackService;
  reconciler: Reconciler;
  registries: RegistryService;
  /** Berth's own registry, when configured. */
  nativeRegistry: NativeRegistry | undefined;
  triggers: TriggerService;
  app: FastifyInstance;
  /** Starts workers and watchers (not the listener). */
  start(): Promise<void>;
  close(): Promise<void>;
}

export async function assemblePlatform(config: Config, opts: PlatformOptions = {}): Promise<Platform> {
  const clock = opts.clock ?? systemClock;
  const db = openDatabase(config.databaseUrl);
  await migrateToLatest(db.kysely, db.dialect);
  const store = new Store(db.kysely, db.dialect);
  const identity = new IdentityService(store, clock);
  // Background workers report errors to the server log once the app (and its logger) exists.
  let log: FastifyInstance["log"] | undefined;
  const onError = (what: string) => (err: unknown) => log?.error({ err }, what);
  const actions = new ActionEngine({
    onError: onError("action worker"),
    store,
    clock,
    leaseMs: config.actionLeaseMs,
    stepTimeoutMs: config.actionStepTimeoutMs,
    pollMs: config.actionPollMs,
    maxAttempts: config.actionMaxAttempts,
  });
  const relations = new Relations();

  // Registries reached over plain HTTP, Berth's own included: engines of local nodes trust them too.
  const insecureRegistries = [
    ...new Set([
      ...config.registry.insecure,
      ...(config.registry.native ? [config.registry.native.host] : []),
    ]),
  ];
  const local = new LocalProvider({
    stateDir: path.join(config.dataDir, "local-nodes"),
    labRange: config.nodes.localLabRange,
    bridgeName: config.nodes.localBridge,
    imagesToLoad: config.nodes.localNodeImages,
    insecureRegistries,
  });
  const localProvisioner = new LocalProvisioner(local);
  const catalogue = Catalogue.load(undefined, { local: () => localProvisioner.availability() });
  // A simulated node's engine has its node type's size and its own container subnet.
  const simulatedEngine = (n: FakeNodeFacts) => {
    const type = catalogue.listNodeTypes().find((t) => t.resource_uri === n.node_type);
    const data = type
      ? catalogue.providerData(type.provider.split("/").at(-2)!)?.node_types.find((t) => t.name === type.name)
      : undefined;
    return new FakeEngine({
      name: `sim-${n.uuid.slice(0, 8)}`,
      cpus: data?.cpu || 1,
      memoryMb: data?.memory_mb || 1024,
      subnet: `10.${128 + Math.floor(n.slot / 256)}.${n.slot % 256}.0/24`,
    });
  };
  const box = SecretBox.open({ secret: config.secretKey, dataDir: config.dataDir });
  const labPrefix = `tcp://${config.nodes.localLabRange.split(".").slice(0, 2).join(".")}.`;
  // Agent nodes' tunnels; their state changes reach the node records through `agents` (late-bound).
  let agents: AgentNodes | undefined;
  const graceMs = config.nodes.unreachableGraceMs;
  const tunnels = new TunnelHub({
    pingIntervalMs: Math.max(200, Math.min(5000, Math.floor(graceMs / 3))),
    onChange: (uuid, connected) => agents?.tunnelChanged(uuid, connected),
    onMessage: (uuid, message) => agents?.agentSaid(uuid, message),
    onError: onError("agent tunnel"),
  });
  const engines = new Engines(
    opts.makeFakeEngine ?? simulatedEngine,
    (sealed) => box.open(sealed),
    (url) => !url.startsWith(labPrefix) || local.listNodes().some((n) => n.engineUrl === url),
    tunnels,
  );
  const provisioners: Record<string, Provisioner> = {
    local: localProvisioner,
    byon: new ByonProvisioner(new AttachedProvisioner(), () => agents!),
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
  const nodes = new NodeService({
    store,
    catalogue,
    provisioners,
    engines,
    clock,
    actions,
    unreachableGraceMs: config.nodes.unreachableGraceMs,
    sealSecret: (plain) => box.seal(plain),
  });
  nodes.register(actions);
  agents = new AgentNodes({
    store,
    clock,
    actions,
    nodes,
    hub: tunnels,
    publicUrl: config.publicUrl,
    tokenTtlS: config.nodes.agentTokenTtlS,
    reconnectGraceMs: Math.max(100, Math.min(5000, Math.floor(graceMs / 2))),
    onError: onError("agent nodes"),
  });
  const agentNodes = agents;
  relations.register("node", async (s, _uri, parsed) => {
    const n = await s.nodes.findNode(parsed.id);
    return n?.cluster_uuid ? [clusterUri({ namespace: n.namespace, uuid: n.cluster_uuid })] : [];
  });
  relations.register("nodecluster", async (s, _uri, parsed) =>
    (await s.nodes.nodesOfCluster(parsed.id)).map((n) => nodeUri(n)),
  );
  const health = new HealthWatcher({
    store,
    nodes,
    intervalMs: config.nodes.healthIntervalMs,
    onError: onError("node health watcher"),
  });

  const changes = new AppChanges(clock);
  const native = config.registry.native;
  const nativeRegistry = native
    ? new NativeRegistry({
        binary: native.binary,
        dataDir: native.dataDir,
        listen: native.listen,
        notifyUrl: `${config.publicUrl}${REGISTRY_WEBHOOK_PATH}`,
        log: { info: (line) => app.log.info(line), warn: (line) => app.log.warn(line) },
      })
    : undefined;
  const registries = new RegistryService({
    store,
    clock,
    box,
    actions,
    outbound: {
      allow: config.registry.allow,
      insecure: insecureRegistries,
      timeoutMs: config.registry.timeoutMs,
      lookup: opts.resolveRegistryHost,
    },
    nativeHost: native?.host,
    log: { warn: (line) => app.log.warn(line) },
  });
  // The runtime needs the manager (engine specs) and the manager the orchestrator: late-bound.
  let manager: ServiceManager | undefined;
  const runtime = new ContainerRuntime({
    store,
    engines,
    clock,
    changes,
    specFor: (c, o) => manager!.specFor(c, o),
    pullAuth: (image, namespace) => registries.pullAuth(image, namespace),
    refreshesOnRedeploy: (image, namespace) => registries.refreshesOnRedeploy(image, namespace),
    stopTimeoutS: config.containerStopTimeoutS,
  });
  const orchestrator = new Orchestrator({
    store,
    clock,
    changes,
    runtime,
    revokeServiceKey: (uuid) => store.deleteServiceApiKeys(uuid),
  });
  orchestrator.register(actions);
  manager = new ServiceManager({
    store,
    clock,
    changes,
    identity,
    box,
    orchestrator,
    publicUrl: config.publicUrl,
  });
  const services = manager;
  const stacks = new StackService({ store, clock, changes, services, orchestrator });
  stacks.register(actions);
  relations.register("stack", stacks.related);
  const triggers = new TriggerService({ store, clock, actions, changes, box, publicUrl: config.publicUrl });
  const reconciler = new Reconciler({
    onError: onError("reconciler"),
    store,
    clock,
    engines,
    runtime,
    orchestrator,
    actions,
    intervalMs: config.reconcileIntervalMs,
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

  const logins = new LoginLimiter(
    {
      maxFailuresPerUser: config.accounts.loginMaxFailuresPerUser,
      maxFailuresPerAddress: config.accounts.loginMaxFailuresPerAddress,
      windowS: config.accounts.loginWindowS,
    },
    clock,
  );
  const outbox =
    opts.outbox ??
    (config.accounts.smtpUrl
      ? new SmtpOutbox({ url: config.accounts.smtpUrl, from: config.accounts.mailFrom })
      : new LogOutbox((line) => app.log.info(line)));
  const accounts = new AccountsService({
    store,
    identity,
    clock,
    outbox,
    logins,
    publicUrl: config.publicUrl,
    tokenTtlS: config.accounts.tokenTtlS,
    emailTokenTtlS: config.accounts.emailTokenTtlS,
    verifyIntervalS: config.accounts.verifyIntervalS,
  });

  const extra = opts.extend?.({ actions, store, relations, identity }) ?? {};
  const app = await buildApp({
    store,
    identity,
    actions,
    relations,
    catalogue,
    publicUrl: config.publicUrl,
    logLevel: config.logLevel,
    logStream: opts.logStream,
    bearer: accounts,
    passwords: logins,
    routes: [
      (a) => accountsRoutes(a, { accounts, publicUrl: config.publicUrl }),
      (a) =>
        nodeRoutes(a, {
          store,
          identity,
          actions,
          nodes,
          allowUserEngines: config.nodes.allowUserEngines,
          containersOnNode: (uuid) => store.services.countLiveContainersOnNode(uuid),
        }),
      (a) => tokenRoutes(a, { identity, agents: agentNodes }),
      (a) => agentRoutes(a, { agents: agentNodes, hub: tunnels, clock }),
      (a) => serviceRoutes(a, { store, identity, actions, services }),
      (a) => stackRoutes(a, { store, identity, actions, stacks }),
      (a) => triggerRoutes(a, { store, identity, actions, triggers }),
      (a) => registryRoutes(a, { store, identity, registries, webhookToken: nativeRegistry?.token }),
      (a) => streamRoutes(a, { store, identity, engines, settings: config.streams }),
      ...(extra.routes ?? []),
    ],
  });
  log = app.log;

  return {
    config,
    db,
    store,
    identity,
    actions,
    relations,
    catalogue,
    engines,
    local,
    nodes,
    agents: agentNodes,
    tunnels,
    health,
    runtime,
    orchestrator,
    services,
    stacks,
    reconciler,
    registries,
    nativeRegistry,
    triggers,
    app,
    async start() {
      await localProvisioner.refresh();
      // After a crash or a reboot, before any action resumes: finish interrupted node terminates,
      // re-create lost lab networking and start the engines that no longer run (those of a Berth
      // that was only killed keep running and are left alone).
      if (localProvisioner.availability().available) {
        await local
          .recover()
          .catch((err: Error) => app.log.error(`local nodes: recovery failed: ${err.message}`));
      }
      actions.start();
      health.start();
      reconciler.start();
      stacks.start();
      await nativeRegistry?.start();
    },
    async close() {
      await nativeRegistry?.stop();
      reconciler.stop();
      stacks.stop();
      health.stop();
      agentNodes.stop();
      await actions.stop();
      tunnels.closeAll("Berth is shutting down");
      await app.close();
      await db.close();
    },
  };
}
