// The events stream (CONTRACT §8): `/api/audit/v1/[ns/]events/` and `/v1/events/`. One JSON text
// frame per change of the objects the subscriber may read, filtered by type, object and parents,
// resumable with `since=<revision>`. The socket stays open until the client leaves; only a dead
// peer (no pong) or a subscriber too slow to keep up (1008) is dropped.
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { WebSocket } from "ws";
import { invalidField, notFound } from "../../domain/errors.ts";
import type { Principal } from "../../identity/service.ts";
import { nodeUri } from "../../nodes/views.ts";
import type { Store } from "../../store/store.ts";
import { LEGACY_EVENTS_PATH } from "../compat.ts";
import { namespaceOf, principalOf } from "../namespaces.ts";
import { nsPaths } from "../routing.ts";
import { FanOut, type FanOutMember, rawSocket } from "./fanout.ts";
import { type EventFeed, FEED_PAGE, FeedEvent, uriKey } from "./feed.ts";
import { type StreamContext, streamRoute } from "./route.ts";
import { corked, dropSlow, isOpen } from "./sockets.ts";

export const EVENT_TYPES = ["stack", "service", "container", "node", "nodecluster", "action"] as const;

export interface EventFilter {
  /** uriKey() of one object: only events about it or whose parents include it (node events). */
  about?: string;
  types?: Set<string>;
  /** uriKey()s of the `object` filter. */
  objects?: Set<string>;
  /** uriKey()s of the `parents` (or `parent`) filter: an event matches when any parent is one. */
  parents?: Set<string>;
}

const EventsQuery = Type.Object({
  type: Type.Optional(Type.String({ description: `comma-separated: ${EVENT_TYPES.join(", ")}` })),
  object: Type.Optional(
    Type.String({ description: "comma-separated resource URIs, with or without namespace" }),
  ),
  parents: Type.Optional(
    Type.String({ description: "comma-separated resource URIs; an event matches when one is its parent" }),
  ),
  parent: Type.Optional(Type.String({ description: "same as parents" })),
  since: Type.Optional(
    Type.Integer({
      minimum: 0,
      description:
        "resume after this revision (the `revision` field of the last event received): every later event is sent, none is missed",
    }),
  ),
  user: Type.Optional(
    Type.String({ description: "username, for clients that send no Authorization header" }),
  ),
  token: Type.Optional(Type.String({ description: "API key, with user" })),
});

interface EventsQueryT {
  type?: string;
  object?: string;
  parents?: string;
  parent?: string;
  since?: number;
}

function listParam(value: string | undefined): string[] {
  return (value ?? "")
    .split(",")
    .map((v) => v.trim())
    .filter(Boolean);
}

function uriList(field: string, values: string[]): Set<string> | undefined {
  if (values.length === 0) return undefined;
  for (const v of values) {
    if (!v.startsWith("/api/")) throw invalidField(field, `must be resource URIs, got "${v}"`);
  }
  return new Set(values.map(uriKey));
}

export function parseEventFilter(q: EventsQueryT): EventFilter {
  const types = listParam(q.type);
  for (const t of types) {
    if (!(EVENT_TYPES as readonly string[]).includes(t))
      throw invalidField("type", `must be one of ${EVENT_TYPES.join(", ")}`);
  }
  return {
    types: types.length ? new Set(types) : undefined,
    objects: uriList("object", listParam(q.object)),
    parents: uriList("parents", [...listParam(q.parents), ...listParam(q.parent)]),
  };
}

export function matchesFilter(f: EventFilter, e: FeedEvent): boolean {
  if (f.about && e.resourceKey !== f.about && !e.parentKeys.includes(f.about)) return false;
  if (f.types && !f.types.has(e.type)) return false;
  if (f.objects && !f.objects.has(e.resourceKey)) return false;
  if (f.parents && !e.parentKeys.some((k) => f.parents!.has(k))) return false;
  return true;
}

/** What decides the events a subscriber gets: subscribers of one shape get the same bytes. */
function shapeOf(namespaces: ReadonlySet<string>, f: EventFilter): string {
  const list = (s: ReadonlySet<string> | undefined) => (s ? [...s].sort().join(",") : "*");
  return [list(namespaces), f.about ?? "*", list(f.types), list(f.objects), list(f.parents)].join("|");
}

