// Assembles Berth from a Config, capability by capability: the log first, then the store, replicas,
// identity and actions, then each capability's module (src/<capability>/module.ts: its action
// kinds, relations, routes and lifecycle) in the order they need each other, then the HTTP app
// with every module's routes. `main.ts` starts it as the server; tests assemble it on a temporary
// database.
import { randomBytes } from "node:crypto";
import os from "node:os";
import type { FastifyInstance } from "fastify";
import { accountsModule } from "./accounts/module.ts";
import type { Outbox } from "./accounts/outbox.ts";
import { ActionEngine } from "./actions/engine.ts";
import { Relations } from "./actions/relations.ts";
import type { Conditions } from "./alerts/conditions.ts";
import { alertsModule } from "./alerts/module.ts";
import type { AlertNotifier } from "./alerts/notifier.ts";
import type { AlertService } from "./alerts/service.ts";
import { AnswerCache } from "./api/answer-cache.ts";
import { type AppDeps, buildApp } from "./api/app.ts";
import { serverLog } from "./api/logger.ts";
import { opsRoutes, type Readiness } from "./api/routes/ops.ts";
import { streamRoutes } from "./api/streams/index.ts";
import type { Catalogue } from "./catalogue/catalogue.ts";
import type { Core } from "./composition.ts";
import type { Config } from "./config/index.ts";
import { type Clock, systemClock } from "./domain/time.ts";
import type { Engine } from "./drivers/engine.ts";
import type { LocalProvider } from "./drivers/local/index.ts";
import type { TunnelHub } from "./drivers/tunnel/hub.ts";
import { NamespacePolicies } from "./identity/privileges.ts";
import { SecretBox } from "./identity/secret-box.ts";
import { IdentityService } from "./identity/service.ts";
import type { AgentNodes } from "./nodes/agents.ts";
import type { AttachedEngines } from "./nodes/attach.ts";
import type { NodeClusters } from "./nodes/clusters.ts";
import type { Engines, FakeNodeFacts } from "./nodes/engines.ts";
import type { HealthWatcher } from "./nodes/health.ts";
import { nodesModule } from "./nodes/module.ts";
import type { NodeProbe } from "./nodes/probe.ts";
import { RESTORED_FACT } from "./ops/backup.ts";
import { Metrics } from "./ops/metrics.ts";
import { replicasModule } from "./ops/module.ts";
import type { ReplicaCoordinator } from "./ops/replicas.ts";
import type { ScheduledBackups } from "./ops/scheduled-backups.ts";
import type { VolumeBackups } from "./ops/volume-backups.ts";
import { volumeBackupsModule } from "./ops/volume-backups-module.ts";
import { EngineContainerIO } from "./orchestrator/container-io.ts";
import type { ServiceManager } from "./orchestrator/manager.ts";
import { orchestratorModule } from "./orchestrator/module.ts";
import type { Reconciler } from "./orchestrator/reconciler.ts";
import type { ContainerRuntime } from "./orchestrator/runtime.ts";
import type { Orchestrator } from "./orchestrator/services.ts";
import type { Views } from "./orchestrator/views.ts";
import { registryModule } from "./registry/module.ts";
import type { NativeRegistry } from "./registry/native.ts";
import type { HostLookup } from "./registry/outbound.ts";
import type { RegistryService } from "./registry/service.ts";
import { type RouterModule, routerModule } from "./router/module.ts";
import { stacksModule } from "./stacks/module.ts";
import type { StackService } from "./stacks/service.ts";
import type { StatsCollector } from "./stats/collector.ts";
import { statsModule } from "./stats/module.ts";
import type { StatsReader } from "./stats/reader.ts";
import { type Db, openDatabase } from "./store/db.ts";
import type { ChangeListener } from "./store/listen.ts";
import { migrateToLatest } from "./store/migrations.ts";
import { explainDatabaseFailure } from "./store/open-errors.ts";
import { Store } from "./store/store.ts";
import { triggersModule } from "./triggers/module.ts";
import type { TriggerService } from "./triggers/service.ts";

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
  /** Routers serving services' domains, configured from the change feed. */
  router: RouterModule;
  registries: RegistryService;
  /** Berth's own registry, when configured. */
  nativeRegistry: NativeRegistry | undefined;
  triggers: TriggerService;
  volumeBackups: VolumeBackups;
  scheduledBackups: ScheduledBackups;
  /** This process's name among replicas (logs, leases, metrics). */
  replicaId: string;
  /** Leases on nodes and jobs shared with other replicas (PostgreSQL only). */
  coordinator: ReplicaCoordinator | undefined;
  /** Other replicas' commit notifications (PostgreSQL only); readers poll while it is not connected. */
  listener: ChangeListener | undefined;
  metrics: Metrics;
  /** Samples the containers of this replica's nodes at every stats interval (issue 32). */
  statsCollector: StatsCollector;
  /** Reads stats series and feeds live stats streams. */
  statsReader: StatsReader;
  /** Alert rules; `alertConditions.register` adds a kind watched elsewhere (certificates). */
  alerts: AlertService;
  alertConditions: Conditions;
  /** Evaluates rules and sends notifications (the replica leading `alerts`). */
  alertNotifier: AlertNotifier;
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
    db = openDatabase(config.databaseUrl, { poolSize: config.databasePoolSize });
    await migrateToLatest(db.kysely, db.dialect);
    db.prepareStatements();
    return db;
  } catch (error) {
    await db?.close().catch(() => undefined);
    throw explainDatabaseFailure(error, config.databaseUrl, config.databaseOrigin);
  }
}

