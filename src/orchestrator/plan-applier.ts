// Placement: the planner (the pure scheduler over a snapshot of a namespace) and the one applier
// that writes placements. Plans of one namespace are made one batch at a time in this process (the
// services asking meanwhile join the next batch); across replicas nothing serializes them, so the
// applier re-checks each plan at commit: the transaction that inserts the plan's container records
// first moves the placement generation of every node the plan uses (store/placement-guards.ts),
// which locks those nodes' guards until it ends, and learns which of them another replica placed
// on since the snapshot read them. Those nodes alone are counted again, as they are now, and the
// batch is planned again in the same transaction (the nodes it holds need no second check), a few
// rounds at most: the other replica's containers count, so the service goes to another node if
// one fits, or its action fails with the scheduler's reason. Nomad's plan applier does the same
// for its workers. Only a batch that keeps meeting others' placements starts over from a whole read.
//
// Replicas planning at once on equal snapshots would all pick the same emptiest nodes and meet at
// every commit. Among equally preferred nodes each replica prefers the nodes it watches (its
// share under the node leases, ops/replicas.ts), then an order of its own (a hash of its id and
// the node's uuid), as Nomad's schedulers shuffle feasible nodes; the strategies' rules (fewest
// running containers, the service's own first for HIGH_AVAILABILITY) come first as before. A
// single process keeps the nodes' listed order.

