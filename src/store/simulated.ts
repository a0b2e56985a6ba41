// The engines of simulated nodes, shared by every replica (migration 0030; nodes/simulated-engines.ts
// keeps each replica's copy in step). A write stores the containers one replica's engine changed;
// each node it touches moves that node's clock (migration 0040) and its rows carry the node's new
// value. On PostgreSQL a node's clock row stays locked until the commit, so the writes of one node
// commit in the order of its `seq` and a reader that follows a node's `seq` skips none; writers of
// different nodes never wait for each other (issue 34: one clock for every node made all of them
// take turns).
import { simulatedContainerOf, simulatedOriginOf } from "./codec.ts";
import type { Kernel } from "./types.ts";

export interface SimulatedContainerRecord {
  engineId: string;
  nodeUuid: string;
  /** The node's clock value of the write (comparable only with the same node's). */
  seq: number;
  removed: boolean;
  /** The process that wrote it (a replica never applies its own writes back). */
  origin: string;
  /**
   * The container as the engine records it (drivers/fake `SimulatedContainerState`); absent once
   * removed. Decoded when first asked (a replica skips its own rows and rows others overwrote).
   */
  readonly container: Record<string, unknown> | undefined;
}

export interface SimulatedContainerWrite {
  engineId: string;
  nodeUuid: string;
  origin: string;
  /** Absent: the engine removed it. */
  container: object | undefined;
  /** What it holds on its node: `ip/<address>`, `<protocol>/<host port>` (none once stopped). */
  claims: readonly string[];
}

/** A value a written container holds that another container of its node holds already. */
export interface RefusedClaim {
  engineId: string;
  nodeUuid: string;
  claim: string;
  /** The container that holds it. */
  holder: string;
}

/**
 * Asked, within the write, about the containers whose claims were refused: answers their rows
 * again as their engine left them after choosing other values (or failing their start).
 */
export type Reclaim = (refused: readonly RefusedClaim[]) => SimulatedContainerWrite[];

/** Rows per statement of a write (PostgreSQL's and SQLite's parameter limits stay far off). */
const ROWS_PER_STATEMENT = 200;
/** Nodes per statement of a read of what was written since (two parameters each). */
const NODES_PER_READ = 256;
/** Times a write asks its engines to choose again before it keeps what they hold. */
const RECLAIM_ROUNDS = 4;

export class SimulatedEngineStore {
  constructor(private readonly s: Kernel) {}

  /**
   * Stores what engines changed, in one transaction; answers each node's clock value they were
   * written under. The nodes' clock rows are taken first, in uuid order (two writers never
   * deadlock), so writers of one node claim and write one after another. Each container's claims
   * are taken with it: a value another container of the node holds is refused (the primary key),
   * and `reclaim` gives the container's row again once its engine chose anew.
   */
  async write(
    rows: readonly SimulatedContainerWrite[],
    reclaim: Reclaim | undefined,
    now: number,
  ): Promise<Map<string, number>> {
    return this.s.transaction(async (tx) => {
      const nodes = [...new Set(rows.map((r) => r.nodeUuid))].sort();
      const seqs = new Map<string, number>();
      for (let at = 0; at < nodes.length; at += ROWS_PER_STATEMENT) {
        const clocks = await tx.db
          .insertInto("simulated_node_clocks")
          .values(nodes.slice(at, at + ROWS_PER_STATEMENT).map((node_uuid) => ({ node_uuid, seq: 1 })))
          .onConflict((oc) =>
            oc.column("node_uuid").doUpdateSet((eb) => ({ seq: eb("simulated_node_clocks.seq", "+", 1) })),
          )
          .returning(["node_uuid", "seq"])
          .execute();
        for (const c of clocks) seqs.set(c.node_uuid, Number(c.seq));
      }
      const latest = new Map(rows.map((r) => [r.engineId, r]));
      let claiming: readonly SimulatedContainerWrite[] = rows;
      for (let round = 0; claiming.length > 0; round++) {
        const refused = await takeClaims(tx.db, claiming);
        if (refused.length === 0 || !reclaim || round === RECLAIM_ROUNDS) break;
        claiming = reclaim(refused);
        for (const r of claiming) latest.set(r.engineId, r);
      }
      const written = [...latest.values()];
      for (let at = 0; at < written.length; at += ROWS_PER_STATEMENT) {
        const values = written.slice(at, at + ROWS_PER_STATEMENT).map((r) => ({
          engine_id: r.engineId,
          node_uuid: r.nodeUuid,
          seq: seqs.get(r.nodeUuid) ?? 0,
          removed: r.container ? 0 : 1,
          data: JSON.stringify({ origin: r.origin, container: r.container }),
          written_at: now,
        }));
        await tx.db
          .insertInto("simulated_containers")
          .values(values)
          .onConflict((oc) =>
            oc.column("engine_id").doUpdateSet((eb) => ({
              seq: eb.ref("excluded.seq"),
              removed: eb.ref("excluded.removed"),
              data: eb.ref("excluded.data"),
              written_at: eb.ref("excluded.written_at"),
            })),
          )
          .execute();
      }
      return seqs;
    });
  }