export async function assemblePlatform(config: Config, opts: PlatformOptions = {}): Promise<Platform> {
  const clock = opts.clock ?? systemClock;
  const replicaId = config.replicaId ?? `${os.hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
  // The log first: every part reports to it, the HTTP app included.
  const log = serverLog({ level: config.logLevel, replicaId, stream: opts.logStream });
  const db = await openAtStart(config);
  const store = new Store(db.kysely, db.dialect, { clock });
  store.setOrigin(replicaId);
  const core: Core = {
    config,
    clock,
    log,
    onError: (what) => (err) => log.error({ err }, what),
    store,
    metrics: new Metrics(replicaId),
    replicaId,
    replicated: db.dialect === "postgres",
    box: SecretBox.open({ secret: config.secretKey, dataDir: config.dataDir }),
    answers: new AnswerCache(store),
    insecureRegistries: [
      ...new Set([
        ...config.registry.insecure,
        ...(config.registry.native ? [config.registry.native.host] : []),
      ]),
    ],
  };
  const { metrics } = core;
  const replicas = replicasModule(core);
  const identity = new IdentityService(store, clock);
  const policies = new NamespacePolicies(store);
  const actions = new ActionEngine({
    onError: core.onError("action worker"),
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

  // The capabilities, each after those it uses.
  const nodes = nodesModule(core, {
    actions,
    relations,
    policies,
    replicas,
    makeFakeEngine: opts.makeFakeEngine,
  });
  const registry = registryModule(core, { actions, replicas, resolveRegistryHost: opts.resolveRegistryHost });
  const routing = routerModule(core, {
    local: nodes.local,
    duties: replicas.duties,
    tunnels: nodes.tunnels,
  });
  const services = orchestratorModule(core, {
    drain: (rows) => routing.router.drain(rows),
    hold: (rows) => routing.router.hold(rows),
    release: (rows) => routing.router.release(rows),
    pause: (uuids) => routing.router.pause(uuids),
    actions,
    relations,
    identity,
    policies,
    engines: nodes.engines,
    registries: registry.registries,
    replicas,
  });
  const stacks = stacksModule(core, {
    actions,
    relations,
    services: services.services,
    orchestrator: services.orchestrator,
  });
  const triggers = triggersModule(core, { actions });
  const volumes = volumeBackupsModule(core, { actions, engines: nodes.engines, duties: replicas.duties });
  const accounts = accountsModule(core, {
    identity,
    policies,
    actions,
    services: services.services,
    outbox: opts.outbox,
  });
  const stats = statsModule(core, { engines: nodes.engines, duties: replicas.duties });
  const alerting = alertsModule(core, {
    outbox: accounts.outbox,
    duties: replicas.duties,
    statsStepMs: stats.retention.fineStepMs,
    resolveHost: opts.resolveRegistryHost,
  });
  // A crash loop or a memory share a round recorded is seen after that round, not an alert
  // interval later.
  stats.afterRound(() => alerting.notifier.wake());
  // The router's certificates are the source of `certificate_expiring` alerts.
  alerting.conditions.register("certificate_expiring", (rule, now) =>
    routing.router.expiringCertificates(rule, now),
  );

  async function readiness(): Promise<Readiness> {
    const checks: Record<string, string> = { migrations: "ok" };
    try {
      await withTimeout(store.ping(), 2000);
      checks.database = "ok";
    } catch (err) {
      checks.database = `unreachable: ${err instanceof Error ? err.message : String(err)}`;
    }
    if (replicas.stopping) checks.workers = "stopping";
    else if (!actions.running) checks.workers = "not started";
    else if (replicas.coordinator && !replicas.coordinator.healthy())
      checks.workers = "no recent heartbeat in the database";
    else checks.workers = "ok";
    return { ready: Object.values(checks).every((v) => v === "ok"), checks };
  }

  const extra = opts.extend?.({ actions, store, relations, identity }) ?? {};
  const app = await buildApp({
    store,
    identity,
    actions,
    relations,
    catalogue: nodes.catalogue,
    publicUrl: config.publicUrl,
    log,
    checkAnswers: opts.checkAnswers,
    bearer: accounts.accounts,
    passwords: accounts.logins,
    sessions: accounts.sessions,
    webDir: config.webDir,
    routes: [
      ...accounts.routes,
      ...nodes.routes,
      ...services.routes,
      ...routing.routes,
      ...stacks.routes,
      ...triggers.routes,
      ...volumes.routes,
      ...registry.routes,
      ...stats.routes,
      ...alerting.routes,
      (a) =>
        streamRoutes(a, {
          store,
          identity,
          containers: new EngineContainerIO(store, nodes.engines),
          settings: config.streams,
          clock,
          remoteChangesAnnounced: replicas.remoteChangesAnnounced,
          stats: stats.reader,
        }),
      (a) => opsRoutes(a, { replicaId, metrics, readiness, metricsToken: config.metricsToken }),
      ...(extra.routes ?? []),
    ],
  });
  metrics.attach({
    actionQueue: () => store.actions.actionQueue(),
    lastReconcilePass: async () => {
      const v = await store.replicas.findFact("reconcile_pass_at");
      return v === undefined ? undefined : Number(v);
    },
    openStreams: () => app.websocketServer?.clients.size ?? 0,
    ownedNodes: () => (replicas.coordinator ? replicas.coordinator.ownedNodes().length : 0),
    liveReplicas: () => (replicas.coordinator ? replicas.coordinator.liveReplicas().length : 1),
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
    catalogue: nodes.catalogue,
    engines: nodes.engines,
    local: nodes.local,
    nodeProbe: nodes.nodeProbe,
    clusters: nodes.clusters,
    attachedEngines: nodes.attachedEngines,
    agents: nodes.agents,
    tunnels: nodes.tunnels,
    health: nodes.health,
    runtime: services.runtime,
    orchestrator: services.orchestrator,
    services: services.services,
    views: services.views,
    answers: core.answers,
    stacks: stacks.stacks,
    reconciler: services.reconciler,
    router: routing.router,
    registries: registry.registries,
    nativeRegistry: registry.nativeRegistry,
    triggers: triggers.triggers,
    volumeBackups: volumes.backups,
    scheduledBackups: volumes.scheduled,
    replicaId,
    coordinator: replicas.coordinator,
    listener: replicas.listener,
    metrics,
    statsCollector: stats.collector,
    statsReader: stats.reader,
    alerts: alerting.alerts,
    alertConditions: alerting.conditions,
    alertNotifier: alerting.notifier,
    app,
    readiness,
    async start() {
      await nodes.recover();
      await replicas.start();
      // The first start after a restore (one replica takes the fact): the restored records take
      // back the containers still running on the nodes before anything acts on them.
      if ((await store.replicas.takeFact(RESTORED_FACT)) !== undefined) {
        const report = await services.adoptAfterRestore();
        log.info({ adoption: report }, "restore: containers re-adopted");
      }
      actions.start();
      nodes.health.start();
      services.reconciler.start();
      routing.router.start();
      stacks.stacks.start();
      volumes.start();
      stats.start();
      alerting.notifier.start();
      await registry.start();
    },
    async close(closeOpts = {}) {
      await replicas.stopDuties();
      volumes.stop();
      await registry.stop();
      services.reconciler.stop();
      routing.router.stop();
      stacks.stacks.stop();
      stats.stop();
      alerting.notifier.stop();
      nodes.health.stop();
      nodes.agents.stop();
      await app.close();
      await actions.stop({ graceMs: closeOpts.graceMs });
      await nodes.stopSimulated();
      nodes.tunnels.closeAll("Berth is shutting down");
      await replicas.stopListening();
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
