// Schemas of stats (issue 32): a series of points for a container, a service or a node, read with
// a range and a step, and the frames of the live stats stream.
import { type Static, Type } from "typebox";
import { Nullable, Uri, View } from "./common.ts";

export const StatsQuery = Type.Object({
  range: Type.Optional(
    Type.String({
      pattern: "^[0-9]{1,7}[smhd]?$",
      description: "how far back: 90s, 15m, 1h (default), 24h; at most the minute series' retention",
    }),
  ),
  step: Type.Optional(
    Type.String({
      pattern: "^[0-9]{1,7}[smhd]?$",
      description:
        "seconds between points (10s, 1m, 5m); the collection interval by default, a minute past its retention",
    }),
  ),
});
export type StatsQuery = Static<typeof StatsQuery>;

export const StatPointView = View(
  {
    timestamp: Type.Integer({ description: "start of the step, Unix seconds" }),
    cpu_percent: Type.Number({ description: "CPU in percent of one core, as `docker stats` shows it" }),
    cpu_node_percent: Nullable(
      Type.Number({ description: "CPU in percent of the node's CPUs (null for a service)" }),
    ),
    cpus: Type.Number({ description: "CPUs of the node" }),
    memory_bytes: Type.Number({ description: "memory used without the page cache" }),
    memory_limit_bytes: Type.Number({ description: "the memory limit; a node's: its memory" }),
    memory_percent: Type.Number(),
    net_rx_bytes_per_s: Type.Number(),
    net_tx_bytes_per_s: Type.Number(),
    block_read_bytes_per_s: Type.Number(),
    block_write_bytes_per_s: Type.Number(),
    pids: Type.Number(),
    restart_count: Type.Number({ description: "restarts by the engine since the container was created" }),
    containers: Type.Number({ description: "containers the point sums" }),
  },
  "what a container, a service or a node used over one step",
);
export type StatPointView = Static<typeof StatPointView>;

export const StatsView = View(
  {
    resource_uri: Uri,
    range: Type.Integer({ description: "seconds" }),
    step: Type.Integer({ description: "seconds between points" }),
    points: Type.Array(StatPointView),
  },
  "a stats series",
);
export type StatsView = Static<typeof StatsView>;

/**
 * A frame of the live stats stream: `{type: "stats", resource_uri, point}`, one per collection round;
 * a service's once the round sums all its containers (or two intervals on), never half a round.
 */
export const StatsFrame = Type.Object({
  type: Type.Literal("stats"),
  resource_uri: Uri,
  point: StatPointView,
});
export type StatsFrame = Static<typeof StatsFrame>;
