// Drain before leave (issue 30): before the runtime stops, removes or redeploys engine containers,
// they are taken out of every router of their namespace and the runtime waits until the routers
// run without them (and a short grace for requests in flight), so no request is sent to a
// container that is going away. What is drained is kept by engine container (record and
// generation): a redeployed record's new engine container is routed again once it runs. It is
// kept in the database (store/router.ts, router_drains), so every replica builds the same routes
// whichever replica's action drained: two replicas never hand a router different configurations.
//
// A start-first redeploy holds instead (issue 29): the record moves to its new generation while
// its old engine container keeps serving, routed as it was, until the new one is ready; then the
// runtime releases it, which drains it like any leaving container before it is stopped. So a
// start-first redeploy never takes a container out of the routes before its replacement serves.
//
// A hold follows its rollout (issues 29 and 30): while the rollout runs, a hold lasts at most
// BERTH_ROUTER_HOLD_MAX_MS (a safety cap for a rollout that died); a rollout paused after a failure
// turns its holds into paused ones, kept routed with no time limit for as long as it is paused.
// What ends the pause releases them at once: a redeploy (the resumed rollout, a manual rollback)
// takes the record's holds over and releases them once its replacement is ready; a stop, a scale
// down or a terminate drains them. The router controller's periodic pass (sweep) releases any hold
// that outlived its record (gone, or no longer meant to run) or, still running-kind, its action
// (none holds the service any more), so a hold never outlives its rollout after a crash either.
import { drainKey, type RouterContainer } from "../domain/router-config.ts";
import { held as actionHolds, serviceObjects } from "../orchestrator/controllers/context.ts";
import { type DrainRow, RouterStore } from "../store/router.ts";
import type { ContainerRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";

/** How long a drained engine container stays out of the routes (it is gone long before). */
const DRAINED_FOR_MS = 10 * 60_000;
/** The `until` of a paused hold: it lasts as long as its rollout is paused (released explicitly or by sweep). */
const PAUSED_UNTIL = Number.MAX_SAFE_INTEGER;
/** A running-kind hold no action holds the service of is left alone this long (its action may be resuming). */
const ORPHANED_HOLD_GRACE_MS = 60_000;

export interface DrainsDeps {
  store: Store;
  now(): number;
  /** Routers of these namespaces get their configuration again; resolves once they have it (or the wait ends). */
  push(namespaces: ReadonlySet<string>, timeoutMs: number): Promise<void>;
  /** Milliseconds waited after the push for requests in flight to end. */
  graceMs: number;
  /** Longest wait for the routers. */
  timeoutMs: number;
  /** Whether a namespace has routes at all (no router to wait for otherwise). */
  routes(namespace: string): Promise<boolean>;
  /** Longest a hold of a running rollout stays routed (BERTH_ROUTER_HOLD_MAX_MS); paused holds have no limit. */
  holdMaxMs?: number;
}

/** BERTH_ROUTER_HOLD_MAX_MS's default (config/router.ts). */
const HOLD_MAX_MS = 30 * 60_000;

/** Whether a container row is routed now (so worth holding): the routes' own rule, without drains. */
function serving(c: ContainerRow): boolean {
  return (
    c.state === "Running" &&
    c.desired === "running" &&
    c.phase === null &&
    c.private_ip !== "" &&
    (c.health === null || c.health === "healthy")
  );
}

/** What a namespace's routes leave out and keep (domain/router-config.ts RoutesInput). */
export interface DrainState {
  draining: Set<string>;
  held: RouterContainer[];
}

/**
 * A revision of a namespace's drains and holds: two reads give the same one only when nothing was
 * drained, held or released between them (the controller compares the one its build read with
 * the current one before handing a router that build).
 */
export function drainsRevision(state: DrainState): string {
  return JSON.stringify([
    [...state.draining].sort(),
    state.held.map((c) => `${c.uuid}/${c.generation}`).sort(),
  ]);
}

export class Drains {
  private readonly rows: RouterStore;
  private sweeping: Promise<number> | undefined;

  constructor(private readonly d: DrainsDeps) {
    this.rows = new RouterStore(d.store);
  }

  /** The engine containers of a namespace being drained now, and those held routed while their records move. */
  async state(namespace: string): Promise<DrainState> {
    const rows = await this.rows.drainsOf(namespace, this.d.now());
    return {
      draining: new Set(rows.filter((r) => r.kind === "drain").map((r) => r.key)),
      held: rows
        .filter((r) => (r.kind === "hold" || r.kind === "paused") && r.container)
        .map((r) => JSON.parse(r.container!) as RouterContainer),
    };
  }

  /** Takes the engine containers out of their routers and waits until the routers run without them. */
  async drain(rows: readonly ContainerRow[]): Promise<void> {
    const live = rows.filter((c) => c.engine_id && c.state !== "Stopped" && c.state !== "Terminated");
    const until = this.d.now() + DRAINED_FOR_MS;
    // What the records still hold from a start-first redeploy leaves with them.
    const released = await this.rows.releaseHolds(
      rows.map((c) => c.uuid),
      until,
    );
    const namespaces = new Set(released.map((r) => r.namespace));
    for (const c of live) {
      if (!namespaces.has(c.namespace) && (await this.d.routes(c.namespace))) namespaces.add(c.namespace);
    }
    if (namespaces.size === 0) return;
    await this.rows.putDrains(
      live.filter((c) => namespaces.has(c.namespace)).map((c) => drainRow(c, until)),
      this.d.now(),
    );
    await this.pushAndWait(namespaces);
  }

  /**
   * Keeps the records' engine containers routed as they are now while the records move to a new
   * generation (a start-first redeploy), until release(). A container not routed now is not held.
   */
  async hold(rows: readonly ContainerRow[]): Promise<void> {
    const until = this.d.now() + (this.d.holdMaxMs ?? HOLD_MAX_MS);
    const held: DrainRow[] = [];
    for (const c of rows) {
      if (!c.engine_id || !serving(c) || !(await this.d.routes(c.namespace))) continue;
      const routed: RouterContainer = {
        uuid: c.uuid,
        service_uuid: c.service_uuid,
        name: c.name,
        state: c.state,
        desired: c.desired,
        phase: null,
        private_ip: c.private_ip,
        generation: c.generation,
        health: c.health,
        node_uuid: c.node_uuid ?? undefined,
      };
      held.push({ ...drainRow(c, until), kind: "hold", container: JSON.stringify(routed) });
    }
    if (held.length > 0) await this.rows.putDrains(held, this.d.now());
  }

  /**
   * The records' replacements are ready: their held engine containers are drained (taken out of
   * the routers, which are waited for, then the grace) before the runtime stops them.
   */
  async release(rows: readonly Pick<ContainerRow, "uuid">[]): Promise<void> {
    const released = await this.rows.releaseHolds(
      rows.map((c) => c.uuid),
      this.d.now() + DRAINED_FOR_MS,
    );
    if (released.length > 0) await this.pushAndWait(new Set(released.map((r) => r.namespace)));
  }

  /**
   * The rollout of the records paused after a failure: their holds stay routed, without a time
   * limit, until what ends the pause releases them (a redeploy, a stop, a terminate; see above).
   */
  async pause(containerUuids: readonly string[]): Promise<void> {
    await this.rows.pauseHolds(containerUuids, PAUSED_UNTIL);
  }

  /**
   * Releases (drains) the holds that outlived what they were for: their record is gone or no
   * longer meant to run, or (a running rollout's hold, not a paused one) no action holds the
   * service any more. Run by the router controller's periodic pass; answers how many it released.
   */
  sweep(): Promise<number> {
    // One at a time: a pass that comes while one releases (and waits for the routers) shares it.
    this.sweeping ??= this.sweepOnce().finally(() => {
      this.sweeping = undefined;
    });
    return this.sweeping;
  }

  private async sweepOnce(): Promise<number> {
    const now = this.d.now();
    const holds = (await this.rows.drainsOf(undefined, now)).filter(
      (r) => r.kind === "hold" || r.kind === "paused",
    );
    if (holds.length === 0) return 0;
    const records = new Map(
      (await this.d.store.services.containersByUuid([...new Set(holds.map((h) => h.container_uuid))])).map(
        (c) => [c.uuid, c],
      ),
    );
    const services = new Map(
      (
        await this.d.store.services.servicesByUuid([
          ...new Set([...records.values()].map((c) => c.service_uuid)),
        ])
      ).map((x) => [x.uuid, x]),
    );
    const gone = new Set<string>();
    for (const h of holds) {
      const c = records.get(h.container_uuid);
      if (!c || c.destroyed_at !== null || c.desired !== "running") gone.add(h.container_uuid);
      else if (
        h.kind === "hold" &&
        now - (Number(h.until) - (this.d.holdMaxMs ?? HOLD_MAX_MS)) >= ORPHANED_HOLD_GRACE_MS
      ) {
        const s = services.get(c.service_uuid);
        if (!s || !(await actionHolds(this.d.store, serviceObjects(s)))) gone.add(h.container_uuid);
      }
    }
    if (gone.size === 0) return 0;
    const released = await this.rows.releaseHolds([...gone], now + DRAINED_FOR_MS);
    if (released.length > 0) await this.pushAndWait(new Set(released.map((r) => r.namespace)));
    return released.length;
  }

  private async pushAndWait(namespaces: ReadonlySet<string>): Promise<void> {
    await this.d.push(namespaces, this.d.timeoutMs);
    if (this.d.graceMs > 0) await new Promise((r) => setTimeout(r, this.d.graceMs));
  }
}

function drainRow(c: ContainerRow, until: number): DrainRow {
  return {
    key: drainKey(c),
    namespace: c.namespace,
    container_uuid: c.uuid,
    kind: "drain",
    container: null,
    until,
  };
}
