// Action logs (CONTRACT §9, spec "Actions"): `/api/audit/v1/[ns/]action/<uuid>/logs/` sends the
// last `tail` lines as `{"type":"log","log","timestamp"}`, then, with `follow`, every new line
// until the action ends, and closes normally. Log lines are not in the change feed, so one
// watcher reads new lines for every followed action together: one query per followed action
// per tick, however many sockets follow it.
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { notFound } from "../../domain/errors.ts";
import { actionEnded } from "../../domain/states.ts";
import type { ActionRow } from "../../store/store.ts";
import { principalOf } from "../namespaces.ts";
import { nsPaths } from "../routing.ts";
import { logFrame } from "./action-log-watcher.ts";
import { LogsQuery } from "./logs-query.ts";
import { type StreamContext, streamRoute } from "./route.ts";
import { CLOSE, closeSocket, sendJson } from "./sockets.ts";

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
