// Drain before leave (issue 30): before the runtime stops, removes or redeploys engine containers,
// they are taken out of every router of their namespace and the runtime waits until the routers
// run without them (and a short grace for requests in flight), so no request is sent to a
// container that is going away. What is drained is kept in memory, by engine container (record
// and generation): a redeployed record's new engine container is routed again once it runs.
import { drainKey } from "../domain/router-config.ts";
import type { ContainerRow } from "../store/services.ts";

/** How long a drained engine container stays out of the routes (it is gone long before). */
const DRAINED_FOR_MS = 10 * 60_000;

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

export class Drains {
  private readonly until = new Map<string, number>();

  constructor(private readonly d: DrainsDeps) {}

  /** The engine containers being drained now (`<uuid>:<generation>`). */
  current(now = Date.now()): Set<string> {
    for (const [k, t] of this.until) if (t <= now) this.until.delete(k);
    return new Set(this.until.keys());
  }

  /** Takes the engine containers out of their routers and waits until the routers run without them. */
  async drain(rows: readonly ContainerRow[]): Promise<void> {
    const live = rows.filter((c) => c.engine_id && c.state !== "Stopped" && c.state !== "Terminated");
    if (live.length === 0) return;
    const namespaces = new Set<string>();
    for (const c of live) {
      if (await this.d.routes(c.namespace)) namespaces.add(c.namespace);
    }
    if (namespaces.size === 0) return;
    const until = Date.now() + DRAINED_FOR_MS;
    for (const c of live) if (namespaces.has(c.namespace)) this.until.set(drainKey(c), until);
    await this.d.push(namespaces, this.d.timeoutMs);
    if (this.d.graceMs > 0) await new Promise((r) => setTimeout(r, this.d.graceMs));
  }
}
