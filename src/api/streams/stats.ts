// Live stats (issue 32): `…/container/<uuid>/stats/live/`, `…/service/<uuid>/stats/live/` and
// `/api/infra/v1/[ns/]node/<uuid>/stats/live/` send `{"type": "stats", "resource_uri", "point"}`
// once per collection round (the latest point first, when there is one). Access is checked at the
// upgrade (another namespace's object: 404) and watched afterwards: the stream closes with 1008
// when the caller loses the namespace.
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { StatsReader } from "../../stats/reader.ts";
import { STATS_PATHS, statsSubject } from "../routes/stats.ts";
import { nsPaths } from "../routing.ts";
import { type StreamContext, streamRoute } from "./route.ts";
import { sendJson } from "./sockets.ts";

const Params = Type.Object({ uuid: Type.String(), namespace: Type.Optional(Type.String()) });

export function statsStreamRoutes(app: FastifyInstance, ctx: StreamContext, stats: StatsReader): void {
  for (const kind of ["container", "service", "node"] as const) {
    streamRoute(app, ctx, {
      urls: nsPaths(`${STATS_PATHS[kind]}live/`),
      summary: `Live stats of a ${kind}`,
      description:
        'Frames `{"type": "stats", "resource_uri", "point"}`, one per collection round, `point` as in the stats answer.',
      access: "namespace",
      params: Params,
      querystring: Type.Object({}),
      prepare: (req, { params }) => statsSubject(req, ctx.store, kind, params.uuid),
      namespace: (plan) => plan.namespace,
      open(ws, plan) {
        const stop = stats.watch(plan, (point) =>
          sendJson(ws, { type: "stats", resource_uri: plan.uri, point }),
        );
        ws.once("close", stop);
      },
    });
  }
}
