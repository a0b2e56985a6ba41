// Drain before leave (issue 30): before the runtime stops, removes or redeploys engine containers,
// they are taken out of every router of their namespace and the runtime waits until the routers
// run without them (and a short grace for requests in flight), so no request is sent to a
// container that is going away. What is drained is kept in memory, by engine container (record
// and generation): a redeployed record's new engine container is routed again once it runs.
//
// A start-first redeploy holds instead (issue 29): the record moves to its new generation while
// its old engine container keeps serving, routed as it was, until the new one is ready; then the
// runtime releases it, which drains it like any leaving container before it is stopped. So a
// start-first redeploy never takes a container out of the routes before its replacement serves.
import { drainKey, type RouterContainer } from "../domain/router-config.ts";
import type { ContainerRow } from "../store/services.ts";

/** How long a drained engine container stays out of the routes (it is gone long before). */
const DRAINED_FOR_MS = 10 * 60_000;
/** How long a held engine container stays routed at most (a rollout paused after a failure keeps it running). */
const HELD_FOR_MS = 30 * 60_000;

export interface DrainsDeps {
  /** Routers of these namespaces get their configuration again; resolves once they have it (or the wait ends). */
  push(namespaces: ReadonlySet<string>, timeoutMs: number): Promise<void>;
  /** Milliseconds waited after the push for requests in flight to end. */
  graceMs: number;
  /** Longest wait for the routers. */
  timeoutMs: number;
  /** Whether a namespace has routes at all (no router to wait for otherwise). */
  routes(namespace: string): Promise<boolean>;
}

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

export class Drains {
  private readonly until = new Map<string, number>();
  private readonly held = new Map<string, { c: RouterContainer & { namespace: string }; until: number }>();

  constructor(private readonly d: DrainsDeps) {}

  /** The engine containers being drained now (`<uuid>:<generation>`). */
  current(now = Date.now()): Set<string> {
    for (const [k, t] of this.until) if (t <= now) this.until.delete(k);
    return new Set(this.until.keys());
  }

  /** The engine containers held routed while their records move (see hold()). */
  holding(now = Date.now()): (RouterContainer & { namespace: string })[] {
    for (const [k, h] of this.held) if (h.until <= now) this.held.delete(k);
    return [...this.held.values()].map((h) => h.c);
  }

  /** Takes the engine containers out of their routers and waits until the routers run without them. */
  async drain(rows: readonly ContainerRow[]): Promise<void> {
    const live = rows.filter((c) => c.engine_id && c.state !== "Stopped" && c.state !== "Terminated");
    // What the records still hold from a start-first redeploy leaves with them.
    const namespaces = this.releaseHeld(new Set(rows.map((c) => c.uuid)));
    for (const c of live) {
      if (!namespaces.has(c.namespace) && (await this.d.routes(c.namespace))) namespaces.add(c.namespace);
    }
    if (namespaces.size === 0) return;
    const until = Date.now() + DRAINED_FOR_MS;
    for (const c of live) if (namespaces.has(c.namespace)) this.until.set(drainKey(c), until);
    await this.pushAndWait(namespaces);
  }

  /**
   * Keeps the records' engine containers routed as they are now while the records move to a new
   * generation (a start-first redeploy), until release(). A container not routed now is not held.
   */
  async hold(rows: readonly ContainerRow[]): Promise<void> {
    const until = Date.now() + HELD_FOR_MS;
    for (const c of rows) {
      if (!c.engine_id || !serving(c) || !(await this.d.routes(c.namespace))) continue;
      this.held.set(drainKey(c), {
        until,
        c: {
          uuid: c.uuid,
          namespace: c.namespace,
          service_uuid: c.service_uuid,
          name: c.name,
          state: c.state,
          desired: c.desired,
          phase: null,
          private_ip: c.private_ip,
          generation: c.generation,
          health: c.health,
        },
      });
    }
  }

  /**
   * The records' replacements are ready: their held engine containers are drained (taken out of
   * the routers, which are waited for, then the grace) before the runtime stops them.
   */
  async release(rows: readonly Pick<ContainerRow, "uuid">[]): Promise<void> {
    const namespaces = this.releaseHeld(new Set(rows.map((c) => c.uuid)));
    if (namespaces.size > 0) await this.pushAndWait(namespaces);
  }

  /** Moves the records' held engine containers to the drained ones; answers their namespaces. */
  private releaseHeld(records: ReadonlySet<string>): Set<string> {
    const namespaces = new Set<string>();
    const until = Date.now() + DRAINED_FOR_MS;
    for (const [k, h] of this.held) {
      if (!records.has(h.c.uuid)) continue;
      this.held.delete(k);
      this.until.set(k, until);
      namespaces.add(h.c.namespace);
    }
    return namespaces;
  }

  private async pushAndWait(namespaces: ReadonlySet<string>): Promise<void> {
    await this.d.push(namespaces, this.d.timeoutMs);
    if (this.d.graceMs > 0) await new Promise((r) => setTimeout(r, this.d.graceMs));
  }
}