  /**
   * What was written to some nodes after the seq read of each (removed containers included),
   * oldest write of each node first: one statement per NODES_PER_READ nodes.
   */
  async since(cursors: ReadonlyMap<string, number>): Promise<SimulatedContainerRecord[]> {
    const pairs = [...cursors];
    const out: SimulatedContainerRecord[] = [];
    for (let at = 0; at < pairs.length; at += NODES_PER_READ) {
      const part = pairs.slice(at, at + NODES_PER_READ);
      // Padded to a power of two (the first pair again), so the statement has few texts to
      // prepare, whatever the number of nodes read.
      const size = 2 ** Math.ceil(Math.log2(part.length));
      while (part.length < size) part.push(part[0]!);
      const rows = await this.s.db
        .selectFrom("simulated_containers")
        .selectAll()
        .where((eb) =>
          eb.or(part.map(([node, seq]) => eb.and([eb("node_uuid", "=", node), eb("seq", ">", seq)]))),
        )
        .orderBy("seq")
        .execute();
      out.push(...rows.map(record));
    }
    return out;
  }

  /**
   * Every container written to several nodes, removed ones included (their seq tells a reader
   * where the node's writes stand), in one statement per 500 nodes.
   */
  async ofNodes(nodeUuids: readonly string[]): Promise<SimulatedContainerRecord[]> {
    const out: SimulatedContainerRecord[] = [];
    for (let at = 0; at < nodeUuids.length; at += 500) {
      const rows = await this.s.db
        .selectFrom("simulated_containers")
        .selectAll()
        .where("node_uuid", "in", nodeUuids.slice(at, at + 500))
        .execute();
      out.push(...rows.map(record));
    }
    return out;
  }

  /** Forgets a node's engine (its simulated instance was terminated). */
  async dropNode(nodeUuid: string): Promise<void> {
    await this.s.transaction(async (tx) => {
      await tx.db.deleteFrom("simulated_containers").where("node_uuid", "=", nodeUuid).execute();
      await tx.db.deleteFrom("simulated_claims").where("node_uuid", "=", nodeUuid).execute();
      await tx.db.deleteFrom("simulated_node_clocks").where("node_uuid", "=", nodeUuid).execute();
    });
  }

  /** The claims of a node's containers (tests; the rows are a write's, in claim order). */
  async claimsOf(nodeUuid: string): Promise<{ claim: string; engineId: string }[]> {
    const rows = await this.s.db
      .selectFrom("simulated_claims")
      .select(["claim", "engine_id"])
      .where("node_uuid", "=", nodeUuid)
      .orderBy("claim")
      .execute();
    return rows.map((r) => ({ claim: r.claim, engineId: r.engine_id }));
  }

  /**
   * Forgets containers removed before `before` (ms): every replica has read past them, or reads
   * the node whole at its next call (nodes/simulated-engines.ts, RESYNC_AFTER_MS).
   */
  async purgeRemoved(before: number): Promise<void> {
    await this.s.db
      .deleteFrom("simulated_containers")
      .where("removed", "=", 1)
      .where("written_at", "<", before)
      .execute();
  }
}

/**
 * Gives up what the containers held and takes what they hold now; answers the values another
 * container holds already (those stay its own).
 */
async function takeClaims(
  db: Kernel["db"],
  rows: readonly SimulatedContainerWrite[],
): Promise<RefusedClaim[]> {
  const ids = rows.map((r) => r.engineId);
  for (let at = 0; at < ids.length; at += ROWS_PER_STATEMENT * 2)
    await db
      .deleteFrom("simulated_claims")
      .where("engine_id", "in", ids.slice(at, at + ROWS_PER_STATEMENT * 2))
      .execute();
  // In one order for every writer (writers of one node are serialized by its clock row anyway).
  const wanted = rows
    .flatMap((r) => r.claims.map((claim) => ({ node_uuid: r.nodeUuid, claim, engine_id: r.engineId })))
    .sort((x, y) =>
      x.node_uuid === y.node_uuid ? (x.claim < y.claim ? -1 : 1) : x.node_uuid < y.node_uuid ? -1 : 1,
    );
  const refused: RefusedClaim[] = [];
  for (let at = 0; at < wanted.length; at += ROWS_PER_STATEMENT) {
    const batch = wanted.slice(at, at + ROWS_PER_STATEMENT);
    const taken = await db
      .insertInto("simulated_claims")
      .values(batch)
      .onConflict((oc) => oc.columns(["node_uuid", "claim"]).doNothing())
      .returning(["node_uuid", "claim"])
      .execute();
    if (taken.length === batch.length) continue;
    const ours = new Set(taken.map((t) => `${t.node_uuid} ${t.claim}`));
    const lost = batch.filter((w) => !ours.has(`${w.node_uuid} ${w.claim}`));
    const holders = await db
      .selectFrom("simulated_claims")
      .select(["node_uuid", "claim", "engine_id"])
      .where("node_uuid", "in", [...new Set(lost.map((l) => l.node_uuid))])
      .where("claim", "in", [...new Set(lost.map((l) => l.claim))])
      .execute();
    const holderOf = new Map(holders.map((h) => [`${h.node_uuid} ${h.claim}`, h.engine_id]));
    for (const l of lost) {
      const holder = holderOf.get(`${l.node_uuid} ${l.claim}`);
      // Two containers of one write may want one value: the first in the batch took it.
      if (holder && holder !== l.engine_id)
        refused.push({ engineId: l.engine_id, nodeUuid: l.node_uuid, claim: l.claim, holder });
    }
  }
  return refused;
}

function record(r: {
  engine_id: string;
  node_uuid: string;
  seq: number | string;
  removed: number;
  data: string;
}): SimulatedContainerRecord {
  const removed = Number(r.removed) === 1;
  let decoded: { container?: Record<string, unknown> } | undefined;
  return {
    engineId: r.engine_id,
    nodeUuid: r.node_uuid,
    seq: Number(r.seq),
    removed,
    origin: simulatedOriginOf(r.data),
    get container() {
      if (removed) return undefined;
      decoded ??= simulatedContainerOf(r.data);
      return decoded.container;
    },
  };
}
