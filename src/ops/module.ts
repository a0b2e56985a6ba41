// Replicas (PostgreSQL only): the coordinator that shares nodes and once-only jobs among replicas
// (leases), and the listener of other replicas' commits. On SQLite one process owns every duty.
import type { Core } from "../composition.ts";
import { type Duties, type Job, SOLO_DUTIES } from "../domain/duties.ts";
import { ChangeListener } from "../store/listen.ts";
import { IDENTITY_CHANGE } from "../store/store.ts";
import { ReplicaCoordinator } from "./replicas.ts";

export type ReplicasModule = ReturnType<typeof replicasModule>;

export function replicasModule(core: Core) {
  const { config, store, clock, log, onError, metrics, replicaId } = core;
  let stopping = false;
  const nodeWatchers: ((gained: string[]) => void)[] = [];
  const leadWatchers: ((job: Job, leading: boolean) => void)[] = [];
  const coordinator = core.replicated
    ? new ReplicaCoordinator({
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
          log.info({ nodes: gained }, "replicas: took over node watchers");
          for (const watch of nodeWatchers) watch(gained);
        },
        onLeadChanged: (job, leading) => {
          log.info(`replicas: ${leading ? "leading" : "no longer leading"} ${job}`);
          for (const watch of leadWatchers) watch(job, leading);
        },
        onError: onError("replica heartbeat"),
      })
    : undefined;
  // A node that appears, goes or changes state gets (or loses) its owner without waiting a beat.
  store.onChange((type) => {
    if ((type === "node" || type === "") && coordinator && !stopping) void coordinator.tick();
  });
  const listener = core.replicated
    ? new ChangeListener({
        url: config.databaseUrl,
        origin: replicaId,
        onChange: (change) => {
          // Wakes this replica's feed readers, and its action workers on an action's change.
          store.announceRemoteChange(change.type);
          if (change.type && change.type !== IDENTITY_CHANGE)
            metrics.feedLag.observe(Math.max(0, Date.now() - change.datetimeMs) / 1000);
        },
        onError: (err) => log.warn({ err }, "change notifications: connection lost; polling meanwhile"),
      })
    : undefined;
  const duties: Duties = coordinator ?? SOLO_DUTIES;
  return {
    coordinator,
    listener,
    /** Which nodes this process watches and which once-only jobs it leads. */
    duties,
    /** Set once close began: nothing is taken over or started any more. */
    get stopping(): boolean {
      return stopping;
    },
    /** Calls `watch` with the nodes this replica took over (not while stopping). */
    onNodesChanged(watch: (gained: string[]) => void): void {
      nodeWatchers.push(watch);
    },
    /** Calls `watch` when this replica starts or stops leading a job. */
    onLeadChanged(watch: (job: Job, leading: boolean) => void): void {
      leadWatchers.push(watch);
    },
    /** On SQLite no other process commits: in-process notifications announce every change. */
    remoteChangesAnnounced: () => !core.replicated || (listener?.connected ?? false),
    /** Listens to other replicas' commits, then takes this replica's share of the duties. */
    async start(): Promise<void> {
      listener?.start();
      // Duties first: watchers and health checks then start on this replica's share of nodes.
      await coordinator?.start();
    },
    /** Gives up leases on nodes and jobs (first of all at close). */
    async stopDuties(): Promise<void> {
      stopping = true;
      await coordinator?.stop();
    },
    async stopListening(): Promise<void> {
      await listener?.stop();
    },
  };
}
