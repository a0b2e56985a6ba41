// Replicas sharing one database (issue 16). Each replica beats a heartbeat into `replicas`; work
// that must happen once is owned under leases in `leases`: every node's engine watcher and health
// checks (`node:<uuid>`, spread over the live replicas by rendezvous hashing, so each replica
// prefers a stable share and a dead replica's nodes are taken over once their leases lapse) and
// once-only jobs (`job:reconcile`, `job:registry`). A replica that cannot reach the database drops
// everything it owned at once: another replica takes the work over when the leases lapse.
import { createHash } from "node:crypto";
import type { Duties, Job } from "../domain/duties.ts";
import type { Clock } from "../domain/time.ts";
import type { Store } from "../store/store.ts";

const JOBS: Job[] = ["reconcile", "registry", "alerts"];

export interface ReplicaCoordinatorOptions {
  store: Store;
  clock: Clock;
  replicaId: string;
  /** How long a lease lasts without renewal; heartbeats come three times per lease. */
  leaseMs: number;
  /** The nodes that need a watcher now (Deployed or Unreachable with an engine). */
  nodesToWatch(): Promise<string[]>;
  /** Called after the set of owned nodes changed (watchers start and stop). */
  onNodesChanged?(gained: string[], lost: string[]): void;
  /** Called when this replica starts or stops leading a job. */
  onLeadChanged?(job: Job, leading: boolean): void;
  onError?(err: unknown): void;
}

/** Rendezvous (highest random weight) hashing: every replica computes the same owner. */
export function preferredOwner(key: string, replicas: string[]): string | undefined {
  let best: string | undefined;
  let bestWeight = "";
  for (const r of replicas) {
    const w = createHash("sha1").update(`${key}\n${r}`).digest("hex");
    if (best === undefined || w > bestWeight) {
      best = r;
      bestWeight = w;
    }
  }
  return best;
}

export class ReplicaCoordinator implements Duties {
  private readonly owned = new Set<string>();
  private readonly leading = new Set<Job>();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private stopping = false;
  private lastOkAt = 0;
  private live: string[] = [];
  /** Each node's preferred owner among `ownersOf` (hashed once per node while they stay the same). */
  private readonly owners = new Map<string, string | undefined>();
  private ownersOf = "";

  constructor(private readonly o: ReplicaCoordinatorOptions) {}

  get replicaId(): string {
    return this.o.replicaId;
  }

  ownsNode(nodeUuid: string): boolean {
    return this.owned.has(nodeUuid);
  }

  leads(job: Job): boolean {
    return this.leading.has(job);
  }

  /** Nodes this replica watches now. */
  ownedNodes(): string[] {
    return [...this.owned].sort();
  }

  /** Replicas seen alive at the last heartbeat. */
  liveReplicas(): string[] {
    return [...this.live];
  }

  /** Whether the last heartbeat reached the database recently (readiness). */
  healthy(): boolean {
    return !this.stopping && this.o.clock.now() - this.lastOkAt <= this.o.leaseMs;
  }

  private get tickMs(): number {
    return Math.max(50, Math.floor(this.o.leaseMs / 3));
  }

  /** Beats once (so duties are known before workers start), then on an interval. */
  async start(): Promise<void> {
    await this.tick();
    this.timer = setInterval(() => void this.tick(), this.tickMs);
    this.timer.unref();
  }

  /** Runs one heartbeat now (tests; after a node appears). */
  async tick(): Promise<void> {
    if (this.stopping) return;
    if (this.ticking) return this.ticking;
    this.ticking = this.beat().finally(() => {
      this.ticking = undefined;
    });
    return this.ticking;
  }

  /**
   * Graceful stop: says so in the heartbeat (others stop preferring this replica), gives every lease
   * up at once so another replica takes the work without waiting for a lapse, and forgets the row.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearInterval(this.timer);
    await this.ticking;
    this.dropAll();
    try {
      await this.o.store.replicas.releaseLeasesOf(this.o.replicaId);
      await this.o.store.replicas.removeReplica(this.o.replicaId);
    } catch (err) {
      this.o.onError?.(err);
    }
  }

  private async beat(): Promise<void> {
    const { store, clock, replicaId: me, leaseMs } = this.o;
    try {
      const now = clock.now();
      await store.replicas.beat(me, now, this.stopping);
      if (this.stopping) return;
      const replicas = await store.replicas.liveReplicas(now - leaseMs);
      this.live = replicas.map((r) => r.id);
      const candidates = replicas.filter((r) => r.stopping === 0).map((r) => r.id);
      const key = candidates.join("\n");
      if (key !== this.ownersOf) {
        this.owners.clear();
        this.ownersOf = key;
      }
      const nodes = await this.o.nodesToWatch();
      // Nodes that are gone are forgotten now and then.
      if (this.owners.size > 2 * nodes.length + 100) this.owners.clear();
      const leases = new Map((await store.replicas.listLeases()).map((l) => [l.name, l]));
      const until = now + leaseMs;
      const gained: string[] = [];
      const lost: string[] = [];
      // Every lease this beat takes or renews is asked for in one statement (nodes and jobs).
      const asked: string[] = JOBS.map((job) => `job:${job}`);
      for (const node of nodes) {
        const name = `node:${node}`;
        const lease = leases.get(name);
        let preferred = this.owners.get(node);
        if (preferred === undefined) {
          preferred = preferredOwner(node, candidates);
          this.owners.set(node, preferred);
        }
        const mine = lease?.owner === me && lease.until >= now;
        if (mine && preferred !== undefined && preferred !== me) {
          // The node's preferred replica is alive: hand it over.
          await store.replicas.releaseLease(name, me);
        } else if (mine || preferred === me || !lease || lease.until < now) asked.push(name);
      }
      const held = await store.replicas.acquireLeases(asked, me, now, until);
      for (const node of nodes) {
        const owns = held.has(`node:${node}`);
        if (owns && !this.owned.has(node)) gained.push(node);
        if (!owns && this.owned.has(node)) lost.push(node);
      }
      const wanted = new Set(nodes);
      for (const node of this.owned) {
        if (wanted.has(node)) continue;
        lost.push(node);
        await store.replicas.releaseLease(`node:${node}`, me);
      }
      for (const job of JOBS) this.setLead(job, held.has(`job:${job}`));
      this.lastOkAt = now;
      this.applyNodes(gained, lost);
      if (Math.random() < 0.02) await store.replicas.pruneReplicas(now - 24 * 3600_000);
    } catch (err) {
      // Without the database nothing here can be proven ours any more: stop all of it now.
      this.dropAll();
      this.o.onError?.(err);
    }
  }

  private applyNodes(gained: string[], lost: string[]): void {
    for (const n of gained) this.owned.add(n);
    for (const n of lost) this.owned.delete(n);
    if (gained.length || lost.length) this.o.onNodesChanged?.(gained, lost);
  }

  private setLead(job: Job, leads: boolean): void {
    if (leads === this.leading.has(job)) return;
    if (leads) this.leading.add(job);
    else this.leading.delete(job);
    this.o.onLeadChanged?.(job, leads);
  }

  private dropAll(): void {
    this.applyNodes([], [...this.owned]);
    for (const job of JOBS) this.setLead(job, false);
  }
}
