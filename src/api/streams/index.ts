// WebSocket streams (CONTRACT §8, §9): the events stream, action, container and service logs, and
// exec. Each stream is a GET route whose checks run before the upgrade, so bad credentials (401),
// invisible objects (404), bad parameters (400) and refused states (409) answer the upgrade
// itself; only an accepted request becomes a socket. Streams are reads: they create no action.
import type { FastifyInstance } from "fastify";
import { ApiError } from "../../domain/errors.ts";
import { StreamAccessGuard } from "./access.ts";
import { ActionLogWatcher } from "./action-log-watcher.ts";
import { actionLogRoutes } from "./action-logs.ts";
import { eventRoutes } from "./events.ts";
import { execRoutes } from "./exec.ts";
import { EventFeed } from "./feed.ts";
import { containerLogRoutes } from "./logs.ts";
import { OpenStreams } from "./open-streams.ts";
import type { StreamContext, StreamDeps } from "./route.ts";
import { Heartbeat } from "./sockets.ts";
import { statsStreamRoutes } from "./stats.ts";

export type { StreamDeps } from "./route.ts";
export { websocketPluginOptions } from "./sockets.ts";

/** Registers every stream route; their shared reader and timers stop when the app closes. */
export function streamRoutes(app: FastifyInstance, deps: StreamDeps): void {
  const feed = new EventFeed({
    store: deps.store,
    pollMs: deps.settings.eventsPollMs,
    announced: deps.remoteChangesAnnounced,
    onError: (err) => app.log.error({ err }, "events feed: could not read the change feed"),
  });
  const heartbeat = new Heartbeat(deps.settings.pingIntervalMs);
  const actionLogs = new ActionLogWatcher({
    store: deps.store,
    onError: (err) => app.log.error({ err }, "action logs: could not read"),
  });
  const guard = new StreamAccessGuard(
    deps.identity,
    feed,
    (err) => app.log.error({ err }, "streams: could not re-check access"),
    deps.clock,
  );
  const ctx: StreamContext = {
    ...deps,
    feed,
    heartbeat,
    actionLogs,
    guard,
    openStreams: new OpenStreams(),
    streamUrls: new Set(),
  };
  // @fastify/websocket would accept an upgrade on any GET route and close it at once; an upgrade
  // is answered on the handshake instead, like every other refusal (after authentication).
  app.addHook("onRequest", async (request) => {
    if (
      request.ws &&
      !ctx.streamUrls.has(request.routeOptions.url ?? "") &&
      !request.routeOptions.config?.websocket
    )
      throw new ApiError("not_found", "not_found", `No WebSocket stream at ${request.url.split("?")[0]}.`);
  });
  eventRoutes(app, ctx);
  actionLogRoutes(app, ctx);
  containerLogRoutes(app, ctx);
  execRoutes(app, ctx);
  if (deps.stats) statsStreamRoutes(app, ctx, deps.stats);
  app.addHook("onClose", async () => {
    feed.close();
    heartbeat.stop();
    actionLogs.close();
    guard.close();
  });
}
