// Node clusters and nodes (spec "Node clusters", "Nodes").
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Type } from "typebox";
import type { ActionEngine } from "../../actions/engine.ts";
import { StateFilter, StateNotFilter } from "../../contract/common.ts";
import {
  CLUSTER_LIMITS,
  NodeClusterCreateBody,
  NodeClusterView,
  NodeView,
  TagsBody as Tags,
} from "../../contract/nodes.ts";
import { addTo } from "../../domain/collections.ts";
import {
  assertAllowed,
  CLUSTER_STATES,
  NODE_OPERATIONS,
  NODE_STATES,
  type NodeState,
} from "../../domain/states.ts";
import { canonicalUri, lastSegment } from "../../domain/uri.ts";
import type { AttachedEngines } from "../../nodes/attach.ts";
import type { NodeClusters } from "../../nodes/clusters.ts";
import type { NodeProbe } from "../../nodes/probe.ts";
import { tagNames } from "../../nodes/records.ts";
import { clusterUri, clusterView, nodeUri, nodeView } from "../../nodes/views.ts";
import type { ClusterRow, NodePatch as NodeRecordPatch, NodeRow } from "../../store/nodes.ts";
import type { Store } from "../../store/store.ts";
import type { AnswerCache } from "../answer-cache.ts";
import { ENGINE_UPGRADE_ALIASES, withNodeAliases } from "../compat.ts";
import { answerOfWritten } from "../errors.ts";
import { envelope, listSchema, PAGE_QUERY, pageOf, SEARCH_QUERY } from "../lists.ts";
import { namespaceOf } from "../namespaces.ts";
import { enqueueOperation, NsParams, ownObject, UuidParams } from "../objects.ts";
import { nsPaths } from "../routing.ts";

const ClusterPatch = Type.Object({
  target_num_nodes: Type.Optional(Type.Integer({ minimum: 0, maximum: CLUSTER_LIMITS.maxNodes })),
  tags: Type.Optional(Tags),
});
const NodePatch = Type.Object({
  nickname: Type.Optional(Type.String({ maxLength: 100 })),
  tags: Type.Optional(Tags),
});
const NodeAttach = Type.Object({
  engine_url: Type.String({ description: "unix:///var/run/docker.sock or tcp://host:port" }),
  tls: Type.Optional(Type.Object({ ca: Type.String(), cert: Type.String(), key: Type.String() })),
  nickname: Type.Optional(Type.String({ maxLength: 100 })),
  tags: Type.Optional(Tags),
});

interface Deps {
  store: Store;
  actions: ActionEngine;
  probe: NodeProbe;
  clusters: NodeClusters;
  attachedEngines: AttachedEngines;
  /** Non-admins may attach engines only when this is set. */
  allowUserEngines: boolean;
  /**
   * Live containers on each of the nodes (one query for a page); `namespaces` gets the namespace of
   * every container counted.
   */
  containersOnNodes(nodeUuids: string[], namespaces?: Set<string>): Promise<Map<string, number>>;
  /** GET answers, kept while the change feed has not moved in their namespaces. */
  answers: AnswerCache;
}

