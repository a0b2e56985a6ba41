// Container and service logs (CONTRACT §9): `/api/app/v1/[ns/]container/<uuid>/logs/` streams the
// engine's log of the container as `{"type":"log","log","streamType","timestamp"}` (stdout and
// stderr told apart, the trailing newline kept); `/api/app/v1/[ns/]service/<uuid>/logs/` merges
// every container of the service and adds `source` (the container's name).
//
// Following works on records, not on engine containers: the feed says when a container of the
// service (or the container itself) changes, and a running engine container that is not followed
// yet is picked up — a scale adds one, a redeploy replaces one, a restart revives one. A container
// stream ends when the container stops or is terminated; a service stream when the service is
// terminated.
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { WebSocket } from "ws";
import { notFound } from "../../domain/errors.ts";
import { containerUri, serviceUri } from "../../domain/uri.ts";
import { isContainerGone, type LogLine } from "../../orchestrator/container-io.ts";
import type { ContainerRow } from "../../store/services.ts";
import { namespaceOf } from "../namespaces.ts";
import { nsPaths } from "../routing.ts";
import { type FeedEvent, uriKey } from "./feed.ts";
import { LogsQuery } from "./logs-query.ts";
import { type StreamContext, streamRoute } from "./route.ts";
import { CLOSE, closeSocket, drained, sendErrorFrame, sendJson } from "./sockets.ts";

/** After a followed engine stream ends, look again shortly: a replacement may be starting. */
const STREAM_END_RESCAN_MS = 200;
/** While a record says Running but its engine container is not, look again this often. */
const RECHECK_MS = 2000;
/** The longest the first merged tail of a service waits for a slow engine before it is sent. */
const MERGE_WAIT_MS = 10_000;

interface LogTarget {
  kind: "container" | "service";
  uuid: string;
  name: string;
  /** uriKey of the container or service, for matching feed events. */
  key: string;
}

interface LogsPlan {
  namespace: string;
  target: LogTarget;
  tail: number;
  follow: boolean;
}

interface Entry {
  line: LogLine;
  source: string;
}

/** An engine container whose log this stream reads or has read. */
interface Followed {
  engineId: string;
  active: boolean;
  /** Time of the last line sent: a revived container's log is read again from after it. */
  lastTs: number;
}

class RecordLogStream {
  private readonly followed = new Map<string, Followed>();
  private readonly abort = new AbortController();
  private done = false;
  /** While set, lines are held so that the first tail of several containers is merged by time. */
  private collecting: { past: Entry[]; live: Entry[] } | undefined;
  private unlisten: (() => void) | undefined;
  private rescanTimer: NodeJS.Timeout | undefined;
  private rescanning = false;
  private rescanAgain = false;

  constructor(
    private readonly ctx: StreamContext,
    private readonly ws: WebSocket,
    private readonly plan: LogsPlan,
  ) {
    ws.once("close", () => this.stop());
  }

  async run(): Promise<void> {
    if (!this.plan.follow) return this.sendTail();
    this.unlisten = this.ctx.feed.listen((event) => {
      if (this.concerns(event)) this.scheduleRescan(0);
    });
    // Listening before reading the records: a change committed after the read is never missed.
    await this.ctx.feed.ready();
    const records = (await this.records()).filter((r) => r.engine_id && r.state !== "Terminated");
    if (this.done) return;
    const { tail } = this.plan;
    if (records.length > 1) {
      // The first tail is the last `tail` lines of all containers together. Each engine sends its
      // own tail first and then new lines; how many lines its tail has is counted beforehand, so
      // the two parts are told apart exactly.
      const counts = await Promise.all(records.map((r) => this.countTail(r, tail)));
      this.collecting = { past: [], live: [] };
      const pastRead = records.map((r, i) =>
        this.startStream(r, r.engine_id!, { tail, pastLines: counts[i]! }),
      );
      await Promise.race([Promise.all(pastRead), sleep(MERGE_WAIT_MS)]);
      this.flushCollected();
    } else {
      for (const r of records) void this.startStream(r, r.engine_id!, { tail });
    }
    this.scheduleRescan(0);
  }

  /** follow=false: the last `tail` lines (of all containers, by time), then a normal close. */
  private async sendTail(): Promise<void> {
    const records = (await this.records()).filter((r) => r.engine_id && r.state !== "Terminated");
    const entries: Entry[] = [];
    const errors: string[] = [];
    await Promise.all(
      records.map(async (r) => {
        try {
          const lines = await this.ctx.containers.logs(ref(r), {
            tail: this.plan.tail,
            signal: this.abort.signal,
          });
          if (!lines) return;
          for await (const line of lines) entries.push({ line, source: r.name });
        } catch (err) {
          if (!isContainerGone(err)) errors.push(`logs of ${r.name}: ${errorText(err)}`);
        }
      }),
    );
    // Array.prototype.sort is stable: lines of one container with the same time keep their order.
    entries.sort((a, b) => a.line.timestampMs - b.line.timestampMs);
    for (const e of this.plan.tail === 0 ? [] : entries.slice(-this.plan.tail)) {
      if (!(await drained(this.ws, this.ctx.settings.maxBufferedBytes))) break;
      sendJson(this.ws, this.frame(e));
    }
    for (const message of errors) sendErrorFrame(this.ws, message);
    closeSocket(this.ws, errors.length ? CLOSE.internal : CLOSE.normal, "end of tail");
  }