import { performance } from "node:perf_hooks";
import { setImmediate as nextTurn } from "node:timers/promises";
import { addTo } from "../domain/collections.ts";
import type { Duties } from "../domain/duties.ts";
import type { ServiceSpec } from "../domain/service.ts";
import type { Clock } from "../domain/time.ts";
import {
  type ContainerSnapshot,
  cpusetMax,
  type Demand,
  type NodeSnapshot,
  nextContainerNumbers,
  type PlacementPlan,
  PlacementState,
} from "../scheduler/index.ts";
import { specOf, tagsOf } from "../store/codec.ts";
import { PlacementGuardStore } from "../store/placement-guards.ts";
import { type ContainerRow, type NewContainer, newContainerRow, type ServiceRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import { PlacementSnapshots, type Snapshot } from "./placement-snapshots.ts";
import type { Log } from "./runtime.ts";

/** How many times a batch is planned again after meeting another replica's placements. */
export const PLAN_ATTEMPTS = 5;

/** What a container of this definition claims on its node (scheduler/capacity.ts). */
export function demandOf(spec: ServiceSpec): Demand {
  return {
    ports:
      spec.net === "host"
        ? spec.container_ports.map((p) => ({ port: p.inner_port, protocol: p.protocol }))
        : spec.container_ports
            .filter((p) => p.published && p.outer_port !== null && p.outer_port !== 0)
            .map((p) => ({ port: p.outer_port as number, protocol: p.protocol })),
    memoryMb: spec.memory ?? 0,
    cpuShares: spec.cpu_shares ?? 0,
    cpusetMax: spec.cpuset ? cpusetMax(spec.cpuset) : -1,
  };
}

/** FNV-1a of a string: a replica's own order of the nodes (no randomness: the same every time). */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/**
 * The tie-break among equally preferred nodes of a replica sharing the database: the nodes it
 * watches first, each group in an order seeded by its id. Undefined for a single process (the
 * nodes' listed order).
 */
export function replicaOrder(duties: Duties | undefined): ((node: NodeSnapshot) => number) | undefined {
  const id = duties?.replicaId;
  if (!duties || id === undefined) return undefined;
  return (node) => (duties.ownsNode(node.uuid) ? 0 : 2 ** 32) + fnv1a(`${id}\n${node.uuid}`);
}

/**
 * A plan that met other replicas' placements on its nodes in each of PLAN_ATTEMPTS rounds of one
 * transaction: the batch is planned again in a new one, from a whole read.
 */
class StalePlan extends Error {
  constructor(
    readonly nodes: string[],
    readonly names: string[],
  ) {
    super(`another placement committed on ${names.join(", ")} since the plan's snapshot was read`);
  }
}

/** A service waiting for its placements (see PlanApplier.place). */
interface WaitingPlacement {
  service: ServiceRow;
  log: Log;
  resolve(placed: Placed): void;
  reject(err: unknown): void;
}

interface Placed {
  plan: PlacementPlan;
  /** The records made for the service, as written (later writes re-read only the versions). */
  rows: ContainerRow[];
}

export class PlanApplier {
  /** Services waiting for placement, per namespace, while a batch of that namespace is being planned. */
  private readonly placing = new Map<string, WaitingPlacement[]>();
  /** A batch's snapshot, kept for the next batch of its namespace while nothing it holds changed. */
  private readonly snapshots: PlacementSnapshots;

  constructor(private readonly d: { store: Store; clock: Clock; duties?: Duties }) {
    this.snapshots = new PlacementSnapshots(d.store);
  }

  private get order(): ((node: NodeSnapshot) => number) | undefined {
    return replicaOrder(this.d.duties);
  }

  /**
   * What placement needs of a namespace, read once per plan: the placement generations of its
   * nodes (read first: on PostgreSQL each statement sees what committed before it, so a placement
   * committed between these reads makes the plan look stale, never fresh), its live nodes, its live
   * containers with what each claims (from its service's definition), counted into a PlacementState.
   */
  private static async snapshot(
    store: Store,
    namespace: string,
    order?: (node: NodeSnapshot) => number,
  ): Promise<Snapshot> {
    const generations = await new PlacementGuardStore(store).generations(namespace);
    const nodes = (await store.nodes.liveNodeSummaries(namespace)).map((n) => ({
      uuid: n.uuid,
      name: n.nickname || n.external_fqdn,
      state: n.state,
      tags: tagsOf(n),
      memoryMb: n.memory,
      cpus: n.cpu,
    }));
    // Only the columns placement needs; what a container claims comes from its service's
    // definition (one read of the namespace's live services per plan).
    const demands = new Map(
      (await store.services.liveServices({ namespace })).map((x) => [x.uuid, demandOf(specOf(x))]),
    );
    const containers = (await store.services.containerLoads(namespace)).map((c) => ({
      uuid: c.uuid,
      node: c.node_uuid,
      service: c.service_uuid,
      state: c.state,
      number: c.number,
      demand: demands.get(c.service_uuid),
    }));
    const numbers = new Map<string, number[]>();
    for (const c of containers) {
      addTo(numbers, c.service, c.number);
    }
    return {
      state: new PlacementState(nodes, containers, order),
      numbers,
      generations,
      demands,
      readAt: performance.now(),
    };
  }

  /**
   * Counts some nodes of a snapshot again, as they are now (another replica placed there): their
   * placement generations first, then their live containers (with the demands of services the
   * snapshot did not know). Statements: two, three when a service is new to the snapshot.
   */
  private static async refresh(store: Store, namespace: string, snapshot: Snapshot, nodes: string[]) {
    const generations = await new PlacementGuardStore(store).generationsOf(nodes);
    const rows = await store.services.containerLoads(namespace, { nodes });
    const unknown = [...new Set(rows.map((r) => r.service_uuid))].filter((u) => !snapshot.demands.has(u));
    for (const s of await store.services.servicesByUuid(unknown))
      snapshot.demands.set(s.uuid, demandOf(specOf(s)));
    const onNode = new Map<string, ContainerSnapshot[]>();
    for (const c of rows) {
      addTo(onNode, c.node_uuid, {
        uuid: c.uuid,
        node: c.node_uuid,
        service: c.service_uuid,
        state: c.state,
        number: c.number,
        demand: snapshot.demands.get(c.service_uuid),
      });
    }
    for (const node of nodes) {
      snapshot.generations.set(node, generations.get(node) ?? 0);
      snapshot.state.refreshNode(node, onNode.get(node) ?? []);
    }
  }

  /**
   * Whether the snapshot holds the live containers the batch's services have now (another replica
   * may have placed or removed some since it was read): one statement over those services.
   */
  private static async holdsServices(
    store: Store,
    namespace: string,
    snapshot: Snapshot,
    services: readonly ServiceRow[],
  ): Promise<boolean> {
    const rows = await store.services.containerLoads(namespace, { services: services.map((s) => s.uuid) });
    const now = new Map<string, number[]>();
    for (const r of rows) addTo(now, r.service_uuid, r.number);
    return services.every((s) => {
      const a = [...(now.get(s.uuid) ?? [])].sort((x, y) => x - y);
      const b = [...(snapshot.numbers.get(s.uuid) ?? [])].sort((x, y) => x - y);
      return a.length === b.length && a.every((n, i) => n === b[i]);
    });
  }

  private static request(s: ServiceRow, live: number, wanted: number) {
    const spec = specOf(s);
    return {
      service: s.uuid,
      serviceTags: spec.tags,
      demand: demandOf(spec),
      strategy: spec.deployment_strategy,
      count: wanted - live,
    };
  }

  /** Plans placements to reach the target (or every eligible node) without making them; the plan explains refusals. */
  async planFor(s: ServiceRow, wanted: number): Promise<PlacementPlan> {
    const { state, numbers } = await PlanApplier.snapshot(this.d.store, s.namespace, this.order);
    return state.plan(PlanApplier.request(s, numbers.get(s.uuid)?.length ?? 0, wanted));
  }

  /**
   * Creates the container records the service lacks; fails with the scheduler's explanation when
   * nothing fits (no record is made). When only some fit, those are made and the explanation of the
   * rest is returned: the caller starts what fits, then fails the action with it.
   *
   * Placements of one namespace are made by one plan at a time: the services asking meanwhile are
   * planned together by the next one (one snapshot for all of them, each seeing the others'
   * placements), and its records and change-feed entries are written in one transaction.
   */
  async place(s: ServiceRow, log: Log): Promise<{ shortfall: string[] | undefined; placed: ContainerRow[] }> {
    const result = await new Promise<Placed>((resolve, reject) => {
      const waiting = this.placing.get(s.namespace);
      if (waiting) waiting.push({ service: s, log, resolve, reject });
      else {
        this.placing.set(s.namespace, [{ service: s, log, resolve, reject }]);
        void this.placeWaiting(s.namespace);
      }
    });
    if (!result.plan.ok) {
      for (const line of result.plan.reasons) await log(line);
      throw new Error(result.plan.reasons[0] ?? "no node can take the service's containers");
    }
    if (result.plan.placements.length) {
      await log(`Placing ${result.plan.placements.length} container(s) of ${s.name}`);
    }
    if (result.plan.shortfall) for (const line of result.plan.shortfall) await log(line);
    return { shortfall: result.plan.shortfall, placed: result.rows };
  }

  /** Plans (and records) the placements the namespace's services wait for, one batch after the other. */
  private async placeWaiting(namespace: string): Promise<void> {
    // Services started by the same burst of calls join this batch.
    await nextTurn();
    for (;;) {
      const waiting = this.placing.get(namespace) ?? [];
      const batch = waiting.splice(0);
      if (batch.length === 0) {
        this.placing.delete(namespace);
        return;
      }
      try {
        const placed = await this.applyBatch(namespace, batch);
        for (const [i, w] of batch.entries()) w.resolve(placed[i]!);
      } catch (err) {
        for (const w of batch) w.reject(err);
      }
    }
  }

  /** A batch planned and applied; planned again on a fresh snapshot while another replica's commit makes its plan stale. */
  private async applyBatch(namespace: string, batch: WaitingPlacement[]): Promise<Placed[]> {
    const services = batch.map((w) => w.service);
    for (let attempt = 1; ; attempt++) {
      try {
        const { placed, met } = await this.placeBatch(namespace, services);
        if (met.length) {
          const nodes = met.join(", ");
          for (const w of batch) {
            await w.log(
              `Another replica placed containers on node(s) ${nodes} while the plan was made; planning again`,
            );
          }
        }
        return placed;
      } catch (err) {
        if (!(err instanceof StalePlan)) throw err;
        const nodes = err.names.join(", ");
        if (attempt >= PLAN_ATTEMPTS) {
          throw new Error(
            `another replica placed containers on node(s) ${nodes} while each of ${PLAN_ATTEMPTS} plans was made; start the service again`,
          );
        }
        for (const w of batch) {
          await w.log(
            `Another replica placed containers on node(s) ${nodes} while the plan was made; planning again`,
          );
        }
      }
    }
  }

  /**
   * One plan for several services over one snapshot, applied in the transaction that writes the
   * container records (state Starting, made from each service's current definition) and their
   * change-feed entries. The snapshot is read in that transaction, or is the previous batch's when
   * nothing it holds changed since (placement-snapshots.ts); either way the nodes the plan uses
   * must be at the placement generations it holds, and those another replica moved are counted
   * again before the batch is planned again (StalePlan after PLAN_ATTEMPTS rounds).
   *
   * A snapshot that other replicas' commits may have overtaken is checked first: the batch's
   * services must have the containers it counts (else it is read whole), and a plan on it that
   * refuses anything is made again on a whole read (what they removed may make room).
   */
  private async placeBatch(
    namespace: string,
    services: ServiceRow[],
  ): Promise<{ placed: Placed[]; met: string[] }> {
    let generation = 0;
    let snapshot: Snapshot | undefined;
    let wrote = 0;
    // The kept snapshot is for the first run of the transaction only (a run again reads whole).
    let tookKept = false;
    /** The nodes where another replica's placements were met (and counted again). */
    let met: string[] = [];
    // A deadlock between two replicas' rounds (each holds nodes the other locks next) runs it again.
    const placed = await this.d.store.retrying(async (tx) => {
      // Read before the snapshot is (a commit after it moves the generation past what keep() expects).
      generation = this.snapshots.generation(namespace);
      let fresh = false;
      let overtaken = false;
      snapshot = undefined;
      if (!tookKept) {
        tookKept = true;
        const taken = this.snapshots.take(namespace, generation);
        snapshot = taken?.snapshot;
        overtaken = taken !== undefined && (taken.remote || this.snapshots.replicated);
      }
      if (snapshot && overtaken && !(await PlanApplier.holdsServices(tx, namespace, snapshot, services)))
        snapshot = undefined;
      if (!snapshot) {
        snapshot = await PlanApplier.snapshot(tx, namespace, this.order);
        fresh = true;
      }
      const locked = new Set<string>();
      let rounds = 0;
      met = [];
      for (;;) {
        const made = this.planOn(snapshot, services);
        if (overtaken && !fresh && made.plans.some((p) => !p.ok || p.shortfall)) {
          made.undo();
          snapshot = await PlanApplier.snapshot(tx, namespace, this.order);
          fresh = true;
          continue;
        }
        const stale = await PlanApplier.guard(tx, namespace, snapshot, made.records, locked).catch(
          (err: unknown) => {
            made.undo();
            throw err;
          },
        );
        if (stale.length) {
          // Another replica placed on these nodes since the snapshot read them. Their guards are
          // this transaction's until it commits: they are counted again as they are now, and the
          // batch is planned again (nodes the first plan locked stay locked and need no check).
          made.undo();
          if (++rounds >= PLAN_ATTEMPTS) throw new StalePlan(stale, PlanApplier.names(snapshot, stale));
          await PlanApplier.refresh(tx, namespace, snapshot, stale);
          met.push(...PlanApplier.names(snapshot, stale));
          overtaken = true;
          continue;
        }
        let inserted: ContainerRow[];
        try {
          inserted = await tx.services.insertContainers(made.records);
        } catch (err) {
          made.undo();
          throw err;
        }
        const rows = new Map<string, ContainerRow[]>();
        for (const c of inserted) addTo(rows, c.service_uuid, c);
        // One committed write of container rows (insertRows), told once to the snapshots.
        wrote = made.records.length > 0 ? 1 : 0;
        return made.plans.map((plan, i) => ({ plan, rows: rows.get(services[i]!.uuid) ?? [] }));
      }
    });
    if (snapshot) this.snapshots.keep(namespace, snapshot, generation, wrote);
    return { placed, met: [...new Set(met)] };
  }

  private static names(snapshot: Snapshot, nodes: readonly string[]): string[] {
    const names = new Map(snapshot.state.nodes.map((n) => [n.uuid, n.name]));
    return nodes.map((uuid) => names.get(uuid) || uuid);
  }

  /** The batch's plans on the snapshot (counted into it), their records, and how to take them back. */
  private planOn(snapshot: Snapshot, services: readonly ServiceRow[]) {
    const { state, numbers } = snapshot;
    const plans: PlacementPlan[] = [];
    const records: NewContainer[] = [];
    const undone: (() => void)[] = [];
    const now = this.d.clock.now();
    for (const s of services) {
      const taken = numbers.get(s.uuid) ?? [];
      const request = PlanApplier.request(s, taken.length, s.target_num_containers);
      const plan = state.plan(request);
      plans.push(plan);
      if (!plan.ok || plan.placements.length === 0) continue;
      const fresh = nextContainerNumbers(taken, plan.placements.length);
      numbers.set(s.uuid, [...taken, ...fresh]);
      undone.push(() => {
        state.unplan(s.uuid, plan.placements, request.demand);
        numbers.set(s.uuid, taken);
      });
      for (const [i, node] of plan.placements.entries()) {
        records.push(newContainerRow(s, node, fresh[i]!, now));
      }
    }
    const undo = () => {
      for (const u of undone.reverse()) u();
    };
    return { plans, records, undo };
  }

  /**
   * The check at commit: moves the placement generation of every node the records go to that this
   * transaction has not moved yet (one statement, whatever the batch's size), which locks those
   * nodes' guards until the commit, and answers the nodes whose generation was not where the
   * snapshot read it (another replica placed there since). The snapshot then holds the generations
   * this transaction leaves.
   */
  private static async guard(
    tx: Store,
    namespace: string,
    snapshot: Snapshot,
    records: readonly NewContainer[],
    locked: Set<string>,
  ): Promise<string[]> {
    const expected = new Map<string, number>();
    for (const r of records) {
      if (!locked.has(r.node_uuid)) expected.set(r.node_uuid, snapshot.generations.get(r.node_uuid) ?? 0);
    }
    if (expected.size === 0) return [];
    const { stale, generations } = await new PlacementGuardStore(tx).advance(namespace, expected);
    for (const [node, g] of generations) {
      locked.add(node);
      snapshot.generations.set(node, g);
    }
    return stale;
  }
}
