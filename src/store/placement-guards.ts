// Placement generations of nodes (migration 0022): what the plan applier
// (orchestrator/plan-applier.ts) checks at commit. A snapshot reads the generations of its
// namespace's nodes before anything else; the transaction that inserts a plan's containers moves
// the generation of every node the plan places on, in one statement, and learns from what it
// wrote whether another commit moved one first. On PostgreSQL the statement's row locks (taken in
// uuid order, so two plans never deadlock) hold a second replica's commit on the same nodes until
// the first one ends; SQLite has one writer. A node's row goes when the node turns Terminated
// (store/row-writes.ts): nothing is placed there again.
import type { Kernel } from "./types.ts";

export class PlacementGuardStore {
  constructor(private readonly s: Kernel) {}

  /** The placement generation of each of the namespace's nodes that has placed anything (others: 0). */
  async generations(namespace: string): Promise<Map<string, number>> {
    const rows = await this.s.db
      .selectFrom("placement_guards")
      .select(["node_uuid", "generation"])
      .where("namespace", "=", namespace)
      .execute();
    return new Map(rows.map((r) => [r.node_uuid, Number(r.generation)]));
  }

  /** The placement generations of some nodes (absent: never placed on, 0). */
  async generationsOf(nodes: readonly string[]): Promise<Map<string, number>> {
    if (nodes.length === 0) return new Map();
    const rows = await this.s.db
      .selectFrom("placement_guards")
      .select(["node_uuid", "generation"])
      .where("node_uuid", "in", nodes)
      .execute();
    return new Map(rows.map((r) => [r.node_uuid, Number(r.generation)]));
  }

  /**
   * Moves the generation of each node in `expected` by one, inside the caller's transaction, and
   * answers the nodes whose generation was not the one expected (another commit placed there since
   * it was read): the caller then rolls back. `generations`: each node's generation as written.
   */
  async advance(
    namespace: string,
    expected: ReadonlyMap<string, number>,
  ): Promise<{ stale: string[]; generations: Map<string, number> }> {
    if (!this.s.isTransaction) throw new Error("placement generations move inside the placing transaction");
    const nodes = [...expected.keys()].sort();
    if (nodes.length === 0) return { stale: [], generations: new Map() };
    const rows = await this.s.db
      .insertInto("placement_guards")
      .values(nodes.map((node_uuid) => ({ node_uuid, namespace, generation: 1 })))
      .onConflict((oc) =>
        oc
          .column("node_uuid")
          .doUpdateSet((eb) => ({ generation: eb("placement_guards.generation", "+", 1) })),
      )
      .returning(["node_uuid", "generation"])
      .execute();
    const generations = new Map(rows.map((r) => [r.node_uuid, Number(r.generation)]));
    const stale = nodes.filter((n) => generations.get(n) !== (expected.get(n) ?? 0) + 1);
    return { stale, generations };
  }

  /**
   * Drops a node's guard, inside the transaction that terminates it. A plan that read its
   * generation is then refused at commit (the row starts again at 1, never the generation it
   * expects), so it is planned again without the node.
   */
  async forget(nodeUuid: string): Promise<void> {
    await this.s.db.deleteFrom("placement_guards").where("node_uuid", "=", nodeUuid).execute();
  }
}