/** One events socket: what it may read, what it asked for, and how far it has been served. */
class EventSubscriber implements FanOutMember {
  /** Revision of the last change this subscriber has been served (or skipped as not its own). */
  cursor = 0;
  /**
   * Revision of the last event written to its socket (where it started, before any): what a
   * subscriber dropped as too slow is told to resume from.
   */
  private sent = 0;
  /** False while it catches up from `since` out of the database; the fan-out's groups join after. */
  private live = false;
  private dropped = false;
  /** The socket, corked while a page of the catch-up is being written to it. */
  private held: ReturnType<typeof corked>;

  constructor(
    private readonly ws: WebSocket,
    private readonly filter: EventFilter,
    private readable: Set<string>,
    private readonly maxBufferedBytes: number,
    private readonly fanout: FanOut,
  ) {}

  /** The namespaces it may read changed (access narrowed): it moves to the group of its new shape. */
  set namespaces(readable: Set<string>) {
    this.readable = readable;
    if (this.live) this.join();
  }

  private join(): void {
    if (this.dropped) return;
    const readable = this.readable;
    const filter = this.filter;
    this.fanout.join(
      this,
      shapeOf(readable, filter),
      (e) => readable.has(e.namespace) && matchesFilter(filter, e),
    );
  }

  /** A chunk of live events from the fan-out, in one write. */
  write(bytes: Buffer, events: readonly FeedEvent[]): boolean {
    if (this.dropped || !isOpen(this.ws)) return false;
    // Already over its bound: dropped before more is written to it.
    if (!this.checkBound()) return false;
    const raw = rawSocket(this.ws);
    if (raw) raw.write(bytes);
    else for (const event of events) this.ws.send(event.frame(), { binary: false });
    this.sent = events.at(-1)?.revision ?? this.sent;
    return this.checkBound();
  }

  /** The socket closed: it leaves its group. */
  close(): void {
    this.dropped = true;
    this.fanout.leave(this);
  }

  private wants(event: FeedEvent): boolean {
    return this.readable.has(event.namespace) && matchesFilter(this.filter, event);
  }

  private send(event: FeedEvent): void {
    if (this.dropped || !isOpen(this.ws)) return;
    this.held ??= corked(this.ws);
    this.ws.send(event.frame(), { binary: false });
    this.sent = event.revision;
    if (!this.held) this.checkBound();
  }

  /** Sends what was held back during a page of the catch-up (which paces itself, unchecked). */
  flush(): void {
    if (!this.held) return;
    this.held.uncork();
    this.held = undefined;
  }

  /** False (and the socket closed with 1008) once more than its bound waits unsent. */
  private checkBound(): boolean {
    if (this.dropped) return false;
    if (this.ws.bufferedAmount <= this.maxBufferedBytes) return true;
    this.dropped = true;
    this.fanout.leave(this);
    dropSlow(this.ws, this.maxBufferedBytes, this.sent);
    return false;
  }

  /** Joins the live feed now: the next change it offers is the first one sent. */
  startLive(feed: EventFeed): void {
    this.cursor = feed.position;
    this.sent = this.cursor;
    this.goLive();
  }

  private goLive(): void {
    this.live = true;
    this.join();
  }

