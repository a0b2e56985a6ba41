// Stats series (issue 32): points of containers and nodes per step, kept in the store so that
// every replica reads what any replica collected, on SQLite and PostgreSQL alike. Two series per
// subject: the collection step (kept an hour by default) and minutes rolled up from it in SQL
// (kept a day). Points are telemetry, not objects: they have no change-feed entries.
import { setImmediate as nextTurn } from "node:timers/promises";
import { sql } from "kysely";
import type { StatPoint } from "../domain/stats.ts";
import { inChunks } from "./batches.ts";
import type { StatPointTable } from "./schema.ts";
import type { Kernel } from "./types.ts";

export type StatRow = StatPointTable;

export interface SampledContainer {
  uuid: string;
  namespace: string;
  service_uuid: string;
  node_uuid: string;
  engine_id: string | null;
  restart_count: number;
}
/**
 * Points per INSERT: 19 columns each, well within every dialect's limit on bound parameters, and a
 * few ms of the event loop (at 400 a statement held it for some 30 ms).
 */
const POINTS_PER_INSERT = 200;
/** The fewest and most uuid slices a roll-up or a prune works through, one statement each. */
export const MIN_SLICES = 16;
export const MAX_SLICES = 256;

/**
 * `n` ranges of lower-case hex uuids, [low, high), covering every uuid (a power of two from 16 to
 * 256: the first one or two digits). The first has no low bound, the last no high one.
 */
export function uuidSlices(n: number): { low?: string; high?: string }[] {
  const count = Math.min(MAX_SLICES, Math.max(MIN_SLICES, 2 ** Math.round(Math.log2(n))));
  const digits = count <= 16 ? 1 : 2;
  const width = 16 ** digits / count;
  const at = (k: number) => (k * width).toString(16).padStart(digits, "0");
  return Array.from({ length: count }, (_, k) => ({
    ...(k > 0 ? { low: at(k) } : {}),
    ...(k < count - 1 ? { high: at(k + 1) } : {}),
  }));
}

/** Runs one statement per slice, the event loop given back between; the longest one's ms. */
async function bySlices(
  slices: number,
  run: (slice: { low?: string; high?: string }) => Promise<unknown>,
): Promise<number> {
  let longest = 0;
  for (const [i, slice] of uuidSlices(slices).entries()) {
    if (i > 0) await nextTurn();
    const started = performance.now();
    await run(slice);
    longest = Math.max(longest, performance.now() - started);
  }
  return longest;
}

const FIGURES = [
  "cpu",
  "cpus",
  "memory",
  "memory_limit",
  "net_rx",
  "net_tx",
  "block_read",
  "block_write",
  "pids",
  "restarts",
  "containers",
] as const;

function point(r: Pick<StatRow, "at" | (typeof FIGURES)[number]>): StatPoint {
  return {
    at: Number(r.at),
    cpu: Number(r.cpu),
    cpus: Number(r.cpus),
    memory: Number(r.memory),
    memory_limit: Number(r.memory_limit),
    net_rx: Number(r.net_rx),
    net_tx: Number(r.net_tx),
    block_read: Number(r.block_read),
    block_write: Number(r.block_write),
    pids: Number(r.pids),
    restarts: Number(r.restarts),
    containers: Number(r.containers),
  };
}

export interface NamespaceUsage {
  namespace: string;
  containers: number;
  cpu: number;
  memory: number;
  net_rx: number;
  net_tx: number;
}

export class StatsStore {
  constructor(private readonly s: Kernel) {}

  /** Writes points; a point already written for its subject, series and time is kept as it was. */
  async insertPoints(rows: readonly StatRow[]): Promise<void> {
    if (!rows.length) return;
    // One transaction: a round's points are read whole or not at all (a service sums them).
    await this.s.transaction(async (tx) => {
      for (let i = 0; i < rows.length; i += POINTS_PER_INSERT) {
        // Other callers run between statements: a round of 150,000 points is seconds of work.
        if (i > 0) await nextTurn();
        await tx.db
          .insertInto("stat_points")
          .values(rows.slice(i, i + POINTS_PER_INSERT))
          .onConflict((oc) => oc.columns(["uuid", "step", "at"]).doNothing())
          .execute();
      }
    });
  }

  /** One subject's points of a series in [from, to), oldest first. */
  async series(uuid: string, step: number, from: number, to: number): Promise<StatPoint[]> {
    const rows = await this.s.db
      .selectFrom("stat_points")
      .select(["at", ...FIGURES])
      .where("uuid", "=", uuid)
      .where("step", "=", step)
      .where("at", ">=", from)
      .where("at", "<", to)
      .orderBy("at")
      .execute();
    return rows.map(point);
  }

