// Placement: the planner (the pure scheduler over a snapshot of a namespace) and the one applier
// that writes placements. Plans of one namespace are made one batch at a time in this process (the
// services asking meanwhile join the next batch); across replicas nothing serializes them, so the
// applier re-checks each plan at commit: the transaction that inserts the plan's container records
// moves the placement generation of every node the plan uses (store/placement-guards.ts) and is
// rolled back when one of them is not the generation the snapshot read, i.e. another replica placed
// on that node since. The batch is then planned again on a fresh snapshot (a few times at most),
// where the other replica's containers count: the service goes to another node if one fits, or its
// action fails with the scheduler's reason. Nomad's plan applier does the same for its workers.
import { setImmediate as nextTurn } from "node:timers/promises";
import { addTo } from "../domain/collections.ts";
import type { ServiceSpec } from "../domain/service.ts";
import type { Clock } from "../domain/time.ts";
import {
  cpusetMax,
  type Demand,
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

/** A plan made over a snapshot that another commit has since made stale on these nodes. */
class StalePlan extends Error {
  constructor(readonly nodes: string[]) {
    super(`another placement committed on ${nodes.join(", ")} since the plan's snapshot was read`);
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

  constructor(private readonly d: { store: Store; clock: Clock }) {
    this.snapshots = new PlacementSnapshots(d.store);
  }

  /**
   * What placement needs of a namespace, read once per plan: the placement generations of its
   * nodes (read first: on PostgreSQL each statement sees what committed before it, so a placement
   * committed between these reads makes the plan look stale, never fresh), its live nodes, its live
   * containers with what each claims (from its service's definition), counted into a PlacementState.
   */
  private static async snapshot(store: Store, namespace: string): Promise<Snapshot> {
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
    return { state: new PlacementState(nodes, containers), numbers, generations };
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
    const { state, numbers } = await PlanApplier.snapshot(this.d.store, s.namespace);
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
        return await this.placeBatch(namespace, services);
      } catch (err) {
        if (!(err instanceof StalePlan)) throw err;
        const nodes = err.nodes.join(", ");
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
   * nothing it holds changed since (placement-snapshots.ts); either way the nodes the plan uses must
   * still be at the placement generations it read, or the transaction is rolled back (StalePlan).
   */
  private async placeBatch(namespace: string, services: ServiceRow[]): Promise<Placed[]> {
    let generation = 0;
    let snapshot: Snapshot | undefined;
    let wrote = 0;
    const placed = await this.d.store.transaction(async (tx) => {
      // Read before the snapshot is (a commit after it moves the generation past what keep() expects).
      generation = this.snapshots.generation(namespace);
      snapshot = this.snapshots.take(namespace, generation) ?? (await PlanApplier.snapshot(tx, namespace));
      const { state, numbers } = snapshot;
      const plans: PlacementPlan[] = [];
      const records: NewContainer[] = [];
      const now = this.d.clock.now();
      for (const s of services) {
        const taken = numbers.get(s.uuid) ?? [];
        const plan = state.plan(PlanApplier.request(s, taken.length, s.target_num_containers));
        plans.push(plan);
        if (!plan.ok || plan.placements.length === 0) continue;
        const fresh = nextContainerNumbers(taken, plan.placements.length);
        numbers.set(s.uuid, [...taken, ...fresh]);
        for (const [i, node] of plan.placements.entries()) {
          records.push(newContainerRow(s, node, fresh[i]!, now));
        }
      }
      await PlanApplier.guard(tx, namespace, snapshot, records);
      const rows = new Map<string, ContainerRow[]>();
      for (const r of await tx.services.insertContainers(records)) addTo(rows, r.service_uuid, r);
      // One committed write of container rows (insertRows), told once to the snapshots.
      wrote = records.length > 0 ? 1 : 0;
      return plans.map((plan, i) => ({ plan, rows: rows.get(services[i]!.uuid) ?? [] }));
    });
    if (snapshot) this.snapshots.keep(namespace, snapshot, generation, wrote);
    return placed;
  }

  /**
   * The check at commit: moves the placement generation of every node the records go to (one
   * statement for the batch, whatever its size) and refuses the plan when one was not where the
   * snapshot read it. The snapshot then holds the generations its own commit leaves.
   */
  private static async guard(
    tx: Store,
    namespace: string,
    snapshot: Snapshot,
    records: readonly NewContainer[],
  ): Promise<void> {
    if (records.length === 0) return;
    const expected = new Map<string, number>();
    for (const r of records) expected.set(r.node_uuid, snapshot.generations.get(r.node_uuid) ?? 0);
    const { stale, generations } = await new PlacementGuardStore(tx).advance(namespace, expected);
    if (stale.length) {
      const names = new Map(snapshot.state.nodes.map((n) => [n.uuid, n.name]));
      throw new StalePlan(stale.map((uuid) => names.get(uuid) || uuid));
    }
    for (const [node, g] of generations) snapshot.generations.set(node, g);
  }
}
