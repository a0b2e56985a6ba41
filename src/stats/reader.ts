// Reads of stats series (issue 32): a range and a step pick the stored series (the collection
// step within its retention, else minutes) and points are averaged to the step asked for; live
// watchers get each new round's point of their subject. One timer reads the new points of every
// watched subject in one query (and the collector of this replica wakes it after each round), so
// open streams cost one query per interval together, not one each. A service's point of a round is
// given only whole: with several replicas, each writes the points of its own nodes' containers, so
// a round can be half written for a while; it is held back until it sums every container the
// collectors sample (or two intervals have passed: a container whose sample failed does not hold
// its service back), in the live stream and as the last point of a series alike.
import type { StatPointView, StatsQuery, StatsView } from "../contract/stats.ts";
import { badRequest } from "../domain/errors.ts";
import {
  downsample,
  parseDuration,
  type Retention,
  type StatPoint,
  seriesFor,
  sumPoints,
} from "../domain/stats.ts";
import type { Clock } from "../domain/time.ts";
import { statsOf } from "../store/stats.ts";
import type { Store } from "../store/store.ts";

export type StatsSubjectKind = "container" | "service" | "node";

export interface StatsSubject {
  kind: StatsSubjectKind;
  uuid: string;
  /** Its resource URI, as the answers name it. */
  uri: string;
}

/** Most points one answer holds. */
const MAX_POINTS = 2000;

/** After this many intervals a round is given as it is, whole or not. */
const WAIT_STEPS = 2;

const round = (n: number, digits = 3) => Math.round(n * 10 ** digits) / 10 ** digits;

export function pointView(p: StatPoint, kind: StatsSubjectKind): StatPointView {
  return {
    timestamp: Math.floor(p.at / 1000),
    cpu_percent: round(p.cpu),
    cpu_node_percent: kind === "service" || p.cpus <= 0 ? null : round(p.cpu / p.cpus),
    cpus: p.cpus,
    memory_bytes: Math.round(p.memory),
    memory_limit_bytes: Math.round(p.memory_limit),
    memory_percent: p.memory_limit > 0 ? round((p.memory / p.memory_limit) * 100) : 0,
    net_rx_bytes_per_s: round(p.net_rx),
    net_tx_bytes_per_s: round(p.net_tx),
    block_read_bytes_per_s: round(p.block_read),
    block_write_bytes_per_s: round(p.block_write),
    pids: Math.round(p.pids),
    restart_count: Math.round(p.restarts),
    containers: Math.round(p.containers),
  };
}

interface Watcher {
  subject: StatsSubject;
  since: number;
  send(point: StatPointView): void;
}

export class StatsReader {
  private readonly watchers = new Set<Watcher>();
  private timer: NodeJS.Timeout | undefined;
  private reading = false;
  private again = false;

  constructor(
    private readonly deps: {
      store: Store;
      clock: Clock;
      retention: Retention;
      onError(err: unknown): void;
    },
  ) {}

  /** A subject's series over the range, at the step; 400 naming the parameter when it cannot be read. */
  async read(subject: StatsSubject, query: StatsQuery): Promise<StatsView> {
    const r = this.deps.retention;
    const rangeMs = query.range === undefined ? 3_600_000 : parseDuration(query.range);
    if (rangeMs === undefined || rangeMs > r.coarseKeepMs)
      throw badRequest(
        `range must be a duration such as 15m, 1h or 24h, at most ${r.coarseKeepMs / 3_600_000} h (how long stats are kept).`,
        [{ field: "range", problem: `at most ${r.coarseKeepMs / 1000} s` }],
      );
    const asked = query.step === undefined ? undefined : parseDuration(query.step);
    if (query.step !== undefined && asked === undefined)
      throw badRequest("step must be a duration such as 10s, 1m or 5m.", [
        { field: "step", problem: "not a duration" },
      ]);
    const defaultStep = rangeMs <= r.fineKeepMs ? r.fineStepMs : r.coarseStepMs;
    const series = seriesFor(r, rangeMs, asked ?? defaultStep);
    const stepMs = Math.max(asked ?? defaultStep, series);
    if (rangeMs / stepMs > MAX_POINTS)
      throw badRequest(`range / step must be at most ${MAX_POINTS} points; take a longer step.`, [
        { field: "step", problem: `at least ${Math.ceil(rangeMs / MAX_POINTS / 1000)} s for this range` },
      ]);
    const to = this.deps.clock.now() + 1;
    const from = Math.floor((to - rangeMs) / stepMs) * stepMs;
    let stored =
      subject.kind === "service"
        ? await statsOf(this.deps.store).serviceSeries(subject.uuid, series, from, to)
        : await statsOf(this.deps.store).series(subject.uuid, series, from, to);
    if (subject.kind === "service" && series === r.fineStepMs && stored.length) {
      const expected = (await statsOf(this.deps.store).sampledCounts([subject.uuid])).get(subject.uuid) ?? 0;
      while (stored.length && !this.whole(stored.at(-1)!.at, stored.at(-1)!.containers, expected))
        stored = stored.slice(0, -1);
    }
    const points = stepMs === series ? stored : downsample(stored, stepMs);
    return {
      resource_uri: subject.uri,
      range: Math.round(rangeMs / 1000),
      step: Math.round(stepMs / 1000),
      points: points.map((p) => pointView(p, subject.kind)),
    };
  }

