// Services and containers: the asynchronous operations as action kinds made of idempotent
// steps, placement through the scheduler, and state derived from the containers.

import { setImmediate as nextTurn } from "node:timers/promises";
import type { ActionEngine, ActionKind, Outcome, StepContext } from "../actions/engine.ts";
import {
  ContainerActionParams,
  ServiceActionParams,
  ServiceTerminateParams,
} from "../contract/action-params.ts";
import { addTo } from "../domain/collections.ts";
import { conflict, notFound } from "../domain/errors.ts";
import type { ServiceSpec } from "../domain/service.ts";
import {
  assertAllowed,
  CONTAINER_OPERATIONS,
  type ContainerPhase,
  type ContainerState,
  SERVICE_OPERATIONS,
  SERVICE_TRANSITIONAL,
  type ServiceState,
  settledServiceState,
} from "../domain/states.ts";
import type { Clock } from "../domain/time.ts";
import { containerUri, serviceUri } from "../domain/uri.ts";
import {
  cpusetMax,
  type Demand,
  nextContainerNumbers,
  type PlacementPlan,
  PlacementState,
  planRemoval,
} from "../scheduler/index.ts";
import { specOf, tagsOf } from "../store/codec.ts";
import {
  type ContainerPatch,
  type ContainerRow,
  type NewContainer,
  newContainerRow,
  type ServiceRow,
} from "../store/services.ts";
import type { Store } from "../store/store.ts";
import { PlacementSnapshots, type Snapshot } from "./placement-snapshots.ts";
import type { ContainerRuntime, Log } from "./runtime.ts";

export interface OrchestratorDeps {
  store: Store;
  clock: Clock;
  runtime: ContainerRuntime;
  /** Revokes the PLATFORM_AUTH key of a terminated service. */
  revokeServiceKey(serviceUuid: string): Promise<void>;
  /** Parallel container operations per node and action (sequential_deployment forces 1). */
  parallelism?: number;
  /** How long a start waits for the services it links to to have a running container. */
  linkWaitMs?: number;
}

/** How often a start waiting for its link targets looks again. */
const LINK_WAIT_POLL_MS = 200;

type Ctx<P> = StepContext<P>;

/** Service operations another action may run inline (see `Orchestrator.runOperation`). */
export type InlineOperation = "start" | "stop" | "redeploy" | "terminate";

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

type ContainerHead = Awaited<ReturnType<Store["services"]["containerHeadsOfService"]>>[number];

/** The states a container in an action's phase shows (domain/states.ts containerState). */
const IN_PHASE_STATES = new Set<string>(["Starting", "Stopping", "Terminating"]);

/** Container operations in flight per action, over all of its nodes. */
const ACTION_PARALLELISM = 32;

/** A service waiting for its placements (see Orchestrator.place). */
interface WaitingPlacement {
  service: ServiceRow;
  resolve(placed: Placed): void;
  reject(err: unknown): void;
}

interface Placed {
  plan: PlacementPlan;
  /** The records made for the service, as written (later writes re-read only the versions). */
  rows: ContainerRow[];
}

export class Orchestrator {
  /** Services waiting for placement, per namespace, while a batch of that namespace is being planned. */
  private readonly placing = new Map<string, WaitingPlacement[]>();
  /** A batch's snapshot, kept for the next batch of its namespace while nothing it holds changed. */
  private readonly snapshots: PlacementSnapshots;

  constructor(private readonly d: OrchestratorDeps) {
    this.snapshots = new PlacementSnapshots(d.store);
  }

  private get store() {
    return this.d.store;
  }

  // ---- records -----------------------------------------------------------------------------------

