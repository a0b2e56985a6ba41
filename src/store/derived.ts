// Columns the store derives from the others on every write, so that each piece of state has one
// writer: actions write a container's or node's `phase`, the runtime and health checks its
// `observed`, and only the store computes the `state` the API shows (domain/states.ts), which
// stays a stored column so that list filters, indexes and the change feed keep working.
import { containerState, nodeState } from "../domain/states.ts";
import type { FeedRows, FeedType } from "./feed.ts";
import type { NodeRow } from "./nodes.ts";
import type { ContainerRow } from "./services.ts";

/** The derived columns of each type: no write method accepts them from a caller. */
export type DerivedColumn<K extends FeedType> = K extends "container" | "node" ? "state" : never;

/** Rules out a derived column even in a value typed as the whole row (`state?: never`). */
type WithoutDerived<K extends FeedType> = { [P in DerivedColumn<K>]?: never };

/** A patch of a row that has events, without its derived columns. */
export type Patch<K extends FeedType> = Partial<Omit<FeedRows[K], DerivedColumn<K>>> & WithoutDerived<K>;

/** A new row that has events, without its id, version and derived columns. */
export type NewRow<K extends FeedType> = Omit<FeedRows[K], "id" | "version" | DerivedColumn<K>> &
  WithoutDerived<K>;

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