  /**
   * Sends every change after `since` from the database, page by page (pausing while the socket's
   * buffer is full, so a long history never piles up in memory), then joins the live feed at the
   * exact revision it reached: the feed has offered everything up to its position, and the
   * check and the switch happen in one synchronous step.
   */
  async catchUp(store: Store, feed: EventFeed, since: number): Promise<void> {
    this.cursor = since;
    this.sent = since;
    while (isOpen(this.ws) && !this.dropped) {
      if (this.cursor >= feed.position) {
        this.goLive();
        return;
      }
      const rows = await store.changesSince(this.cursor, FEED_PAGE);
      for (const row of rows) {
        const event = new FeedEvent(row);
        if (event.revision <= this.cursor) continue;
        this.cursor = event.revision;
        if (this.wants(event)) this.send(event);
      }
      this.flush();
      if (rows.length === 0) {
        // The feed's position is past the last stored change only if the database moved under it.
        this.goLive();
        return;
      }
      while (isOpen(this.ws) && this.ws.bufferedAmount > this.maxBufferedBytes / 2) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
  }
}

interface EventsPlan {
  principal: Principal;
  requested?: string;
  namespaces: string[];
  filter: EventFilter;
  since?: number;
}

export function eventRoutes(app: FastifyInstance, ctx: StreamContext): void {
  // One fan-out for every events socket of this process.
  const fanout = new FanOut(ctx.feed);
  app.addHook("onClose", async () => fanout.stop());
  async function serve(ws: WebSocket, plan: EventsPlan): Promise<void> {
    const sub = new EventSubscriber(
      ws,
      plan.filter,
      new Set(plan.namespaces),
      ctx.settings.maxBufferedBytes,
      fanout,
    );
    const release = fanout.hold();
    // Access ends (key revoked, membership removed): a stream of one namespace closes with 1008;
    // a stream of every readable namespace narrows to those still readable.
    ctx.guard.watch(ws, {
      principal: plan.principal,
      namespace: plan.requested === undefined ? undefined : plan.namespaces[0],
      onNamespaces:
        plan.requested === undefined
          ? (readable) => {
              sub.namespaces = readable;
            }
          : undefined,
    });
    ws.once("close", () => {
      sub.close();
      release();
    });
    await ctx.feed.ready();
    if (plan.since === undefined) {
      sub.startLive(ctx.feed);
      return;
    }
    // A revision from the future (another database) cannot be waited for: resume from now.
    const since = Math.min(plan.since, await ctx.store.latestRevision());
    await sub.catchUp(ctx.store, ctx.feed, since);
  }

  streamRoute(app, ctx, {
    urls: [...nsPaths("/api/audit/v1/{ns}events/"), LEGACY_EVENTS_PATH],
    summary: "Events stream",
    description:
      "One JSON text frame per change: {type, action, parents, resource_uri, state, uuid, datetime, revision}. " +
      "Without a namespace in the path: every namespace the caller may read (its own and its organizations'). " +
      "A subscriber that lets more than BERTH_STREAM_MAX_BUFFERED_BYTES pile up is closed with 1008 and a reason " +
      "naming the revision to resume from (`resume with since=<revision>`, that of the last event written before the close frame); " +
      "it resumes without a gap by reconnecting with that since, or the revision of the last event it received.",
    // Without a namespace it reads every namespace of the caller, so it resolves its own.
    access: "caller",
    params: Type.Object({ namespace: Type.Optional(Type.String()) }),
    querystring: EventsQuery,
    async prepare(req, { params, query: q }): Promise<EventsPlan> {
      const principal = principalOf(req);
      const requested = params.namespace;
      // With a namespace the caller cannot use, the upgrade is a 404 (CONTRACT §2, §3).
      const namespaces =
        requested === undefined
          ? await ctx.identity.namespacesOf(principal)
          : [await ctx.identity.resolveNamespace(principal, requested)];
      return { principal, requested, namespaces, filter: parseEventFilter(q), since: q.since };
    },
    open: (ws, plan) => serve(ws, plan),
  });

  // One node's events (the Go SDK's `Node.Events`): the node itself and everything whose parents
  // include it, i.e. the containers on it and the actions on it. Same filters and resume as above.
  streamRoute(app, ctx, {
    urls: nsPaths("/api/infra/v1/{ns}node/:uuid/events/"),
    summary: "Events of one node",
    description:
      "The events stream restricted to one node: its own changes and those of every object whose parents include it (its containers, its actions). " +
      "Frames, filters and `since` as on the events stream.",
    access: "namespace",
    params: Type.Object({ uuid: Type.String(), namespace: Type.Optional(Type.String()) }),
    querystring: EventsQuery,
    async prepare(req, { params, query: q }): Promise<EventsPlan> {
      const principal = principalOf(req);
      const ns = namespaceOf(req);
      const node = await ctx.store.nodes.findNode(params.uuid);
      if (!node || node.namespace !== ns) throw notFound("node");
      return {
        principal,
        requested: ns,
        namespaces: [ns],
        filter: { ...parseEventFilter(q), about: uriKey(nodeUri(node)) },
        since: q.since,
      };
    },
    open: (ws, plan) => serve(ws, plan),
  });
}
