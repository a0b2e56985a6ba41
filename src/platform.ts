// Assembles Berth's parts from a Config: store → identity → actions → nodes → http.
// `main.ts` starts it as the server; tests assemble it on a temporary database.
import { randomBytes } from "node:crypto";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { AccessEnds } from "./accounts/access-ends.ts";
import { DatabaseCounters, LoginLimiter, MailLimiter, MemoryCounters } from "./accounts/limiter.ts";
import { LogOutbox, type Outbox, SmtpOutbox } from "./accounts/outbox.ts";
import { AccountsService } from "./accounts/service.ts";
import { SessionService } from "./accounts/sessions.ts";
import { ActionEngine } from "./actions/engine.ts";
import { Relations } from "./actions/relations.ts";
import { AgentBundle } from "./agent/bundle.ts";
import { AnswerCache } from "./api/answer-cache.ts";
import { type AppDeps, buildApp } from "./api/app.ts";
import { accessRoutes } from "./api/routes/access.ts";
import { accountsRoutes } from "./api/routes/accounts.ts";
import { agentRoutes } from "./api/routes/agents.ts";
import { namespaceRoutes } from "./api/routes/namespaces.ts";
import { nodeRoutes } from "./api/routes/nodes.ts";
import { opsRoutes, type Readiness } from "./api/routes/ops.ts";
import { REGISTRY_WEBHOOK_PATH, registryRoutes } from "./api/routes/registries.ts";
import { serviceRoutes } from "./api/routes/services.ts";
import { sessionRoutes } from "./api/routes/session.ts";
import { stackRoutes } from "./api/routes/stacks.ts";
import { tokenRoutes } from "./api/routes/tokens.ts";
import { triggerRoutes } from "./api/routes/triggers.ts";
import { streamRoutes } from "./api/streams/index.ts";
import { Catalogue } from "./catalogue/catalogue.ts";
import type { Config } from "./config/index.ts";
import { type Duties, SOLO_DUTIES } from "./domain/duties.ts";
import { type Clock, systemClock } from "./domain/time.ts";
import { containerUri, lastSegment, serviceUri, stackUri } from "./domain/uri.ts";
import type { Engine } from "./drivers/engine.ts";
import { FakeEngine } from "./drivers/fake/index.ts";
import { LocalProvider } from "./drivers/local/index.ts";
import { TunnelHub } from "./drivers/tunnel/hub.ts";
import { NamespacePolicies } from "./identity/privileges.ts";
import { SecretBox } from "./identity/secret-box.ts";
import { IdentityService } from "./identity/service.ts";
import { registerNodeActionKinds } from "./nodes/action-kinds.ts";
import { AgentNodes, ByonProvisioner } from "./nodes/agents.ts";
import { AttachedEngines } from "./nodes/attach.ts";
import { NodeClusters } from "./nodes/clusters.ts";
import { Engines, type FakeNodeFacts } from "./nodes/engines.ts";
import { HealthWatcher } from "./nodes/health.ts";
import { LocalProvisioner } from "./nodes/local.ts";
import { NodeProbe } from "./nodes/probe.ts";
import { AttachedProvisioner, type Provisioner, SimulatedProvisioner } from "./nodes/provisioners.ts";
import { clusterUri, nodeUri } from "./nodes/views.ts";
import { RESTORED_FACT } from "./ops/backup.ts";
import { Metrics } from "./ops/metrics.ts";
import { ReplicaCoordinator } from "./ops/replicas.ts";
import { adoptAfterRestore } from "./orchestrator/adoption.ts";
import { EngineContainerIO } from "./orchestrator/container-io.ts";
import { EngineSpecs } from "./orchestrator/engine-specs.ts";
import { ServiceManager } from "./orchestrator/manager.ts";
import { Reconciler } from "./orchestrator/reconciler.ts";
import { ContainerRuntime } from "./orchestrator/runtime.ts";
import { Orchestrator } from "./orchestrator/services.ts";
import { Views } from "./orchestrator/views.ts";
import { NativeRegistry } from "./registry/native.ts";
import type { HostLookup } from "./registry/outbound.ts";
import { RegistryService } from "./registry/service.ts";
import { StackService } from "./stacks/service.ts";
import { type Db, openDatabase } from "./store/db.ts";
import { ChangeListener } from "./store/listen.ts";
import { migrateToLatest } from "./store/migrations.ts";
import { explainDatabaseFailure } from "./store/open-errors.ts";
import { IDENTITY_CHANGE, Store } from "./store/store.ts";
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
  /** Check every answer against its route's response schema (tests). */
  checkAnswers?: boolean;
}