export function nodeRoutes(untyped: FastifyInstance, deps: Deps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { store, actions, probe, clusters, attachedEngines, answers } = deps;
  const tags = ["node clusters and nodes"];

  const clusterOf = async (req: FastifyRequest, uuid: string): Promise<ClusterRow> =>
    ownObject(req, await store.nodes.findCluster(uuid), "node cluster", clusterUri);
  const nodeOf = async (req: FastifyRequest, uuid: string): Promise<NodeRow> =>
    ownObject(req, await store.nodes.findNode(uuid), "node", nodeUri);
  const answer = answers.forRequest.bind(answers);
  // A page of clusters or nodes reads their nodes or container counts in one query. `read` gets
  // the namespace of every row read (cached answers check them: api/answer-cache.ts).
  const showClusters = async (cs: ClusterRow[], read?: Set<string>) => {
    const byCluster = new Map<string, NodeRow[]>();
    for (const n of await store.nodes.liveNodesOfClusters(cs.map((c) => c.uuid))) {
      addTo(byCluster, n.cluster_uuid!, n);
      read?.add(n.namespace);
    }
    return cs.map((c) => clusterView(c, byCluster.get(c.uuid) ?? []));
  };
  const showCluster = async (c: ClusterRow, read?: Set<string>) => (await showClusters([c], read))[0]!;
  const showNodes = async (ns: NodeRow[], read?: Set<string>) => {
    const counts = await deps.containersOnNodes(
      ns.map((n) => n.uuid),
      read,
    );
    return ns.map((n) => withNodeAliases(nodeView(n, { currentNumContainers: counts.get(n.uuid) ?? 0 })));
  };
  const showNode = async (n: NodeRow, read?: Set<string>) => (await showNodes([n], read))[0]!;

  const enqueue = (req: FastifyRequest, kind: string, params: unknown, namespace: string, object: string) =>
    enqueueOperation(req, { store, actions }, { kind, params, namespace, object });

  // ---- node clusters --------------------------------------------------------------------------

  for (const url of nsPaths("/api/infra/v1/{ns}nodecluster/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          params: NsParams,
          summary: "List node clusters (current and recently terminated)",
          querystring: Type.Object({
            ...PAGE_QUERY,
            ...SEARCH_QUERY,
            uuid: Type.Optional(Type.String()),
            uuid__startswith: Type.Optional(Type.String()),
            state: StateFilter(CLUSTER_STATES, "node clusters"),
            state__not: StateNotFilter(CLUSTER_STATES, "node clusters"),
            name: Type.Optional(Type.String()),
            region: Type.Optional(Type.String()),
            node_type: Type.Optional(Type.String()),
            failing: Type.Optional(
              Type.Boolean({
                description: "only clusters that fail (a node unreachable, or partly deployed)",
              }),
            ),
          }),
          response: { 200: listSchema(NodeClusterView) },
        },
      },
      async (req) =>
        answer(req, req.url, async (read) => {
          const ns = namespaceOf(req);
          const q = req.query;
          const page = pageOf(q);
          const { rows, total } = await store.nodes.listClusters({
            namespace: ns,
            uuid: q.uuid,
            uuidPrefix: q.uuid__startswith,
            state: q.state,
            stateNot: q.state__not,
            nameContains: q.name__icontains,
            orderBy: q.order_by,
            name: q.name,
            region: q.region ? canonicalUri(q.region) : undefined,
            nodeType: q.node_type ? canonicalUri(q.node_type) : undefined,
            failing: q.failing,
            ...page,
          });
          return envelope(req, page, total, await showClusters(rows, read));
        }),
    );
    app.post(
      url,
      {
        config: { action: "Node Cluster Create", access: "namespace" },
        schema: {
          tags,
          summary: "Create a node cluster (not deployed yet)",
          params: NsParams,
          body: NodeClusterCreateBody,
          response: { 201: NodeClusterView },
        },
      },
      async (req, reply) => {
        const ns = namespaceOf(req);
        const c = await clusters.create(ns, req.body);
        req.audit.object = clusterUri(c);
        return reply.status(201).send(await answerOfWritten(() => showCluster(c)));
      },
    );
  }

  for (const url of nsPaths("/api/infra/v1/{ns}nodecluster/:uuid/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary: "Get a node cluster",
          params: UuidParams,
          response: { 200: NodeClusterView },
        },
      },
      async (req) =>
        answer(req, `nodecluster ${req.params.uuid}`, async (read) =>
          showCluster(await clusterOf(req, req.params.uuid), read),
        ),
    );
    app.patch(
      url,
      {
        config: { action: "Node Cluster Update", access: "namespace" },
        schema: {
          tags,
          summary: "Scale (target_num_nodes) and/or replace the tags of a cluster and its nodes",
          params: UuidParams,
          body: ClusterPatch,
          response: { 200: NodeClusterView, 202: NodeClusterView },
        },
      },
      async (req, reply) => {
        const c = await clusterOf(req, req.params.uuid);
        const body = req.body;
        if (body.tags !== undefined) {
          const names = JSON.stringify(tagNames(body.tags));
          await store.mutate("nodecluster", c.uuid, () => ({ tags: names }));
          for (const n of await store.nodes.nodesOfCluster(c.uuid)) {
            if (n.state !== "Terminated") await store.mutate("node", n.uuid, () => ({ tags: names }));
          }
        }
        const current = (await store.nodes.findCluster(c.uuid))!;
        if (body.target_num_nodes !== undefined && body.target_num_nodes !== current.target_num_nodes) {
          if (body.target_num_nodes > current.target_num_nodes) await clusters.checkGrowth(current);
          if (current.state === "Init") {
            const r = await store.mutate(
              "nodecluster",
              c.uuid,
              () => ({ target_num_nodes: body.target_num_nodes }),
              {
                // More nodes asked for: counted after the write, in its transaction (quota nodes).
                after: (tx, before, written) =>
                  tx.quotas.enforce(
                    c.namespace,
                    "nodes",
                    written.target_num_nodes - before.target_num_nodes,
                    {
                      now: Date.now(),
                      written: true,
                    },
                  ),
              },
            );
            return showCluster(r!);
          }
          await enqueue(
            req,
            "nodecluster.scale",
            { cluster: c.uuid, target: body.target_num_nodes },
            c.namespace,
            clusterUri(c),
          );
          return reply
            .status(202)
            .send(await answerOfWritten(async () => showCluster((await store.nodes.findCluster(c.uuid))!)));
        }
        return showCluster((await store.nodes.findCluster(c.uuid))!);
      },
    );
    app.delete(
      url,
      {
        config: { action: "Node Cluster Terminate", access: "namespace" },
        schema: {
          tags,
          summary: "Terminate all nodes and the cluster",
          params: UuidParams,
          response: { 202: NodeClusterView },
        },
      },
      async (req, reply) => {
        const c = await clusterOf(req, req.params.uuid);
        await enqueue(req, "nodecluster.terminate", { cluster: c.uuid }, c.namespace, clusterUri(c));
        return reply
          .status(202)
          .send(await answerOfWritten(async () => showCluster((await store.nodes.findCluster(c.uuid))!)));
      },
    );
  }

  for (const url of nsPaths("/api/infra/v1/{ns}nodecluster/:uuid/deploy/")) {
    app.post(
      url,
      {
        config: { action: "Node Cluster Deploy", access: "namespace" },
        schema: {
          tags,
          summary: "Deploy a newly created cluster",
          params: UuidParams,
          response: { 202: NodeClusterView },
        },
      },
      async (req, reply) => {
        const c = await clusterOf(req, req.params.uuid);
        await clusters.checkGrowth(c);
        await enqueue(req, "nodecluster.deploy", { cluster: c.uuid }, c.namespace, clusterUri(c));
        return reply
          .status(202)
          .send(await answerOfWritten(async () => showCluster((await store.nodes.findCluster(c.uuid))!)));
      },
    );
  }

  // ---- nodes ------------------------------------------------------------------------------------

  for (const url of nsPaths("/api/infra/v1/{ns}node/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          params: NsParams,
          summary: "List nodes (current and recently terminated)",
          querystring: Type.Object({
            ...PAGE_QUERY,
            ...SEARCH_QUERY,
            uuid: Type.Optional(Type.String()),
            uuid__startswith: Type.Optional(Type.String()),
            state: StateFilter(NODE_STATES, "nodes"),
            state__not: StateNotFilter(NODE_STATES, "nodes"),
            node_cluster: Type.Optional(Type.String()),
            node_type: Type.Optional(Type.String()),
            region: Type.Optional(Type.String()),
            engine_version: Type.Optional(Type.String()),
            failing: Type.Optional(Type.Boolean({ description: "only nodes that fail (unreachable)" })),
          }),
          response: { 200: listSchema(NodeView) },
        },
      },
      async (req) =>
        answer(req, req.url, async (read) => {
          const ns = namespaceOf(req);
          const q = req.query;
          const page = pageOf(q);
          const { rows, total } = await store.nodes.listNodes({
            namespace: ns,
            uuid: q.uuid,
            uuidPrefix: q.uuid__startswith,
            state: q.state,
            stateNot: q.state__not,
            nameContains: q.name__icontains,
            orderBy: q.order_by,
            cluster: q.node_cluster ? lastSegment(q.node_cluster) : undefined,
            nodeType: q.node_type ? canonicalUri(q.node_type) : undefined,
            region: q.region ? canonicalUri(q.region) : undefined,
            engineVersion: q.engine_version,
            failing: q.failing,
            ...page,
          });
          return envelope(req, page, total, await showNodes(rows, read));
        }),
    );
    app.post(
      url,
      {
        config: {
          action: "Node Attach",
          access: deps.allowUserEngines
            ? "namespace"
            : {
                namespace: true,
                admin:
                  "Only administrators can attach engines: it makes Berth connect to an address you name.",
              },
        },
        schema: {
          tags,
          summary: "Attach an existing Docker engine as a node (admins)",
          params: NsParams,
          body: NodeAttach,
          response: { 201: NodeView },
        },
      },
      async (req, reply) => {
        const n = await attachedEngines.attach(namespaceOf(req), req.body);
        req.audit.object = nodeUri(n);
        return reply.status(201).send(await answerOfWritten(() => showNode(n)));
      },
    );
  }

  for (const url of nsPaths("/api/infra/v1/{ns}node/:uuid/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: { tags, summary: "Get a node", params: UuidParams, response: { 200: NodeView } },
      },
      async (req) =>
        answer(req, `node ${req.params.uuid}`, async (read) =>
          showNode(await nodeOf(req, req.params.uuid), read),
        ),
    );
    app.patch(
      url,
      {
        config: { action: "Node Update", access: "namespace" },
        schema: {
          tags,
          summary: "Rename a node and/or replace its tags",
          params: UuidParams,
          body: NodePatch,
          response: { 200: NodeView },
        },
      },
      async (req) => {
        const n = await nodeOf(req, req.params.uuid);
        const body = req.body;
        const patch: NodeRecordPatch = {};
        if (body.nickname !== undefined) patch.nickname = body.nickname || n.external_fqdn;
        if (body.tags !== undefined) patch.tags = JSON.stringify(tagNames(body.tags));
        const r = await store.mutate("node", n.uuid, () => (Object.keys(patch).length ? patch : undefined));
        return showNode(r!);
      },
    );
    app.delete(
      url,
      {
        config: { action: "Node Terminate", access: "namespace" },
        schema: { tags, summary: "Terminate a node", params: UuidParams, response: { 202: NodeView } },
      },
      async (req, reply) => {
        const n = await nodeOf(req, req.params.uuid);
        await enqueue(req, "node.terminate", { node: n.uuid }, n.namespace, nodeUri(n));
        return reply
          .status(202)
          .send(await answerOfWritten(async () => showNode((await store.nodes.findNode(n.uuid))!)));
      },
    );
  }

  for (const op of ["engine-upgrade", ...ENGINE_UPGRADE_ALIASES]) {
    for (const url of nsPaths(`/api/infra/v1/{ns}node/:uuid/${op}/`)) {
      app.post(
        url,
        {
          config: { action: "Node Engine Upgrade", access: "namespace" },
          schema: {
            ...(op === "engine-upgrade" ? {} : { hide: true }),
            tags,
            summary: "Upgrade (restart) the node's engine",
            params: UuidParams,
            response: { 202: NodeView },
          },
        },
        async (req, reply) => {
          const n = await nodeOf(req, req.params.uuid);
          await enqueue(req, "node.engine-upgrade", { node: n.uuid }, n.namespace, nodeUri(n));
          return reply
            .status(202)
            .send(await answerOfWritten(async () => showNode((await store.nodes.findNode(n.uuid))!)));
        },
      );
    }
  }

  for (const url of nsPaths("/api/infra/v1/{ns}node/:uuid/health-check/")) {
    app.post(
      url,
      {
        config: { action: "Node Health Check", access: "namespace" },
        schema: {
          tags,
          summary: "Test connectivity: Deployed or Unreachable",
          params: UuidParams,
          response: { 200: NodeView },
        },
      },
      async (req) => {
        const n = await nodeOf(req, req.params.uuid);
        assertAllowed(NODE_OPERATIONS, `node ${n.nickname || n.uuid}`, n.state as NodeState, "health-check");
        const r = await probe.probe(n.uuid, { immediate: true });
        const failure = probe.lastFailure(n.uuid);
        if (failure) req.audit.note = `The node's engine did not answer: ${failure}`;
        return showNode(r ?? n);
      },
    );
  }
}
