// The node health watcher: pings every node's engine on an interval. `last_seen` moves while it
// answers; a node silent for longer than the grace becomes Unreachable; one that answers again
// is Deployed again. Each state change goes through the change feed (`Store.mutate`).
// With several replicas, each pings only the nodes it owns (Duties, ops/replicas.ts).
import { type Duties, SOLO_DUTIES } from "../domain/duties.ts";
import type { Store } from "../store/store.ts";
import type { NodeProbe } from "./probe.ts";

export class HealthWatcher {
  private timer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(
    private readonly opts: {
      store: Store;
      probe: NodeProbe;
      intervalMs: number;
      duties?: Duties;
      onError?(err: unknown): void;
    },
  ) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.sweep(), this.opts.intervalMs);
    this.timer.unref();
    void this.sweep();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Probes nodes now (a node this replica just took over is checked without waiting). */
  async probeNow(uuids: string[]): Promise<void> {
    await Promise.all(
      uuids.map((u) =>
        this.opts.probe.probe(u, { immediate: false }).catch((err) => this.opts.onError?.(err)),
      ),
    );
  }

  /** One pass over every node that should be answering and is this replica's; exposed for tests. */
  async sweep(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      const nodes = (await this.opts.store.nodes.liveNodes()).filter(
        (n) =>
          (n.state === "Deployed" ||
            n.state === "Unreachable" ||
            // An agent's node waiting for its first tunnel: Unreachable if it never comes.
            (n.state === "Deploying" && n.engine_url.startsWith("tunnel://"))) &&
          n.engine_url &&
          (this.opts.duties ?? SOLO_DUTIES).ownsNode(n.uuid),
      );
      await Promise.all(
        nodes.map((n) =>
          this.opts.probe.probe(n.uuid, { immediate: false }).catch((err) => this.opts.onError?.(err)),
        ),
      );
    } catch (err) {
      this.opts.onError?.(err);
    } finally {
      this.running = false;
    }
  }
}