export interface Platform {
  config: Config;
  db: Db;
  store: Store;
  identity: IdentityService;
  /** Namespace privileges (what administrators allow a namespace's containers), cached. */
  policies: NamespacePolicies;
  actions: ActionEngine;
  relations: Relations;
  catalogue: Catalogue;
  engines: Engines;
  local: LocalProvider;
  /** Asks node engines who they are; records Deployed or Unreachable. */
  nodeProbe: NodeProbe;
  /** Node clusters: create rules and the work of their operations. */
  clusters: NodeClusters;
  /** Engines attached by address as nodes (byon). */
  attachedEngines: AttachedEngines;
  /** Agent nodes: registration tokens, node keys, tunnel states. */
  agents: AgentNodes;
  /** Live agent tunnels, one per connected agent node. */
  tunnels: TunnelHub;
  health: HealthWatcher;
  runtime: ContainerRuntime;
  orchestrator: Orchestrator;
  services: ServiceManager;
  /** The wire views of services and containers. */
  views: Views;
  /** Rendered GET answers, checked against the change feed on every request. */
  answers: AnswerCache;
  stacks: StackService;
  reconciler: Reconciler;
  registries: RegistryService;
  /** Berth's own registry, when configured. */
  nativeRegistry: NativeRegistry | undefined;
  triggers: TriggerService;
  /** This process's name among replicas (logs, leases, metrics). */
  replicaId: string;
  /** Leases on nodes and jobs shared with other replicas (PostgreSQL only). */
  coordinator: ReplicaCoordinator | undefined;
  /** Other replicas' commit notifications (PostgreSQL only); readers poll while it is not connected. */
  listener: ChangeListener | undefined;
  metrics: Metrics;
  app: FastifyInstance;
  /** Database reachable, migrations done, workers running. */
  readiness(): Promise<Readiness>;
  /** Starts workers and watchers (not the listener). */
  start(): Promise<void>;
  /**
   * Stops: gives up leases on nodes and jobs, stops listening (streams close with 1001), lets
   * running actions finish for `graceMs` and releases the leases of those that did not.
   */
  close(opts?: { graceMs?: number }): Promise<void>;
}

/**
 * The database, opened and migrated; a failure says which database, which variable chose it and
 * what to change (store/open-errors.ts), not only the driver's words.
 */
async function openAtStart(config: Config): Promise<Db> {
  let db: Db | undefined;
  try {
    db = openDatabase(config.databaseUrl);
    await migrateToLatest(db.kysely, db.dialect);
    return db;
  } catch (error) {
    await db?.close().catch(() => undefined);
    throw explainDatabaseFailure(error, config.databaseUrl, config.databaseOrigin);
  }
}