  /** Whether a service's point of the round at `at`, summing `containers`, may be given. */
  private whole(at: number, containers: number, expected: number): boolean {
    return (
      containers >= expected || this.deps.clock.now() >= at + WAIT_STEPS * this.deps.retention.fineStepMs
    );
  }

  /** Sends each new point of the subject until the returned function is called. */
  watch(subject: StatsSubject, send: (point: StatPointView) => void): () => void {
    const w: Watcher = { subject, since: this.deps.clock.now() - this.deps.retention.fineStepMs, send };
    this.watchers.add(w);
    if (!this.timer) {
      this.timer = setInterval(() => void this.poll(), this.deps.retention.fineStepMs);
      this.timer.unref();
    }
    void this.poll();
    return () => {
      this.watchers.delete(w);
      if (!this.watchers.size) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    };
  }

  /** A round was written (by this replica): watchers get its points now. */
  roundWritten(): void {
    if (this.watchers.size) void this.poll();
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.watchers.clear();
  }

  private async poll(): Promise<void> {
    if (this.reading) {
      this.again = true;
      return;
    }
    this.reading = true;
    try {
      do {
        this.again = false;
        await this.deliver();
      } while (this.again);
    } catch (err) {
      this.deps.onError(err);
    } finally {
      this.reading = false;
    }
  }

  private async deliver(): Promise<void> {
    const watchers = [...this.watchers];
    if (!watchers.length) return;
    const since = Math.min(...watchers.map((w) => w.since)) + 1;
    const uuids = watchers.filter((w) => w.subject.kind !== "service").map((w) => w.subject.uuid);
    const services = watchers.filter((w) => w.subject.kind === "service").map((w) => w.subject.uuid);
    const rows = await statsOf(this.deps.store).pointsSince(
      { uuids: [...new Set(uuids)], services: [...new Set(services)] },
      this.deps.retention.fineStepMs,
      since,
    );
    const expected = services.length
      ? await statsOf(this.deps.store).sampledCounts([...new Set(services)])
      : new Map<string, number>();
    for (const w of watchers) {
      const mine =
        w.subject.kind === "service"
          ? rows.filter((r) => r.kind === "container" && r.service_uuid === w.subject.uuid)
          : rows.filter((r) => r.uuid === w.subject.uuid);
      const byAt = new Map<number, StatPoint[]>();
      for (const r of mine) {
        if (r.point.at <= w.since) continue;
        const list = byAt.get(r.point.at) ?? [];
        list.push(r.point);
        byAt.set(r.point.at, list);
      }
      for (const [at, points] of [...byAt].sort((a, b) => a[0] - b[0])) {
        const service = w.subject.kind === "service";
        // A round still being written by another replica waits (and the rounds after it).
        if (service && !this.whole(at, points.length, expected.get(w.subject.uuid) ?? 0)) break;
        const p = service ? sumPoints(at, points) : points[0]!;
        w.since = at;
        if (this.watchers.has(w)) w.send(pointView(p, w.subject.kind));
      }
    }
  }
}