  private concerns(event: FeedEvent): boolean {
    if (this.plan.target.kind === "container")
      return event.type === "container" && event.resourceKey === this.plan.target.key;
    return (
      (event.type === "container" && event.parentKeys.includes(this.plan.target.key)) ||
      (event.type === "service" && event.resourceKey === this.plan.target.key)
    );
  }

  private async records(): Promise<ContainerRow[]> {
    const { kind, uuid } = this.plan.target;
    if (kind === "service") return this.ctx.store.services.containersOfService(uuid);
    const c = await this.ctx.store.services.findContainer(uuid);
    return c ? [c] : [];
  }

  private async countTail(r: ContainerRow, tail: number): Promise<number> {
    try {
      if (tail === 0) return 0;
      const lines = await this.ctx.containers.logs(ref(r), { tail, signal: this.abort.signal });
      if (!lines) return 0;
      let n = 0;
      for await (const _ of lines) n += 1;
      return n;
    } catch {
      return 0;
    }
  }

  /**
   * Reads one engine container's log until it ends (the container stopped) or the stream stops.
   * The returned promise resolves once its first `pastLines` lines (the tail) have been taken.
   */
  private startStream(
    r: ContainerRow,
    engineId: string,
    opts: { tail?: number; pastLines?: number; afterTs?: number },
  ): Promise<void> {
    // With tail=0 nothing older than now is wanted, should the container be read again later.
    const followed = this.followed.get(engineId) ?? {
      engineId,
      active: false,
      lastTs: opts.tail === 0 ? Date.now() : -1,
    };
    followed.active = true;
    this.followed.set(engineId, followed);
    let pastDone: () => void = () => {};
    const past = new Promise<void>((resolve) => {
      pastDone = resolve;
    });
    let taken = 0;
    if ((opts.pastLines ?? 0) === 0) pastDone();
    void (async () => {
      try {
        const lines = await this.ctx.containers.logs(
          { node_uuid: r.node_uuid, engineId },
          { tail: opts.tail, follow: true, signal: this.abort.signal },
        );
        if (!lines) return;
        for await (const line of lines) {
          if (this.done) break;
          if (opts.afterTs !== undefined && line.timestampMs <= opts.afterTs) continue;
          followed.lastTs = Math.max(followed.lastTs, line.timestampMs);
          const isPast = taken < (opts.pastLines ?? 0);
          taken += 1;
          await this.take({ line, source: r.name }, isPast);
          if (taken === opts.pastLines) pastDone();
        }
      } catch (err) {
        // A container removed under us simply has no more lines; anything else is worth saying.
        if (!this.done && !isContainerGone(err))
          sendErrorFrame(this.ws, `logs of ${r.name}: ${errorText(err)}`);
      } finally {
        pastDone();
        followed.active = false;
        if (!this.done) this.scheduleRescan(STREAM_END_RESCAN_MS);
      }
    })();
    return past;
  }

  private async take(entry: Entry, isPast: boolean): Promise<void> {
    if (this.collecting) {
      (isPast ? this.collecting.past : this.collecting.live).push(entry);
      return;
    }
    // A reader that does not keep up pauses the engine's stream instead of growing a buffer here.
    if (!(await drained(this.ws, this.ctx.settings.maxBufferedBytes))) return;
    sendJson(this.ws, this.frame(entry));
  }

  /** Sends the merged first tail and what arrived meanwhile; from now on lines go straight out. */
  private flushCollected(): void {
    const collected = this.collecting;
    this.collecting = undefined;
    if (!collected) return;
    // Array.prototype.sort is stable: lines of one container with the same time keep their order.
    const past = collected.past.sort((a, b) => a.line.timestampMs - b.line.timestampMs);
    const tail = this.plan.tail === 0 ? [] : past.slice(-this.plan.tail);
    for (const e of [...tail, ...collected.live]) sendJson(this.ws, this.frame(e));
  }

  private frame(e: Entry) {
    const base = { type: "log" } as const;
    const rest = {
      log: e.line.line,
      streamType: e.line.stream,
      timestamp: Math.floor(e.line.timestampMs / 1000),
    };
    return this.plan.target.kind === "service"
      ? { ...base, source: e.source, ...rest }
      : { ...base, ...rest };
  }

  private scheduleRescan(delayMs: number): void {
    if (this.done) return;
    if (this.rescanTimer) {
      if (delayMs > 0) return; // one is already due
      clearTimeout(this.rescanTimer);
    }
    this.rescanTimer = setTimeout(() => {
      this.rescanTimer = undefined;
      this.rescan();
    }, delayMs);
  }

