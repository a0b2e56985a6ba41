// The engines of simulated nodes, shared by every replica (migration 0030; nodes/simulated-engines.ts
// keeps each replica's copy in step). A write stores the containers one replica's engine changed,
// all under one new value of the clock row: on PostgreSQL the row's lock is held until the commit,
// so writes commit in the order of their `seq` and a reader that follows `seq` skips none.
import { simulatedContainerOf } from "./codec.ts";
import type { Kernel } from "./types.ts";

export interface SimulatedContainerRecord {
  engineId: string;
  nodeUuid: string;
  seq: number;
  /** The process that wrote it (a replica never applies its own writes back). */
  origin: string;
  /** The container as the engine records it (drivers/fake `SimulatedContainerState`); absent once removed. */
  container: Record<string, unknown> | undefined;
}

export interface SimulatedContainerWrite {
  engineId: string;
  nodeUuid: string;
  origin: string;
  /** Absent: the engine removed it. */
  container: object | undefined;
}

/** Rows per statement of a write (PostgreSQL's and SQLite's parameter limits stay far off). */
const ROWS_PER_STATEMENT = 200;

export class SimulatedEngineStore {
  constructor(private readonly s: Kernel) {}

  /** Stores what engines changed, in one transaction; answers the seq they were written under. */
  async write(rows: readonly SimulatedContainerWrite[]): Promise<number> {
    return this.s.transaction(async (tx) => {
      const clock = await tx.db
        .insertInto("simulated_clock")
        .values({ id: 1, seq: 1 })
        .onConflict((oc) => oc.column("id").doUpdateSet((eb) => ({ seq: eb("simulated_clock.seq", "+", 1) })))
        .returning("seq")
        .executeTakeFirstOrThrow();
      const seq = Number(clock.seq);
      for (let at = 0; at < rows.length; at += ROWS_PER_STATEMENT) {
        const values = rows.slice(at, at + ROWS_PER_STATEMENT).map((r) => ({
          engine_id: r.engineId,
          node_uuid: r.nodeUuid,
          seq,
          removed: r.container ? 0 : 1,
          data: JSON.stringify({ origin: r.origin, container: r.container }),
        }));
        await tx.db
          .insertInto("simulated_containers")
          .values(values)
          .onConflict((oc) =>
            oc.column("engine_id").doUpdateSet((eb) => ({
              seq: eb.ref("excluded.seq"),
              removed: eb.ref("excluded.removed"),
              data: eb.ref("excluded.data"),
            })),
          )
          .execute();
      }
      return seq;
    });
  }

  /** The last seq written (0 before any write). */
  async latestSeq(): Promise<number> {
    const row = await this.s.db
      .selectFrom("simulated_clock")
      .select("seq")
      .where("id", "=", 1)
      .executeTakeFirst();
    return row ? Number(row.seq) : 0;
  }

  /** Every container written after `seq`, removed ones included, oldest write first. */
  async since(seq: number, limit: number): Promise<SimulatedContainerRecord[]> {
    const rows = await this.s.db
      .selectFrom("simulated_containers")
      .selectAll()
      .where("seq", ">", seq)
      .orderBy("seq")
      .limit(limit)
      .execute();
    return rows.map(record);
  }

  /** A node's engine as stored: its containers that were not removed. */
  async ofNode(nodeUuid: string): Promise<SimulatedContainerRecord[]> {
    const rows = await this.s.db
      .selectFrom("simulated_containers")
      .selectAll()
      .where("node_uuid", "=", nodeUuid)
      .where("removed", "=", 0)
      .execute();
    return rows.map(record);
  }

  /** Forgets a node's engine (its simulated instance was terminated). */
  async dropNode(nodeUuid: string): Promise<void> {
    await this.s.db.deleteFrom("simulated_containers").where("node_uuid", "=", nodeUuid).execute();
  }

  /** Forgets removed containers written at or before `seq` (every replica has read past it). */
  async purgeRemoved(seq: number): Promise<void> {
    await this.s.db
      .deleteFrom("simulated_containers")
      .where("removed", "=", 1)
      .where("seq", "<=", seq)
      .execute();
  }
}

function record(r: {
  engine_id: string;
  node_uuid: string;
  seq: number | string;
  removed: number;
  data: string;
}): SimulatedContainerRecord {
  const { origin, container } = simulatedContainerOf(r.data);
  return {
    engineId: r.engine_id,
    nodeUuid: r.node_uuid,
    seq: Number(r.seq),
    origin,
    container: Number(r.removed) === 1 ? undefined : container,
  };
}
