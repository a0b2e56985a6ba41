// The shape of a stream route: checks before the upgrade, a handler on the accepted socket.
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Static, TSchema } from "typebox";
import type { WebSocket } from "ws";
import type { Config } from "../../config/index.ts";
import { ErrorView } from "../../contract/common.ts";
import type { Clock } from "../../domain/time.ts";
import type { IdentityService } from "../../identity/service.ts";
import type { ContainerIO } from "../../orchestrator/container-io.ts";
import type { StatsReader } from "../../stats/reader.ts";
import type { Store } from "../../store/store.ts";
import { withUnprefixedStreamPaths } from "../compat.ts";
import type { Access } from "../context.ts";
import { principalOf } from "../namespaces.ts";
import type { StreamAccessGuard } from "./access.ts";
import type { ActionLogWatcher } from "./action-log-watcher.ts";
import type { EventFeed } from "./feed.ts";
import { type OpenStreams, streamKeyOf } from "./open-streams.ts";
import { CLOSE, closeSocket, type Heartbeat, sendErrorFrame } from "./sockets.ts";

export interface StreamDeps {
  store: Store;
  identity: IdentityService;
  /** Logs and exec of containers, through the runtime (streams never hold an engine). */
  containers: ContainerIO;
  settings: Config["streams"];
  /** The clock sessions expire by (their streams close then). */
  clock?: Clock;
  /**
   * Whether other replicas' commits are announced now (PostgreSQL LISTEN/NOTIFY): the feed then
   * reads on those wake-ups and polls only rarely, as a safety net.
   */
  remoteChangesAnnounced?(): boolean;
  /** Stats series, for the live stats streams (issue 32). */
  stats?: StatsReader;
}

/** What every stream route gets: the shared feed reader, pings, limits. */
export interface StreamContext extends StreamDeps {
  /** Paths of the stream routes: an upgrade anywhere else is refused. */
  streamUrls: Set<string>;
  feed: EventFeed;
  heartbeat: Heartbeat;
  actionLogs: ActionLogWatcher;
  /** Closes streams whose caller lost access (api/streams/access.ts). */
  guard: StreamAccessGuard;
  /** Streams open per key (quota streams_per_key). */
  openStreams: OpenStreams;
}

export interface StreamRoute<P, TP extends TSchema, TQ extends TSchema> {
  urls: string[];
  summary: string;
  description: string;
  /** Checked by the access hook before `prepare` (api/access.ts). */
  access: Access;
  params: TP;
  querystring: TQ;
  /**
   * Runs before the upgrade, with the validated path parameters and query: looks objects up.
   * Throwing a coded error answers the upgrade request with it (401, 404, 400, 409) and no socket
   * is opened.
   */
  prepare(req: FastifyRequest, input: { params: Static<TP>; query: Static<TQ> }): Promise<P>;
  /**
   * The namespace the stream reads: when its caller may no longer read it (or the caller's key is
   * revoked) the stream closes with 1008. Routes that watch access themselves leave it out.
   */
  namespace?(plan: P): string;
  /** Runs on the accepted socket with what `prepare` found. */
  open(ws: WebSocket, plan: P, req: FastifyRequest): Promise<void> | void;
}

const tags = ["streams"];

export function streamRoute<P, TP extends TSchema, TQ extends TSchema>(
  untyped: FastifyInstance,
  ctx: StreamContext,
  route: StreamRoute<P, TP, TQ>,
): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  // prepare() runs in a preHandler hook; the socket handler picks its result up by request.
  const plans = new WeakMap<FastifyRequest, P>();
  // The stream slot each accepted request holds, given back when its socket closes.
  const slots = new WeakMap<FastifyRequest, () => void>();
  // Every stream is also served without the `/api` prefix (compat); those copies stay out of the docs.
  for (const url of withUnprefixedStreamPaths(route.urls)) {
    ctx.streamUrls.add(url);
    app.route({
      method: "GET",
      url,
      config: { access: route.access },
      schema: {
        ...(route.urls.includes(url) ? {} : { hide: true }),
        tags,
        summary: route.summary,
        description: `WebSocket stream (send \`Connection: Upgrade\`, \`Upgrade: websocket\`). ${route.description}`,
        params: route.params,
        querystring: route.querystring,
        // The upgrade answers 101; a plain GET is told how to connect.
        response: { 426: ErrorView },
      },
      preHandler: async (req) => {
        // The provider's type of a generic schema stays deferred here; at each call site it is
        // Static<TP> / Static<TQ>, which is what these say.
        const input = { params: req.params as Static<TP>, query: req.query as Static<TQ> };
        plans.set(req, await route.prepare(req, input));
        // Counted once the stream is known to be allowed, before the upgrade (so a refusal is a 403).
        const principal = principalOf(req);
        const limit = await ctx.store.quotas.limit(principal.user.username, "streams_per_key");
        const release = ctx.openStreams.reserve(streamKeyOf(principal), limit, principal.user.username);
        slots.set(req, release);
        // An upgrade that never completes gives its slot back with its connection.
        req.raw.socket?.once?.("close", release);
      },
      // A plain GET on a stream path is told how to connect (426 Upgrade Required).
      handler: async (req, reply) => {
        slots.get(req)?.();
        return reply
          .status(426)
          .header("Upgrade", "websocket")
          .send({
            error: `${req.url.split("?")[0]} is a WebSocket stream; connect with Upgrade: websocket.`,
            code: "websocket_required",
          });
      },
      wsHandler: (ws, req) => {
        const plan = plans.get(req);
        plans.delete(req);
        const release = slots.get(req);
        if (release) ws.once("close", release);
        ctx.heartbeat.track(ws);
        if (plan === undefined) return closeSocket(ws, CLOSE.internal, "stream was not prepared");
        if (route.namespace)
          ctx.guard.watch(ws, { principal: principalOf(req), namespace: route.namespace(plan) });
        return Promise.resolve()
          .then(() => route.open(ws, plan, req))
          .catch((err: unknown) => {
            req.log.error({ err }, "stream failed");
            sendErrorFrame(ws, "The stream failed; the server log has the details.");
            closeSocket(ws, CLOSE.internal, "stream failed");
          });
      },
    });
  }
}