  private rescan(): void {
    if (this.rescanning) {
      this.rescanAgain = true;
      return;
    }
    this.rescanning = true;
    void this.pickUp()
      .catch((err: unknown) => sendErrorFrame(this.ws, `logs: ${errorText(err)}`))
      .finally(() => {
        this.rescanning = false;
        if (this.rescanAgain) {
          this.rescanAgain = false;
          this.rescan();
        }
      });
  }

  /** Follows every running engine container of the records that is not followed yet; ends the stream when nothing more can come. */
  private async pickUp(): Promise<void> {
    if (this.done) return;
    const records = await this.records();
    let claimsRunning = false;
    for (const r of records) {
      if (this.done) return;
      if (r.state === "Terminated" || !r.engine_id) continue;
      const followed = this.followed.get(r.engine_id);
      if (followed?.active) continue;
      if (r.state === "Running" || r.state === "Starting") claimsRunning = true;
      const view = await this.ctx.containers.inspect(ref(r));
      if (!view?.running) continue;
      // A new engine container (scale, redeploy) is read from its start; a revived one from after
      // the last line already sent.
      void this.startStream(r, r.engine_id, followed ? { afterTs: followed.lastTs } : {});
    }
    if ([...this.followed.values()].some((f) => f.active)) return;
    const ended = await this.ended(records);
    if (ended) return this.finish(ended);
    // The record says it runs but its engine container does not (yet): the engine watcher will
    // record what happened; look again meanwhile.
    if (claimsRunning) this.scheduleRescan(RECHECK_MS);
  }

  /** Why nothing more will come, or undefined while more may. */
  private async ended(records: ContainerRow[]): Promise<string | undefined> {
    const { kind, uuid, name } = this.plan.target;
    if (kind === "container") {
      const c = records[0];
      if (!c || c.state === "Terminated") return `container ${name} is terminated`;
      if (c.state === "Stopped") return `container ${name} stopped`;
      return undefined;
    }
    const s = await this.ctx.store.services.findService(uuid);
    return !s || s.state === "Terminated" ? `service ${name} is terminated` : undefined;
  }

  private finish(reason: string): void {
    this.stop();
    closeSocket(this.ws, CLOSE.normal, reason);
  }

  private stop(): void {
    if (this.done) return;
    this.done = true;
    this.abort.abort();
    this.unlisten?.();
    if (this.rescanTimer) clearTimeout(this.rescanTimer);
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

const UuidParams = Type.Object({ uuid: Type.String(), namespace: Type.Optional(Type.String()) });

export function containerLogRoutes(app: FastifyInstance, ctx: StreamContext): void {
  streamRoute(app, ctx, {
    urls: nsPaths("/api/app/v1/{ns}container/:uuid/logs/"),
    summary: "Container log stream",
    description:
      'Frames {"type":"log","log","streamType","timestamp"} from the engine: the last `tail` lines, then (with follow) new ones until the container stops.',
    access: "namespace",
    params: UuidParams,
    querystring: Type.Object({
      ...LogsQuery.properties,
      service: Type.Optional(
        Type.String({ description: "service resource URI; another service's container is a 404" }),
      ),
    }),
    async prepare(req, { params, query: q }): Promise<LogsPlan> {
      const c = await ctx.store.services.findContainer(params.uuid);
      if (!c || c.namespace !== namespaceOf(req)) throw notFound("container");
      if (
        q.service !== undefined &&
        uriKey(q.service) !== uriKey(serviceUri({ namespace: c.namespace, uuid: c.service_uuid }))
      ) {
        throw notFound("container");
      }
      return {
        namespace: c.namespace,
        target: { kind: "container", uuid: c.uuid, name: c.name, key: uriKey(containerUri(c)) },
        tail: q.tail ?? 300,
        follow: q.follow ?? true,
      };
    },
    namespace: (plan) => plan.namespace,
    open: (ws, plan) => new RecordLogStream(ctx, ws, plan).run(),
  });

  streamRoute(app, ctx, {
    urls: nsPaths("/api/app/v1/{ns}service/:uuid/logs/"),
    summary: "Service log stream",
    description:
      'Frames {"type":"log","source","log","streamType","timestamp"}: the last `tail` lines of all its containers by time, then (with follow) new lines, including containers that start later (scale, redeploy), until the service is terminated.',
    access: "namespace",
    params: UuidParams,
    querystring: LogsQuery,
    async prepare(req, { params, query: q }): Promise<LogsPlan> {
      const s = await ctx.store.services.findService(params.uuid);
      if (!s || s.namespace !== namespaceOf(req)) throw notFound("service");
      return {
        namespace: s.namespace,
        target: { kind: "service", uuid: s.uuid, name: s.name, key: uriKey(serviceUri(s)) },
        tail: q.tail ?? 300,
        follow: q.follow ?? true,
      };
    },
    namespace: (plan) => plan.namespace,
    open: (ws, plan) => new RecordLogStream(ctx, ws, plan).run(),
  });
}

/** The container a record names, as the runtime's port addresses it. */
function ref(r: ContainerRow): { node_uuid: string; engineId: string } {
  return { node_uuid: r.node_uuid, engineId: r.engine_id ?? "" };
}
