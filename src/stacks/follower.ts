// The stack follower: reads the change feed and settles a stack (its state from its services) when a
// service under it changes or an action on it ends. The feed is the source of truth; a poll covers
// other replicas' commits. Settling itself belongs to StackService.
import { actionEnded } from "../domain/states.ts";
import { parseObjectUri } from "../domain/uri.ts";
import type { Store } from "../store/store.ts";

export interface FollowerDeps {
  store: Store;
  pollMs?: number;
  onError?(err: unknown): void;
  /** Records a stack's state from its services (unless an operation of it is under way). */
  settle(stackUuid: string): Promise<void>;
}

const PAGE = 500;

export class StackFollower {
  private revision: number | undefined;
  private following = false;
  private refollow = false;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly d: FollowerDeps) {}

  start(): void {
    if (this.unsubscribe) return;
    const { store } = this.d;
    // Only a service's change or an action's can change a stack's state: a burst of container
    // changes (a large deploy commits hundreds a second) does not make it read the feed each time.
    this.unsubscribe = store.onChange((type) => {
      if (type === "service" || type === "action" || type === "") this.wake();
    });
    this.timer = setInterval(() => this.wake(), this.d.pollMs ?? 2000);
    this.timer.unref();
    void (async () => {
      this.revision = await store.latestRevision();
      for (const st of await store.stacks.liveStacks()) await this.d.settle(st.uuid);
    })()
      .catch((err) => this.d.onError?.(err))
      .finally(() => this.wake());
  }

  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    if (this.timer) clearInterval(this.timer);
  }

  private wake(): void {
    if (!this.unsubscribe || this.revision === undefined) return;
    if (this.following) {
      this.refollow = true;
      return;
    }
    this.following = true;
    void this.follow()
      .catch((err) => this.d.onError?.(err))
      .finally(() => {
        this.following = false;
        if (this.refollow) {
          this.refollow = false;
          this.wake();
        }
      });
  }

  private async follow(): Promise<void> {
    for (;;) {
      // Only the entries that can move a stack (a large deploy's container entries stay in SQL).
      const changes = await this.d.store.changesSince(this.revision!, PAGE, ["service", "action"]);
      if (!changes.length || !this.unsubscribe) return;
      const stacks = new Set<string>();
      for (const c of changes) {
        if (c.type !== "service" && !(c.type === "action" && actionEnded(c.state))) continue;
        for (const parent of JSON.parse(c.parents) as string[]) {
          const p = parseObjectUri(parent);
          if (p?.subsystem === "app" && p.resource === "stack" && p.namespace !== undefined) stacks.add(p.id);
        }
      }
      for (const uuid of stacks) await this.d.settle(uuid);
      this.revision = changes.at(-1)!.revision;
      if (changes.length < PAGE) return;
    }
  }
}