export async function assemblePlatform(config: Config, opts: PlatformOptions = {}): Promise<Platform> {
  const clock = opts.clock ?? systemClock;
  const db = await openAtStart(config);
  const store = new Store(db.kysely, db.dialect, { clock });
  const replicaId = config.replicaId ?? `${os.hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
  store.setOrigin(replicaId);
  const metrics = new Metrics(replicaId);
  // Replicas share one PostgreSQL; SQLite is one process, which owns every duty.
  const replicated = db.dialect === "postgres";
  let coordinator: ReplicaCoordinator | undefined;
  const duties: Duties = {
    ownsNode: (uuid) => (coordinator ?? SOLO_DUTIES).ownsNode(uuid),
    leads: (job) => (coordinator ?? SOLO_DUTIES).leads(job),
  };
  let stopping = false;
  const identity = new IdentityService(store, clock);
  const policies = new NamespacePolicies(store);
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
    instanceId: replicaId,
    onEnded: (kind, outcome) => metrics.actionsEnded.inc({ kind, outcome }),
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
    usernsRemap: config.nodes.localUsernsRemap,
    // The engines' remapped roots pass through the data directory to their data-roots.
    traversableFrom: config.dataDir,
  });
  const localProvisioner = new LocalProvisioner(local);
  const catalogue = Catalogue.load(undefined, { local: () => localProvisioner.availability() });
  // A simulated node's engine has its node type's size and its own container subnet.
  let nodeTypes: ReturnType<Catalogue["listNodeTypes"]> | undefined;
  const simulatedEngine = (n: FakeNodeFacts) => {
    nodeTypes ??= catalogue.listNodeTypes();
    const type = nodeTypes.find((t) => t.resource_uri === n.node_type);
    const data = type
      ? catalogue.providerData(lastSegment(type.provider)!)?.node_types.find((t) => t.name === type.name)
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
  // Agent nodes' tunnels; `AgentNodes` listens to the hub for their state changes.
  const graceMs = config.nodes.unreachableGraceMs;
  const tunnels = new TunnelHub({
    pingIntervalMs: Math.max(200, Math.min(5000, Math.floor(graceMs / 3))),
    onError: onError("agent tunnel"),
  });
  tunnels.listen({
    changed: (uuid, connected, why) =>
      log?.info(`node ${uuid}: agent tunnel ${connected ? "up" : "down"}: ${why}`),
  });
  const engines = new Engines(
    opts.makeFakeEngine ?? simulatedEngine,
    (sealed) => box.open(sealed),
    (url) => !url.startsWith(labPrefix) || local.listNodes().some((n) => n.engineUrl === url),
    tunnels,
    (_node, operation, seconds, ok) =>
      metrics.engineCalls.observe({ operation, result: ok ? "ok" : "error" }, seconds),
  );
  const nodeProbe = new NodeProbe({
    store,
    engines,
    clock,
    unreachableGraceMs: config.nodes.unreachableGraceMs,
    onUnreachable: (uuid, reason) => log?.warn(`node ${uuid} is Unreachable: ${reason}`),
  });
  const agentNodes = new AgentNodes({
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
    byon: new ByonProvisioner(new AttachedProvisioner(), agentNodes),
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
  const clusters = new NodeClusters({
    store,
    policies,
    probe: nodeProbe,
    catalogue,
    provisioners,
    clock,
  });
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
    duties,
    onError: onError("node health watcher"),
  });

  const native = config.registry.native;
  const nativeRegistry = native
    ? new NativeRegistry({
        binary: native.binary,
        dataDir: native.dataDir,
        listen: native.listen,
        notifyUrl: `${config.publicUrl}${REGISTRY_WEBHOOK_PATH}`,
        // Any replica may receive the registry's notifications: they all derive the same token.
        token: replicated ? box.derive("native-registry-webhook") : undefined,
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
  });
  const orchestrator = new Orchestrator({
    store,
    clock,
    runtime,
    revokeServiceKey: (uuid) => identity.revokeServiceKeys(uuid),
    linkWaitMs: config.linkWaitS * 1000,
  });
  orchestrator.register(actions);
  const services = new ServiceManager({
    store,
    clock,
    identity,
    policies,
    box,
    orchestrator,
  });
  const views = new Views({ store, publicUrl: config.publicUrl });
  const answers = new AnswerCache(store);
  // The stack follower's poll only covers other replicas' commits: rare on SQLite, where there are none.
  const stacks = new StackService({
    store,
    clock,
    services,
    orchestrator,
    pollMs: replicated ? 2000 : 30_000,
  });
  stacks.register(actions);
  relations.register("stack", stacks.related);
  const triggers = new TriggerService({ store, clock, actions, box, publicUrl: config.publicUrl });
  const reconciler = new Reconciler({
    onError: onError("reconciler"),
    store,
    clock,
    engines,
    runtime,
    orchestrator,
    actions,
    intervalMs: config.reconcileIntervalMs,
    duties,
    onPass: (at) => {
      void store.replicas.putFact("reconcile_pass_at", String(at)).catch(onError("reconciler"));
    },
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

  // Replicas share their counters, so that the limits hold whichever replica a request reaches.
  const counters = replicated ? new DatabaseCounters(store) : new MemoryCounters();
  const logins = new LoginLimiter(
    {
      maxFailuresPerUser: config.accounts.loginMaxFailuresPerUser,
      maxFailuresPerAddress: config.accounts.loginMaxFailuresPerAddress,
      windowS: config.accounts.loginWindowS,
    },
    clock,
    counters,
  );
  const mails = new MailLimiter(
    {
      maxPerUser: config.accounts.verifyMaxPerUser,
      maxPerAddress: config.accounts.verifyMaxPerAddress,
      windowS: 3600,
    },
    clock,
    counters,
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
    mails,
    publicUrl: config.publicUrl,
    tokenTtlS: config.accounts.tokenTtlS,
    emailTokenTtlS: config.accounts.emailTokenTtlS,
    verifyIntervalS: config.accounts.verifyIntervalS,
    maxUnverifiedEmails: config.accounts.maxUnverifiedEmails,
  });

  if (replicated) {
    coordinator = new ReplicaCoordinator({
      store,
      clock,
      replicaId,
      leaseMs: config.replicaLeaseMs,
      nodesToWatch: async () =>
        (await store.nodes.liveNodes())
          .filter((n) => (n.state === "Deployed" || n.state === "Unreachable") && n.engine_url)
          .map((n) => n.uuid),
      onNodesChanged: (gained) => {
        if (stopping) return;
        log?.info({ nodes: gained }, "replicas: took over node watchers");
        void reconciler.nodesChanged(gained);
        void health.probeNow(gained);
      },
      onLeadChanged: (job, leading) => {
        log?.info(`replicas: ${leading ? "leading" : "no longer leading"} ${job}`);
        if (job === "registry" && nativeRegistry) {
          const change = leading && !stopping ? nativeRegistry.start() : nativeRegistry.stop();
          void change.catch(onError("native registry"));
        }
        if (job === "reconcile" && leading && !stopping) void reconciler.resync();
      },
      onError: onError("replica heartbeat"),
    });
  }
  // A node that appears, goes or changes state gets (or loses) its owner without waiting a beat.
  store.onChange((type) => {
    if ((type === "node" || type === "") && coordinator && !stopping) void coordinator.tick();
  });
  const listener = replicated
    ? new ChangeListener({
        url: config.databaseUrl,
        origin: replicaId,
        onChange: (change) => {
          // Wakes this replica's feed readers, and its action workers on an action's change.
          store.announceRemoteChange(change.type);
          if (change.type && change.type !== IDENTITY_CHANGE)
            metrics.feedLag.observe(Math.max(0, Date.now() - change.datetimeMs) / 1000);
        },
        onError: (err) => log?.warn({ err }, "change notifications: connection lost; polling meanwhile"),
      })
    : undefined;
  // Password changes, deactivations, sign-out everywhere and ended memberships end what they held.
  const accessEnds = new AccessEnds({
    store,
    identity,
    logins,
    actions,
    rotateServiceKey: (uuid, owner) => services.rotateServiceKey(uuid, owner),
  });
  const sessions = new SessionService({
    store,
    identity,
    clock,
    logins,
    ttlS: config.accounts.sessionTtlS,
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
    checkAnswers: opts.checkAnswers,
    replicaId,
    bearer: accounts,
    passwords: logins,
    sessions,
    webDir: config.webDir,
    routes: [
      (a) =>
        sessionRoutes(a, {
          sessions,
          identity,
          secureCookies: config.publicUrl.startsWith("https:"),
          ttlS: config.accounts.sessionTtlS,
        }),
      (a) => accountsRoutes(a, { accounts, publicUrl: config.publicUrl }),
      (a) => namespaceRoutes(a, { identity, policies, store, clock }),
      (a) => accessRoutes(a, { access: accessEnds, publicUrl: config.publicUrl }),
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
      (a) => tokenRoutes(a, { agents: agentNodes }),
      (a) =>
        agentRoutes(a, {
          agents: agentNodes,
          hub: tunnels,
          clock,
          bundle: new AgentBundle(path.join(config.dataDir, "agent", "berth-agent.mjs")),
        }),
      (a) => serviceRoutes(a, { store, actions, services, views, answers }),
      (a) => stackRoutes(a, { store, actions, stacks, answers }),
      (a) => triggerRoutes(a, { store, actions, triggers }),
      (a) => registryRoutes(a, { store, registries, webhookToken: nativeRegistry?.token }),
      (a) =>
        streamRoutes(a, {
          store,
          identity,
          containers: new EngineContainerIO(store, engines),
          settings: config.streams,
          clock,
          // On SQLite no other process commits: in-process notifications announce every change.
          remoteChangesAnnounced: () => !replicated || (listener?.connected ?? false),
        }),
      (a) => opsRoutes(a, { replicaId, metrics, readiness }),
      ...(extra.routes ?? []),
    ],
  });
  log = app.log;

  async function readiness(): Promise<Readiness> {
    const checks: Record<string, string> = { migrations: "ok" };
    try {
      await withTimeout(store.ping(), 2000);
      checks.database = "ok";
    } catch (err) {
      checks.database = `unreachable: ${err instanceof Error ? err.message : String(err)}`;
    }
    if (stopping) checks.workers = "stopping";
    else if (!actions.running) checks.workers = "not started";
    else if (coordinator && !coordinator.healthy()) checks.workers = "no recent heartbeat in the database";
    else checks.workers = "ok";
    return { ready: Object.values(checks).every((v) => v === "ok"), checks };
  }
  metrics.attach({
    actionQueue: () => store.actions.actionQueue(),
    lastReconcilePass: async () => {
      const v = await store.replicas.findFact("reconcile_pass_at");
      return v === undefined ? undefined : Number(v);
    },
    openStreams: () => app.websocketServer?.clients.size ?? 0,
    ownedNodes: () => (coordinator ? coordinator.ownedNodes().length : 0),
    liveReplicas: () => (coordinator ? coordinator.liveReplicas().length : 1),
    now: () => clock.now(),
  });

  return {
    config,
    db,
    store,
    identity,
    policies,
    actions,
    relations,
    catalogue,
    engines,
    local,
    nodeProbe,
    clusters,
    attachedEngines,
    agents: agentNodes,
    tunnels,
    health,
    runtime,
    orchestrator,
    services,
    views,
    answers,
    stacks,
    reconciler,
    registries,
    nativeRegistry,
    triggers,
    replicaId,
    coordinator,
    listener,
    metrics,
    app,
    readiness,
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
      listener?.start();
      // Duties first: watchers and health checks then start on this replica's share of nodes.
      await coordinator?.start();
      // The first start after a restore (one replica takes the fact): the restored records take
      // back the containers still running on the nodes before anything acts on them.
      if ((await store.replicas.takeFact(RESTORED_FACT)) !== undefined) {
        const report = await adoptAfterRestore({ store, engines, runtime, orchestrator, actions });
        app.log.info({ adoption: report }, "restore: containers re-adopted");
      }
      actions.start();
      health.start();
      reconciler.start();
      stacks.start();
      if (!coordinator) await nativeRegistry?.start();
    },
    async close(closeOpts = {}) {
      stopping = true;
      await coordinator?.stop();
      await nativeRegistry?.stop();
      reconciler.stop();
      stacks.stop();
      health.stop();
      agentNodes.stop();
      await app.close();
      await actions.stop({ graceMs: closeOpts.graceMs });
      tunnels.closeAll("Berth is shutting down");
      await listener?.stop();
      await db.close();
    },
  };
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
