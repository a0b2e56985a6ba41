// Columns the store derives from the others on every write, so that each piece of state has one
// writer: actions write a container's or node's `phase`, the runtime and health checks its
// `observed`, and only the store computes the `state` the API shows (domain/states.ts), which
// stays a stored column so that list filters, indexes and the change feed keep working.
import { containerState, nodeState } from "../domain/states.ts";
import type { ContainerRow, DerivedColumn, FeedRows, FeedType, NodeRow } from "./types.ts";

export type { DerivedColumn, NewRow, Patch } from "./types.ts";

/** The derived columns of `row` (a row as it will be written), to write with it. */
export function derivedColumns<K extends FeedType>(
  type: K,
  row: Omit<FeedRows[K], "id" | "version" | DerivedColumn<K>>,
): Partial<FeedRows[K]> {
  if (type === "container") {
    const c = row as unknown as Pick<ContainerRow, "phase" | "observed" | "destroyed_at">;
    return { state: containerState(c) } as Partial<FeedRows[K]>;
  }
  if (type === "node") {
    const n = row as unknown as Pick<NodeRow, "phase" | "observed" | "destroyed_at">;
    return { state: nodeState(n) } as Partial<FeedRows[K]>;
  }
  return {};
}
