// Engine containers unknown to Berth on a node (issue 31, orchestrator/unknown-containers.ts):
// after a restore, containers made after the backup carry Berth's labels for records it does not
// hold. Berth reports them and never removes them by itself; here the node's users list them and
// remove one (an action in the audit log, "Node Unknown Container Remove").
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { ApiError } from "../../domain/errors.ts";
import { nodeUri } from "../../domain/uri.ts";
import type { EngineSource } from "../../nodes/provisioners.ts";
import {
  removeUnknown,
  type UnknownContainer,
  unknownContainers,
} from "../../orchestrator/unknown-containers.ts";
import type { Store } from "../../store/store.ts";
import { ownObject } from "../objects.ts";
import { nsPaths } from "../routing.ts";

const View = Type.Object({
  id: Type.String({ description: "the engine's container id" }),
  name: Type.String(),
  state: Type.String({ description: "as the engine reports it" }),
  container: Type.String({ description: "the container record its labels name, which Berth does not hold" }),
  service: Type.Union([Type.String(), Type.Null()]),
  created_datetime: Type.String(),
});
const view = (c: UnknownContainer) => ({
  id: c.id,
  name: c.name,
  state: c.state,
  container: c.container,
  service: c.service,
  created_datetime: new Date(c.created).toISOString(),
});

export function unknownContainerRoutes(
  untyped: FastifyInstance,
  deps: { store: Store; engines: EngineSource },
): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { store, engines } = deps;
  const tags = ["nodes"];
  const nodeOf = async (req: Parameters<typeof ownObject>[0], uuid: string) =>
    ownObject(req, await store.nodes.findNode(uuid), "node", nodeUri);
  for (const url of nsPaths("/api/infra/v1/{ns}node/:uuid/unknowncontainer/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary:
            "Engine containers on the node with Berth's labels for records Berth does not hold (after a restore)",
          params: Type.Object({ uuid: Type.String(), namespace: Type.Optional(Type.String()) }),
          response: { 200: Type.Object({ objects: Type.Array(View) }) },
        },
      },
      async (req) => {
        const node = await nodeOf(req, req.params.uuid);
        const found = await fromEngine(node.uuid, () =>
          unknownContainers(store, engines.forNode(node), node),
        );
        return { objects: found.map(view) };
      },
    );
  }
  for (const url of nsPaths("/api/infra/v1/{ns}node/:uuid/unknowncontainer/:id/")) {
    app.delete(
      url,
      {
        config: { action: "Node Unknown Container Remove", access: "namespace" },
        schema: {
          tags,
          summary:
            "Remove an engine container Berth does not hold (checked again first; a container Berth holds is a 404)",
          params: Type.Object({
            uuid: Type.String(),
            id: Type.String({
              pattern: "^[0-9a-f]{12,64}$",
              description: "the engine id, or 12+ of its first characters",
            }),
            namespace: Type.Optional(Type.String()),
          }),
          response: { 200: View },
        },
      },
      async (req) => {
        const node = await nodeOf(req, req.params.uuid);
        const removed = await fromEngine(node.uuid, () =>
          removeUnknown(store, engines.forNode(node), node, req.params.id),
        );
        req.audit.namespace = node.namespace;
        req.audit.object = nodeUri(node);
        req.audit.note = `Removed engine container ${removed.id.slice(0, 12)} (${removed.name}, ${removed.state}) from node ${node.uuid}: it carried Berth's labels for container ${removed.container}${removed.service ? ` of service ${removed.service}` : ""}, which Berth does not hold`;
        return view(removed);
      },
    );
  }
}

/**
 * What the node's engine answers; an engine that does not answer (the node unreachable, a bound
 * passed) is a 409 that says so, not a server error: the call can be made again once it answers.
 */
async function fromEngine<T>(node: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw new ApiError(
      "conflict",
      "node_unreachable",
      `The engine of node ${node} did not answer (${err instanceof Error ? err.message : String(err)}); try again once the node is Deployed.`,
    );
  }
}