  /**
   * The service's state from its containers, with the timestamps that go with reaching it.
   * `keepTransitional`: leave a service an operation is working on alone (observers such as the
   * reconciler, which may have read the service before the operation began).
   */
  async settleService(
    uuid: string,
    opts: { keepTransitional?: boolean } = {},
  ): Promise<ServiceRow | undefined> {
    const containers = await this.store.services.containerHeadsOfService(uuid);
    const now = this.d.clock.now();
    return this.store.mutate("service", uuid, (s) => {
      if (s.state === "Terminated") return undefined;
      if (opts.keepTransitional && SERVICE_TRANSITIONAL.includes(s.state as ServiceState)) return undefined;
      const state = settledServiceState(
        containers.map((c) => c.state),
        specOf(s).deployment_strategy === "EVERY_NODE" ? 0 : s.target_num_containers,
      );
      const patch: Partial<ServiceRow> = { state };
      if ((state === "Running" || state === "Partly running") && s.state !== state) patch.started_at = now;
      if (state === "Stopped" && s.state !== "Stopped") patch.stopped_at = now;
      return state === s.state ? undefined : patch;
    });
  }

  /**
   * What placement needs of a namespace, read once per plan: its live nodes, its live containers
   * with what each claims (from its service's definition), counted into a PlacementState.
   */
  private async placementSnapshot(store: Store, namespace: string): Promise<Snapshot> {
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
    return { state: new PlacementState(nodes, containers), numbers };
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

  /** Plans placements to reach the target (or every eligible node); the plan explains refusals. */
  async planFor(s: ServiceRow, wanted: number): Promise<PlacementPlan> {
    const { state, numbers } = await this.placementSnapshot(this.store, s.namespace);
    return state.plan(Orchestrator.request(s, numbers.get(s.uuid)?.length ?? 0, wanted));
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
  private async place(
    s: ServiceRow,
    log: Log,
  ): Promise<{ shortfall: string[] | undefined; placed: ContainerRow[] }> {
    const result = await new Promise<Placed>((resolve, reject) => {
      const waiting = this.placing.get(s.namespace);
      if (waiting) waiting.push({ service: s, resolve, reject });
      else {
        this.placing.set(s.namespace, [{ service: s, resolve, reject }]);
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
        const placed = await this.placeBatch(
          namespace,
          batch.map((w) => w.service),
        );
        for (const [i, w] of batch.entries()) w.resolve(placed[i]!);
      } catch (err) {
        for (const w of batch) w.reject(err);
      }
    }
  }

  /**
   * One plan for several services over one snapshot, read in the transaction that writes the
   * container records (state Starting, made from each service's current definition) and their
   * change-feed entries: a plan is never made against state another plan has changed meanwhile.
   * The snapshot is the previous batch's when nothing it holds changed since (placement-snapshots.ts).
   */
  private async placeBatch(namespace: string, services: ServiceRow[]): Promise<Placed[]> {
    let generation = 0;
    let snapshot: Snapshot | undefined;
    let wrote = 0;
    const placed = await this.store.transaction(async (tx) => {
      // Read before the snapshot is (a commit after it moves the generation past what keep() expects).
      generation = this.snapshots.generation(namespace);
      snapshot = this.snapshots.take(namespace, generation) ?? (await this.placementSnapshot(tx, namespace));
      const { state, numbers } = snapshot;
      const plans: PlacementPlan[] = [];
      const records: NewContainer[] = [];
      const now = this.d.clock.now();
      for (const s of services) {
        const taken = numbers.get(s.uuid) ?? [];
        const plan = state.plan(Orchestrator.request(s, taken.length, s.target_num_containers));
        plans.push(plan);
        if (!plan.ok || plan.placements.length === 0) continue;
        const fresh = nextContainerNumbers(taken, plan.placements.length);
        numbers.set(s.uuid, [...taken, ...fresh]);
        for (const [i, node] of plan.placements.entries()) {
          const number = fresh[i]!;
          records.push(newContainerRow(s, node, number, now));
        }
      }
      const rows = new Map<string, ContainerRow[]>();
      for (const r of await tx.services.insertContainers(records)) addTo(rows, r.service_uuid, r);
      // One committed write of container rows (insertRows), told once to the snapshots.
      wrote = records.length > 0 ? 1 : 0;
      return plans.map((plan, i) => ({ plan, rows: rows.get(services[i]!.uuid) ?? [] }));
    });
    if (snapshot) this.snapshots.keep(namespace, snapshot, generation, wrote);
    return placed;
  }

  /** Fails the step (after what fits has started) when placement fell short. */
  private static failShort(shortfall: string[] | undefined): void {
    if (shortfall?.length) throw new Error(shortfall.join("; "));
  }

  /** The service's live containers, without their definitions (those who work on them read them once, marking them). */
  private async liveContainers(serviceUuid: string): Promise<ContainerHead[]> {
    return (await this.store.services.containerHeadsOfService(serviceUuid)).filter(
      (c) => c.state !== "Terminated",
    );
  }

  /** One at a time for sequential_deployment; otherwise `parallelism` per node. */
  private limit(s: ServiceRow): { perNode: number; total: number } {
    return specOf(s).sequential_deployment ? { perNode: 1, total: 1 } : this.parallel();
  }

  private parallel(): { perNode: number; total: number } {
    return { perNode: this.d.parallelism ?? 4, total: ACTION_PARALLELISM };
  }

  /** Starts every live container of the service (engine work in parallel, records written in batches). */
  private async startAll(s: ServiceRow, log: Log, placed: ContainerRow[] = []): Promise<void> {
    const containers = (await this.liveContainers(s.uuid)).filter((c) => c.desired !== "terminated");
    const marked = await this.markDesired(containers, "running", "starting", placed);
    const errors = await this.d.runtime.ensureRunningMany(Orchestrator.liveOf(containers, marked), {
      limits: this.limit(s),
      log,
    });
    if (errors.length) throw new Error(errors.map((e) => e.message).join("; "));
  }

  /** The records as marked, in the order listed, without those that ended meanwhile. */
  private static liveOf(listed: ContainerHead[], marked: Map<string, ContainerRow>): ContainerRow[] {
    return listed.flatMap((c) => {
      const r = marked.get(c.uuid);
      return r && r.state !== "Terminated" ? [r] : [];
    });
  }

  /**
   * Records what the user wants of the containers and, for those not already there, the phase the
   * operation puts them in (the API shows it until their engine step ends it). `known`: records
   * the operation has just written (its placements), read again only if they moved since.
   */
  private async markDesired(
    containers: ContainerHead[],
    desired: string,
    phase?: ContainerPhase,
    known: ContainerRow[] = [],
  ): Promise<Map<string, ContainerRow>> {
    return this.store.services.patchContainers(
      containers.map((c) => c.uuid),
      (r) => {
        const p: ContainerPatch = {};
        if (r.desired !== desired) p.desired = desired;
        if (
          phase &&
          r.phase !== phase &&
          r.state !== "Terminated" &&
          r.state !== (desired === "running" ? "Running" : "Stopped")
        ) {
          p.phase = phase;
        }
        return p;
      },
      { known: new Map(known.map((r) => [r.uuid, r])) },
    );
  }

  // ---- action kinds -------------------------------------------------------------------------------

  register(actions: ActionEngine): void {
    const kinds: ActionKind<never>[] = [
      this.serviceKind("service.start", "Service Start", "start", "Starting", (s, ctx) =>
        this.startSteps(s, ctx),
      ),
      this.serviceKind("service.stop", "Service Stop", "stop", "Stopping", (s, ctx) =>
        this.stopSteps(s, ctx),
      ),
      this.serviceKind("service.scale", "Service Scale", "scale", "Scaling", (s, ctx) =>
        this.scaleSteps(s, ctx),
      ),
      this.serviceKind("service.redeploy", "Service Redeploy", "redeploy", "Redeploying", (s, ctx) =>
        this.redeploySteps(s, ctx),
      ),
      this.terminateServiceKind(),
      this.containerKind("container.start", "Container Start", "start", "starting", async (c, ctx) => {
        await this.store.mutate("container", c.uuid, () => ({ desired: "running" }));
        await this.d.runtime.ensureRunning(c, ctx.log);
      }),
      this.containerKind("container.stop", "Container Stop", "stop", "stopping", async (c, ctx) => {
        await this.store.mutate("container", c.uuid, () => ({ desired: "stopped" }));
        await this.d.runtime.ensureStopped(c, ctx.log);
      }),
      this.containerKind(
        "container.redeploy",
        "Container Redeploy",
        "redeploy",
        "redeploying",
        async (c, ctx) => {
          const s = (await this.store.services.findService(c.service_uuid))!;
          await this.store.mutate("container", c.uuid, () => ({ desired: "running" }));
          await this.d.runtime.redeploy(c, ctx.log, {
            reuseVolumes: ctx.params.reuse_volumes !== false,
            specJson: s.spec,
            specVersion: s.spec_version,
          });
        },
      ),
      this.containerKind(
        "container.terminate",
        "Container Terminate",
        "terminate",
        "terminating",
        async (c, ctx) => {
          await this.store.mutate("container", c.uuid, () => ({ desired: "terminated" }));
          await this.d.runtime.ensureRemoved(c, ctx.log, { removeVolumes: true });
          // The service now wants one container fewer, so it does not put it back.
          await this.store.mutate("service", c.service_uuid, (s) => ({
            target_num_containers: Math.max(0, s.target_num_containers - 1),
          }));
        },
      ),
    ];
    for (const k of kinds) actions.register(k);
  }

  private serviceKind(
    kind: string,
    name: string,
    operation: string,
    transitional: ServiceState,
    work: (s: ServiceRow, ctx: Ctx<{ service: string; reuse_volumes?: boolean }>) => Promise<void>,
  ): ActionKind<never> {
    // `new_nodes`: a scale the reconciler enqueues so an EVERY_NODE service reaches new nodes
    // (routes never set it, so a user's scale of such a service is still refused).
    const k: ActionKind<ServiceActionParams> = {
      kind,
      name,
      params: ServiceActionParams,
      prepare: async (tx, { service, new_nodes }) => {
        const s = await tx.services.findService(service);
        if (!s) throw notFound("service");
        assertAllowed(SERVICE_OPERATIONS, `service ${s.name}`, s.state as ServiceState, operation);
        if (operation === "scale" && specOf(s).deployment_strategy === "EVERY_NODE" && !new_nodes) {
          throw conflict(
            `service ${s.name} is deployed on EVERY_NODE and cannot be scaled by hand`,
            "every_node",
          );
        }
        await tx.services.updateService(s, { state: transitional });
      },
      steps: [
        {
          name: operation,
          timeoutMs: 10 * 60_000,
          run: async (ctx) => {
            const s = await this.store.services.findService(ctx.params.service);
            if (!s) throw new Error("the service no longer exists");
            await work(s, ctx);
          },
        },
      ],
      finish: async (ctx) => {
        await this.settleAfter(ctx.params.service, ctx.log);
      },
    };
    return k as unknown as ActionKind<never>;
  }

  /**
   * The operation is over: containers a failed or canceled step left in a phase are observed
   * again and their phase ends, then the service settles. (The others hold what their engines
   * answered last, which the engine watcher and the reconciler keep so: asking every engine again
   * would cost a call per container.)
   */
  private async settleAfter(serviceUuid: string, log?: Log): Promise<void> {
    const live = await this.liveContainers(serviceUuid);
    const observed = await this.d.runtime.observeMany(
      // A container in a phase shows its phase's state (a restarting one shows Starting too).
      await this.store.services.containersByUuid(
        live.filter((c) => IN_PHASE_STATES.has(c.state)).map((c) => c.uuid),
      ),
      { perNode: this.parallel().perNode },
    );
    // Never created on its engine (its image could not be pulled, its node refused it): no record
    // is kept of a container that never ran; the service's state follows from the others.
    const never = new Set(
      live
        .map((c) => observed.get(c.uuid) ?? c)
        .filter((r) => r.state !== "Terminated" && !r.engine_id)
        .map((r) => r.uuid),
    );
    const now = this.d.clock.now();
    const ended = await this.store.services.patchContainers(
      [...new Set([...observed.keys(), ...never])],
      (r) => {
        if (r.destroyed_at !== null) return undefined;
        if (never.has(r.uuid) && !r.engine_id) {
          return { phase: null, desired: "terminated", destroyed_at: now };
        }
        return r.phase !== null ? { phase: null } : undefined;
      },
    );
    for (const uuid of never) {
      const r = ended.get(uuid);
      if (r?.state === "Terminated")
        await log?.(`Container ${r.name} never reached its engine; its record is removed`);
    }
    await this.settleService(serviceUuid);
  }

  private async startSteps(s: ServiceRow, ctx: Ctx<{ service: string }>): Promise<void> {
    await this.waitForLinkTargets(s, ctx);
    const { shortfall, placed } = await this.place(s, ctx.log);
    await this.startAll(s, ctx.log, placed);
    const now = this.d.clock.now();
    await this.store.mutate("service", s.uuid, (r) =>
      r.deployed_at === null ? { deployed_at: now } : undefined,
    );
    Orchestrator.failShort(shortfall);
  }

  /**
   * A container gets its links' variables and host names when it is created, and its environment
   * can never change afterwards: so a service starts only once every service it links to has a
   * running container with an address (stacks start in link order for the same reason; services
   * started one by one get the same rule). A target whose links lead back to this service (links
   * going round in a circle) is not waited for: neither could ever start first.
   */
  private async waitForLinkTargets(s: ServiceRow, ctx: Ctx<unknown>): Promise<void> {
    const links = specOf(s).linked_to_service.filter((l) => l.to_service !== s.uuid);
    if (links.length === 0) return;
    const circular = await this.linksBackTo(
      links.map((l) => l.to_service),
      s.uuid,
    );
    const targets = [...new Set(links.map((l) => l.to_service))].filter((u) => !circular.has(u));
    if (targets.length === 0) return;
    const timeoutMs = this.d.linkWaitMs ?? 120_000;
    const seconds = Math.round(timeoutMs / 1000);
    const deadline = Date.now() + timeoutMs;
    let logged = false;
    for (;;) {
      const services = await this.store.services.servicesByUuid(targets);
      const gone = targets.filter((u) => !services.some((x) => x.uuid === u && x.state !== "Terminated"));
      if (gone.length) {
        const names = links.filter((l) => gone.includes(l.to_service)).map((l) => l.name);
        throw new Error(
          `service ${s.name} links to a service that no longer exists (link ${names.join(", ")})`,
        );
      }
      const running = new Set(
        (await this.store.services.containersOfServices(targets, { states: ["Running"] }))
          .filter((c) => c.private_ip !== "")
          .map((c) => c.service_uuid),
      );
      // A target on the host network has no address of its own to link to: nothing to wait for.
      const waiting = services
        .filter((x) => !running.has(x.uuid) && specOf(x).net !== "host")
        .map((x) => x.name);
      if (waiting.length === 0) {
        if (logged) await ctx.log(`Linked services are running; starting ${s.name}`);
        return;
      }
      if (!logged) {
        await ctx.log(
          `Waiting for linked service(s) ${waiting.join(", ")} to have a running container (up to ${seconds} s), so that ${s.name}'s containers get their links`,
        );
        logged = true;
      }
      if (Date.now() >= deadline) {
        throw new Error(
          `linked service(s) ${waiting.join(", ")} had no running container after ${seconds} s; start ${waiting.length > 1 ? "them" : "it"}, then start ${s.name} again`,
        );
      }
      if (ctx.signal.aborted) throw new Error("canceled while waiting for linked services");
      await new Promise((resolve) => setTimeout(resolve, LINK_WAIT_POLL_MS));
    }
  }

  /** Which of `from` lead through their links (any number of them) back to `to`. */
  private async linksBackTo(from: string[], to: string): Promise<Set<string>> {
    const out = new Set<string>();
    for (const start of new Set(from)) {
      const seen = new Set<string>();
      let level = [start];
      while (level.length && !out.has(start)) {
        const next: string[] = [];
        for (const svc of await this.store.services.servicesByUuid(level.filter((u) => !seen.has(u)))) {
          seen.add(svc.uuid);
          for (const l of specOf(svc).linked_to_service) {
            if (l.to_service === to) out.add(start);
            else if (!seen.has(l.to_service)) next.push(l.to_service);
          }
        }
        level = next;
      }
    }
    return out;
  }

  private async stopSteps(s: ServiceRow, ctx: Ctx<{ service: string }>): Promise<void> {
    const containers = await this.liveContainers(s.uuid);
    const marked = await this.markDesired(containers, "stopped", "stopping");
    const errors = await this.d.runtime.ensureStoppedMany(Orchestrator.liveOf(containers, marked), {
      limits: this.parallel(),
      log: ctx.log,
    });
    if (errors.length) throw new Error(errors.map((e) => e.message).join("; "));
  }

  private async scaleSteps(s: ServiceRow, ctx: Ctx<{ service: string }>): Promise<void> {
    const live = await this.liveContainers(s.uuid);
    // EVERY_NODE services record a target of 0: they only ever grow onto new nodes here.
    const everyNode = specOf(s).deployment_strategy === "EVERY_NODE";
    if (!everyNode && live.length > s.target_num_containers) {
      const nodes = (await this.store.nodes.liveNodeSummaries(s.namespace)).map((n) => ({
        uuid: n.uuid,
        name: n.nickname,
        state: n.state,
        tags: tagsOf(n),
      }));
      const doomed = planRemoval({
        service: s.uuid,
        count: live.length - s.target_num_containers,
        nodes,
        containers: live.map((c) => ({
          uuid: c.uuid,
          node: c.node_uuid,
          service: s.uuid,
          state: c.state,
          number: c.number,
        })),
      });
      await ctx.log(`Removing ${doomed.length} container(s) of ${s.name}`);
      const marked = await this.store.services.patchContainers(doomed, () => ({
        desired: "terminated",
        phase: "terminating",
      }));
      const errors = await this.d.runtime.ensureRemovedMany([...marked.values()], {
        limits: this.parallel(),
        log: ctx.log,
        removeVolumes: true,
      });
      if (errors.length) throw new Error(errors.map((e) => e.message).join("; "));
      return;
    }
    // New containers run only if the service runs; a stopped service gets them at its next start.
    const wasRunning = live.some((c) => c.desired === "running");
    if (!wasRunning && live.length > 0) return;
    if (live.length === 0 && s.deployed_at === null) return;
    const { shortfall, placed } = await this.place(s, ctx.log);
    await this.startAll(s, ctx.log, placed);
    Orchestrator.failShort(shortfall);
  }

  private async redeploySteps(
    s: ServiceRow,
    ctx: Ctx<{ service: string; reuse_volumes?: boolean }>,
  ): Promise<void> {
    const { shortfall, placed } = await this.place(s, ctx.log);
    const containers = await this.liveContainers(s.uuid);
    const marked = await this.markDesired(containers, "running", "redeploying", placed);
    // Every container moves to the definition as it is when the redeploy begins.
    const fresh = (await this.store.services.findService(s.uuid)) ?? s;
    const errors = await this.d.runtime.redeployMany(Orchestrator.liveOf(containers, marked), {
      limits: this.limit(s),
      log: ctx.log,
      reuseVolumes: ctx.params.reuse_volumes !== false,
      specJson: fresh.spec,
      specVersion: fresh.spec_version,
    });
    if (errors.length) throw new Error(errors.map((e) => e.message).join("; "));
    const now = this.d.clock.now();
    await this.store.mutate("service", s.uuid, () => ({ deployed_at: now }));
    Orchestrator.failShort(shortfall);
  }

  private terminateServiceKind(): ActionKind<never> {
    const k: ActionKind<ServiceTerminateParams> = {
      kind: "service.terminate",
      params: ServiceTerminateParams,
      name: "Service Terminate",
      prepare: async (tx, { service }) => {
        const s = await tx.services.findService(service);
        if (!s) throw notFound("service");
        assertAllowed(SERVICE_OPERATIONS, `service ${s.name}`, s.state as ServiceState, "terminate");
        await tx.services.updateService(s, { state: "Terminating" });
      },
      steps: [
        {
          name: "remove containers",
          timeoutMs: 10 * 60_000,
          run: (ctx) => this.removeAll(ctx.params.service, ctx.log),
        },
        {
          name: "revoke the service's key",
          run: async (ctx) => {
            await this.d.revokeServiceKey(ctx.params.service);
          },
        },
      ],
      finish: (ctx, outcome) => this.finishTerminate(ctx.params.service, outcome),
    };
    return k as unknown as ActionKind<never>;
  }

  private async removeAll(serviceUuid: string, log: Log): Promise<void> {
    const containers = await this.liveContainers(serviceUuid);
    const marked = await this.markDesired(containers, "terminated", "terminating");
    const errors = await this.d.runtime.ensureRemovedMany(Orchestrator.liveOf(containers, marked), {
      limits: this.parallel(),
      log,
      removeVolumes: true,
    });
    if (errors.length) throw new Error(errors.map((e) => e.message).join("; "));
  }

  private async finishTerminate(serviceUuid: string, outcome: Outcome): Promise<void> {
    const live = await this.liveContainers(serviceUuid);
    if (outcome === "Success" && live.length === 0) {
      const now = this.d.clock.now();
      await this.store.mutate("service", serviceUuid, () => ({ state: "Terminated", destroyed_at: now }));
    } else {
      await this.settleAfter(serviceUuid);
    }
  }

  // ---- service operations inside another action (stacks) ------------------------------------------

  /**
   * Does the work of a service operation inside another action's step: a stack runs its services'
   * work in its own action, whose log then shows it. The caller has already moved the service to
   * the operation's transitional state (as the kind's `prepare` does) and calls `finishOperation`
   * afterwards, whatever happened. Idempotent, like the kinds' steps.
   */
  async runOperation(
    operation: InlineOperation,
    serviceUuid: string,
    ctx: StepContext<unknown>,
    opts: { reuseVolumes?: boolean } = {},
  ): Promise<void> {
    const s = await this.store.services.findService(serviceUuid);
    if (!s) throw new Error("the service no longer exists");
    const sctx = { ...ctx, params: { service: s.uuid, reuse_volumes: opts.reuseVolumes } };
    if (operation === "start") await this.startSteps(s, sctx);
    else if (operation === "stop") await this.stopSteps(s, sctx);
    else if (operation === "redeploy") await this.redeploySteps(s, sctx);
    else {
      await this.removeAll(s.uuid, ctx.log);
      await this.d.revokeServiceKey(s.uuid);
    }
  }

  /** Leaves the service in a truthful state after `runOperation`, as the operation's kind does when it ends. */
  async finishOperation(operation: InlineOperation, serviceUuid: string, outcome: Outcome): Promise<void> {
    if (operation === "terminate") await this.finishTerminate(serviceUuid, outcome);
    else await this.settleAfter(serviceUuid);
  }

  private containerKind(
    kind: string,
    name: string,
    operation: string,
    phase: ContainerPhase,
    work: (c: ContainerRow, ctx: Ctx<{ container: string; reuse_volumes?: boolean }>) => Promise<void>,
  ): ActionKind<never> {
    const k: ActionKind<ContainerActionParams> = {
      kind,
      name,
      params: ContainerActionParams,
      prepare: async (tx, { container }) => {
        const c = await tx.services.findContainer(container);
        if (!c) throw notFound("container");
        assertAllowed(CONTAINER_OPERATIONS, `container ${c.name}`, c.state as ContainerState, operation);
        const s = await tx.services.findService(c.service_uuid);
        if (s && ["Starting", "Stopping", "Scaling", "Redeploying", "Terminating"].includes(s.state)) {
          throw conflict(
            `service ${s.name} is ${s.state}; wait until it settles to ${operation} one of its containers`,
            "invalid_state",
          );
        }
        await tx.services.updateContainer(c, { phase });
      },
      steps: [
        {
          name: operation,
          timeoutMs: 5 * 60_000,
          run: async (ctx) => {
            const c = await this.store.services.findContainer(ctx.params.container);
            if (!c) throw new Error("the container no longer exists");
            await work(c, ctx);
          },
        },
      ],
      finish: async (ctx) => {
        const c = await this.store.services.findContainer(ctx.params.container);
        if (!c) return;
        // A failed or canceled step may have left the phase: the engine is asked again, then the
        // action's phase ends (the API shows what the engine said).
        if (c.state !== "Terminated") await this.d.runtime.observe(c.uuid).catch(() => undefined);
        await this.store.mutate("container", c.uuid, (r) =>
          r.phase === phase ? { phase: null } : undefined,
        );
        await this.settleService(c.service_uuid, { keepTransitional: true });
      },
    };
    return k as unknown as ActionKind<never>;
  }
}

export { containerUri, serviceUri };
