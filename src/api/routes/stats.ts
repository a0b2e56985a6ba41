// Stats of containers, services and nodes (issue 32): `GET …/container/<uuid>/stats/`,
// `…/service/<uuid>/stats/` (its containers summed) and `/api/infra/v1/[ns/]node/<uuid>/stats/`
// (the node's containers summed, with the node's CPUs and memory), each with `range` and `step`.
// Namespaced like the objects themselves: another namespace's object is a 404.
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { StatsQuery, StatsView } from "../../contract/stats.ts";
import { containerUri, serviceUri } from "../../domain/uri.ts";
import { nodeUri } from "../../nodes/views.ts";
import type { StatsReader, StatsSubject } from "../../stats/reader.ts";
import type { Store } from "../../store/store.ts";
import { ownObject, UuidParams } from "../objects.ts";
import { nsPaths } from "../routing.ts";

export interface StatsDeps {
  store: Store;
  stats: StatsReader;
}

/** The subject a stats path names, or a 404 when the caller's namespace does not hold it. */
export async function statsSubject(
  req: FastifyRequest,
  store: Store,
  kind: StatsSubject["kind"],
  uuid: string,
): Promise<StatsSubject & { namespace: string }> {
  if (kind === "container") {
    const c = ownObject(req, await store.services.findContainer(uuid), "container", containerUri);
    return { kind, uuid: c.uuid, uri: containerUri(c), namespace: c.namespace };
  }
  if (kind === "service") {
    const s = ownObject(req, await store.services.findService(uuid), "service", serviceUri);
    return { kind, uuid: s.uuid, uri: serviceUri(s), namespace: s.namespace };
  }
  const n = ownObject(req, await store.nodes.findNode(uuid), "node", nodeUri);
  return { kind, uuid: n.uuid, uri: nodeUri(n), namespace: n.namespace };
}

export const STATS_PATHS: Record<StatsSubject["kind"], string> = {
  container: "/api/app/v1/{ns}container/:uuid/stats/",
  service: "/api/app/v1/{ns}service/:uuid/stats/",
  node: "/api/infra/v1/{ns}node/:uuid/stats/",
};

export function statsRoutes(untyped: FastifyInstance, deps: StatsDeps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  for (const kind of ["container", "service", "node"] as const) {
    for (const url of nsPaths(STATS_PATHS[kind])) {
      app.get(
        url,
        {
          config: { access: "namespace" },
          schema: {
            tags: [kind === "node" ? "nodes" : "services and containers"],
            summary: `A ${kind}'s CPU, memory, network and block I/O, PIDs and restarts over a range`,
            description:
              kind === "container"
                ? "CPU and memory as `docker stats` computes them. Points every `step` over the last `range`."
                : kind === "service"
                  ? "The service's containers summed per point."
                  : "The node's containers summed per point, with the node's CPUs and memory.",
            params: UuidParams,
            querystring: StatsQuery,
            response: { 200: StatsView },
          },
        },
        async (req) => deps.stats.read(await statsSubject(req, deps.store, kind, req.params.uuid), req.query),
      );
    }
  }
}
