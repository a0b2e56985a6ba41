// The dashboard's overview in one answer (issue 33): per kind, how many objects of the namespace are
// in each state and how many of those fail and why (store/overview.ts), Terminated ones left out.
// One grouped count per table instead of a list call per state: the overview follows every change
// at the cost of one cheap query.
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { Nullable, View } from "../../contract/common.ts";
import { OverviewStore } from "../../store/overview.ts";
import type { Store } from "../../store/store.ts";
import { namespaceOf } from "../namespaces.ts";
import { NsParams } from "../objects.ts";
import { nsPaths } from "../routing.ts";

const Counts = Type.Array(
  View({
    state: Type.String(),
    reason: Nullable(
      Type.String({
        description:
          "why these fail: crashed, unhealthy, partly running, unreachable, partly deployed; null: they do not",
      }),
    ),
    n: Type.Integer({ minimum: 0 }),
  }),
);

export const OverviewView = View(
  {
    nodecluster: Counts,
    node: Counts,
    stack: Counts,
    service: Counts,
    container: Counts,
  },
  "objects of the namespace by state and failing reason, Terminated ones left out",
);

export function overviewRoutes(untyped: FastifyInstance, deps: { store: Store }): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  for (const url of nsPaths("/api/app/v1/{ns}overview/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags: ["services and containers"],
          summary: "Counts of a namespace's objects by state, and of those failing with the reason",
          description:
            "A container fails when it crashed (stopped on its own with an error exit code, or restarting) or runs unhealthy; a service when one of its containers does, or it is partly running; a stack when one of its services does, or it is partly running; a node when it is unreachable; a node cluster when one of its nodes is, or it is partly deployed. The lists' `failing=true` filter gives the same objects.",
          params: NsParams,
          response: { 200: OverviewView },
        },
      },
      async (req) => new OverviewStore(deps.store).counts(namespaceOf(req)),
    );
  }
}
