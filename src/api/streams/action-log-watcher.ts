// The watcher of followed action logs: log lines are not in the change feed, so one watcher reads
// new lines for every followed action together (one query per followed action per tick, however
// many sockets follow it) and sends them to each follower's socket.
import type { WebSocket } from "ws";
import { actionEnded } from "../../domain/states.ts";
import type { Store } from "../../store/store.ts";
import { CLOSE, closeSocket, isOpen, sendJson } from "./sockets.ts";

/** How often followed actions are read for new lines (state changes also wake the watcher). */
const ACTION_LOG_POLL_MS = 250;

interface ActionLogRow {
  id: number;
  ts: number;
  line: string;
}

export function logFrame(row: ActionLogRow) {
  return { type: "log", log: row.line, timestamp: Math.floor(row.ts / 1000) };
}

export interface Follower {
  ws: WebSocket;
  /** Id of the last line sent. */
  afterId: number;
  maxBufferedBytes: number;
}

export class ActionLogWatcher {
  private readonly followed = new Map<string, Set<Follower>>();
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private ticking = false;
  private again = false;

  constructor(private readonly opts: { store: Store; onError(err: unknown): void }) {}

  follow(actionUuid: string, follower: Follower): () => void {
    let set = this.followed.get(actionUuid);
    if (!set) {
      set = new Set();
      this.followed.set(actionUuid, set);
    }
    set.add(follower);
    if (!this.timer) {
      this.timer = setInterval(() => this.wake(), ACTION_LOG_POLL_MS);
      this.timer.unref();
      // An action's end is a committed change: wake at once rather than at the next tick.
      this.unsubscribe = this.opts.store.onChange(() => this.wake());
    }
    this.wake();
    return () => this.unfollow(actionUuid, follower);
  }

  private unfollow(actionUuid: string, follower: Follower): void {
    const set = this.followed.get(actionUuid);
    set?.delete(follower);
    if (set?.size === 0) this.followed.delete(actionUuid);
    if (this.followed.size === 0) this.close();
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
  }

  private wake(): void {
    if (this.ticking) {
      this.again = true;
      return;
    }
    this.ticking = true;
    void this.tick()
      .catch((err: unknown) => this.opts.onError(err))
      .finally(() => {
        this.ticking = false;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  private async tick(): Promise<void> {
    for (const [uuid, set] of [...this.followed]) {
      if (set.size === 0) {
        this.followed.delete(uuid);
        continue;
      }
      // The state is read before the lines: when it says the action ended, the lines read after
      // it are all the lines it will ever have.
      const action = await this.opts.store.actions.findAction(uuid);
      const ended = !action || actionEnded(action.state);
      const ready = [...set].filter((f) => isOpen(f.ws) && f.ws.bufferedAmount <= f.maxBufferedBytes);
      if (ready.length === 0 && !ended) continue;
      const afterId = Math.min(...[...set].map((f) => f.afterId));
      const rows = await this.opts.store.actions.actionLogAfter(uuid, afterId);
      // A follower whose socket is full waits for a later tick; its position is kept.
      for (const f of ended ? [...set] : ready) {
        for (const row of rows) {
          if (row.id <= f.afterId) continue;
          sendJson(f.ws, logFrame(row));
          f.afterId = row.id;
        }
        if (ended) {
          closeSocket(f.ws, CLOSE.normal, `action ${action?.state ?? "gone"}`);
          set.delete(f);
        }
      }
      if (set.size === 0) this.followed.delete(uuid);
    }
    if (this.followed.size === 0) this.close();
  }
}