  /** A service's points: its containers' points summed per time, oldest first. */
  async serviceSeries(serviceUuid: string, step: number, from: number, to: number): Promise<StatPoint[]> {
    const rows = await sql<StatRow>`
      select at, ${sql.join(
        FIGURES.map((f) =>
          f === "cpus" ? sql`max(cpus) as cpus` : sql`sum(${sql.ref(f)}) as ${sql.ref(f)}`,
        ),
      )}
      from stat_points
      where service_uuid = ${serviceUuid} and kind = 'container' and step = ${step}
        and at >= ${from} and at < ${to}
      group by at order by at`.execute(this.s.db);
    return rows.rows.map(point);
  }

  /** The latest point of each subject at or after `since` (live streams: what arrived since). */
  async pointsSince(
    subjects: { uuids: string[]; services: string[] },
    step: number,
    since: number,
  ): Promise<{ uuid: string; service_uuid: string | null; kind: string; point: StatPoint }[]> {
    if (!subjects.uuids.length && !subjects.services.length) return [];
    const rows = await this.s.db
      .selectFrom("stat_points")
      .select(["uuid", "service_uuid", "kind", "at", ...FIGURES])
      .where("step", "=", step)
      .where("at", ">=", since)
      .where((eb) =>
        eb.or([
          ...(subjects.uuids.length ? [eb("uuid", "in", subjects.uuids)] : []),
          ...(subjects.services.length
            ? [eb.and([eb("service_uuid", "in", subjects.services), eb("kind", "=", "container")])]
            : []),
        ]),
      )
      .orderBy("at")
      .execute();
    return rows.map((r) => ({ uuid: r.uuid, service_uuid: r.service_uuid, kind: r.kind, point: point(r) }));
  }

  /**
   * Rolls the fine series up into the coarse one for every whole coarse step in [from, to):
   * averages of rates and use, the largest of counts. Points already rolled up are kept.
   */
  async rollUp(
    fineStep: number,
    coarseStep: number,
    from: number,
    to: number,
    slices = MIN_SLICES,
  ): Promise<number> {
    const bucket = sql`(at / ${sql.lit(coarseStep)}) * ${sql.lit(coarseStep)}`;
    const avg = (f: string) => sql`avg(${sql.ref(f)})`;
    const max = (f: string) => sql`max(${sql.ref(f)})`;
    // A slice of the subjects per statement (by their uuid's first digits), the event loop given
    // back between: a minute of 150,000 containers' points is ~900,000 rows, and SQLite's one
    // statement over them held the loop for seconds (issue 34).
    return bySlices(slices, ({ low, high }) =>
      sql`
      insert into stat_points (kind, uuid, namespace, service_uuid, node_uuid, step, at,
        ${sql.join(FIGURES.map((f) => sql.ref(f)))})
      select kind, uuid, max(namespace), max(service_uuid), max(node_uuid), ${sql.lit(coarseStep)}, ${bucket},
        ${avg("cpu")}, ${max("cpus")}, ${avg("memory")}, ${max("memory_limit")}, ${avg("net_rx")},
        ${avg("net_tx")}, ${avg("block_read")}, ${avg("block_write")}, ${max("pids")}, ${max("restarts")},
        ${max("containers")}
      from stat_points
      where step = ${sql.lit(fineStep)} and at >= ${from} and at < ${to}
        and ${low === undefined ? sql`true` : sql`uuid >= ${low}`} and ${high === undefined ? sql`true` : sql`uuid < ${high}`}
      group by kind, uuid, ${bucket}
      on conflict (uuid, step, at) do nothing`.execute(this.s.db),
    );
  }

  /**
   * What the collector samples: live containers of these nodes that the engine runs (or restarts),
   * with their restart counts as the runtime last observed them.
   */
  async sampledContainers(nodeUuids: readonly string[]): Promise<SampledContainer[]> {
    return inChunks(nodeUuids, (part) =>
      this.s.db
        .selectFrom("containers")
        .select(["uuid", "namespace", "service_uuid", "node_uuid", "engine_id", "restart_count"])
        .where("node_uuid", "in", part)
        // The partial index of live containers states its condition literally.
        .where("state", "<>", sql.lit("Terminated"))
        .where("observed", "in", ["running", "restarting"])
        .where("engine_id", "is not", null)
        .execute(),
    );
  }

  /**
   * How many containers of each service the collectors sample in a round (live, running or
   * restarting on a Deployed node with an engine): a service's point of a round is whole once it
   * sums that many.
   */
  async sampledCounts(serviceUuids: readonly string[]): Promise<Map<string, number>> {
    const rows = await inChunks(serviceUuids, (part) =>
      this.s.db
        .selectFrom("containers as c")
        .innerJoin("nodes as n", "n.uuid", "c.node_uuid")
        .select((eb) => ["c.service_uuid", eb.fn.countAll<number>().as("n")])
        .where("c.service_uuid", "in", part)
        .where("c.state", "<>", sql.lit("Terminated"))
        .where("c.observed", "in", ["running", "restarting"])
        .where("c.engine_id", "is not", null)
        .where("n.state", "=", "Deployed")
        .where("n.engine_url", "is not", null)
        .groupBy("c.service_uuid")
        .execute(),
    );
    return new Map(rows.map((r) => [r.service_uuid, Number(r.n)]));
  }

