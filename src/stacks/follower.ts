// The stack follower: follows the change feed (store/follow.ts) and settles a stack (its state from
// its services) when a service under it changes or an action on it ends. The feed is the source of
// truth; a poll covers other replicas' commits. Settling itself belongs to StackService.
import { actionEnded } from "../domain/states.ts";
import { parseObjectUri } from "../domain/uri.ts";
import { parentsOf } from "../store/codec.ts";
import { type Follower, follow } from "../store/follow.ts";
import type { ChangeRow, Store } from "../store/store.ts";

export interface FollowerDeps {
  store: Store;
  pollMs?: number;
  onError?(err: unknown): void;
  /** Records a stack's state from its services (unless an operation of it is under way). */
  settle(stackUuid: string): Promise<void>;
}

export class StackFollower {
  private follower: Follower | undefined;
  private running = false;

  constructor(private readonly d: FollowerDeps) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    const { store } = this.d;
    void (async () => {
      const from = await store.latestRevision();
      for (const st of await store.stacks.liveStacks()) await this.d.settle(st.uuid);
      if (!this.running) return;
      this.follower = follow(store, {
        from,
        // Only the entries that can move a stack (a large deploy's container entries stay in SQL),
        // and only their commits wake it: a burst of container changes does not make it read.
        types: ["service", "action"],
        wakesOn: (type) => type === "service" || type === "action" || type === "",
        pollMs: this.d.pollMs ?? 2000,
        onPage: (rows) => this.settleStacksOf(rows),
        onError: this.d.onError,
      });
    })().catch((err) => this.d.onError?.(err));
  }

  stop(): void {
    this.running = false;
    this.follower?.stop();
    this.follower = undefined;
  }

  private async settleStacksOf(changes: readonly ChangeRow[]): Promise<void> {
    const stacks = new Set<string>();
    for (const c of changes) {
      if (c.type !== "service" && !(c.type === "action" && actionEnded(c.state))) continue;
      for (const parent of parentsOf(c)) {
        const p = parseObjectUri(parent);
        if (p?.subsystem === "app" && p.resource === "stack" && p.namespace !== undefined) stacks.add(p.id);
      }
    }
    for (const uuid of stacks) await this.d.settle(uuid);
  }
}
