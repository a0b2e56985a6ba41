// Action logs (CONTRACT §9, spec "Actions"): `/api/audit/v1/[ns/]action/<uuid>/logs/` sends the
// last `tail` lines as `{"type":"log","log","timestamp"}`, then, with `follow`, every new line
// until the action ends, and closes normally. Log lines are not in the change feed, so one
// watcher reads new lines for every followed action together: one query per followed action
// per tick, however many sockets follow it.
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { WebSocket } from "ws";
import { notFound } from "../../domain/errors.ts";
import { actionEnded } from "../../domain/states.ts";
import type { ActionRow, Store } from "../../store/store.ts";
import { principalOf } from "../namespaces.ts";
import { nsPaths } from "../routing.ts";
import { LogsQuery } from "./logs-query.ts";
import { type StreamContext, streamRoute } from "./route.ts";
import { CLOSE, closeSocket, isOpen, sendJson } from "./sockets.ts";

/** How often followed actions are read for new lines (state changes also wake the watcher). */
const ACTION_LOG_POLL_MS = 250;

interface ActionLogRow {
  id: number;
  ts: number;
  line: string;
}

function logFrame(row: ActionLogRow) {
  return { type: "log", log: row.line, timestamp: Math.floor(row.ts / 1000) };
}

interface Follower {
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

interface ActionLogPlan {
  action: ActionRow;
  tail: number;
  follow: boolean;
}

export function actionLogRoutes(app: FastifyInstance, ctx: StreamContext): void {
  streamRoute(app, ctx, {
    urls: nsPaths("/api/audit/v1/{ns}action/:uuid/logs/"),
    summary: "Action log stream",
    description:
      'Frames {"type":"log","log","timestamp"}: the last `tail` lines, then (with follow) new lines until the action ends; then the server closes normally.',
    // The same visibility as GET of the action (routes/actions.ts): the object's own rule.
    access: "caller",
    params: Type.Object({ uuid: Type.String(), namespace: Type.Optional(Type.String()) }),
    querystring: LogsQuery,
    async prepare(req, { params: { uuid, namespace }, query: q }): Promise<ActionLogPlan> {
      const readable = await ctx.identity.namespacesOf(principalOf(req));
      const action = await ctx.store.actions.findAction(uuid);
      // The same visibility as GET of the action: another namespace's action is a 404.
      if (!action || !readable.includes(action.namespace) || (namespace && namespace !== action.namespace))
        throw notFound("action");
      return { action, tail: q.tail ?? 300, follow: q.follow ?? true };
    },
    namespace: (plan) => plan.action.namespace,
    async open(ws, plan) {
      const uuid = plan.action.uuid;
      // State first, lines second: an action found finished has all its lines in the tail read.
      const current = await ctx.store.actions.findAction(uuid);
      const rows = plan.tail > 0 ? await ctx.store.actions.actionLogTail(uuid, plan.tail) : [];
      for (const row of rows) sendJson(ws, logFrame(row));
      if (!plan.follow || !current || actionEnded(current.state)) {
        closeSocket(ws, CLOSE.normal, plan.follow ? `action ${current?.state ?? "gone"}` : "end of tail");
        return;
      }
      // Follow from the last line sent; when the tail read found no line, every line is new (a second
      // read here would skip a line written in between). Without a tail, from the current last line.
      const afterId =
        plan.tail > 0
          ? (rows.at(-1)?.id ?? 0)
          : ((await ctx.store.actions.actionLogTail(uuid, 1))[0]?.id ?? 0);
      const stop = ctx.actionLogs.follow(uuid, {
        ws,
        afterId,
        maxBufferedBytes: ctx.settings.maxBufferedBytes,
      });
      ws.once("close", stop);
    },
  });
}