  /**
   * Removes a series' points older than `before`, a slice of the subjects per statement (by their
   * uuid's first digits), the event loop given back between: each round of the fine series leaves
   * retention whole, a point per running container.
   */
  async prune(step: number, before: number, slices = MIN_SLICES): Promise<number> {
    return bySlices(slices, ({ low, high }) => {
      let q = this.s.db.deleteFrom("stat_points").where("step", "=", step).where("at", "<", before);
      if (low !== undefined) q = q.where("uuid", ">=", low);
      if (high !== undefined) q = q.where("uuid", "<", high);
      return q.execute();
    });
  }

  /** Every container's figures of the latest fine step at or after `since`, summed per namespace. */
  async usageByNamespace(step: number, since: number): Promise<NamespaceUsage[]> {
    const latest = await this.s.db
      .selectFrom("stat_points")
      .select((eb) => eb.fn.max("at").as("at"))
      .where("step", "=", step)
      .where("kind", "=", "container")
      .where("at", ">=", since)
      .executeTakeFirst();
    if (latest?.at === null || latest?.at === undefined) return [];
    const rows = await sql<NamespaceUsage>`
      select namespace, count(*) as containers, sum(cpu) as cpu, sum(memory) as memory,
        sum(net_rx) as net_rx, sum(net_tx) as net_tx
      from stat_points where step = ${step} and kind = 'container' and at = ${Number(latest.at)}
      group by namespace order by namespace`.execute(this.s.db);
    return rows.rows.map((r) => ({
      namespace: r.namespace,
      containers: Number(r.containers),
      cpu: Number(r.cpu),
      memory: Number(r.memory),
      net_rx: Number(r.net_rx),
      net_tx: Number(r.net_tx),
    }));
  }

  /**
   * Containers whose memory stayed at or above `percent` of their limit on every point since
   * `since` (and had at least `minPoints` points), in a namespace; with the latest figures.
   */
  async memoryAbove(
    namespace: string,
    step: number,
    since: number,
    percent: number,
    minPoints: number,
  ): Promise<{ uuid: string; lowest: number }[]> {
    const rows = await sql<{ uuid: string; lowest: number; n: number }>`
      select uuid, min(case when memory_limit > 0 then memory * 100.0 / memory_limit else 0 end) as lowest,
        count(*) as n
      from stat_points where namespace = ${namespace} and kind = 'container' and step = ${step} and at >= ${since}
      group by uuid`.execute(this.s.db);
    return rows.rows
      .map((r) => ({ uuid: r.uuid, lowest: Number(r.lowest), n: Number(r.n) }))
      .filter((r) => r.n >= minPoints && r.lowest >= percent)
      .map(({ uuid, lowest }) => ({ uuid, lowest }));
  }

  /**
   * Containers of a namespace that restarted at least `restarts` times since `since`: the growth
   * of their restart counts from point to point (a count that fell, a start by Berth, counts
   * nothing), from 0 for a container deployed within the window (its count starts there), up to
   * the count the store holds now (the runtime writes it as the engine reports a restart), so a
   * crash loop shows without waiting for a collection round.
   */
  async restartedSince(
    namespace: string,
    step: number,
    since: number,
    restarts: number,
    now: number,
  ): Promise<{ uuid: string; grew: number }[]> {
    const rows = await sql<{ uuid: string; grew: number }>`
      select uuid, sum(case when prev is not null and restarts > prev then restarts - prev else 0 end) as grew
      from (
        select uuid, restarts, lag(restarts) over (partition by uuid order by at) as prev
        from (
          select uuid, at, restarts from stat_points
          where namespace = ${namespace} and kind = 'container' and step = ${step} and at >= ${since}
          union all
          select uuid, cast(${since - 1} as bigint) as at, 0 as restarts from containers
          where namespace = ${namespace} and state <> 'Terminated' and engine_id is not null
            and deployed_at >= ${since}
          union all
          select uuid, cast(${now + 1} as bigint) as at, restart_count as restarts from containers
          where namespace = ${namespace} and state <> 'Terminated' and engine_id is not null
        ) counts
      ) steps
      group by uuid`.execute(this.s.db);
    return rows.rows.map((r) => ({ uuid: r.uuid, grew: Number(r.grew) })).filter((r) => r.grew >= restarts);
  }
}

/** The stats section of a store (kept out of Store's getters: store.ts is at its size limit). */
export const statsOf = (s: Kernel): StatsStore => new StatsStore(s);
