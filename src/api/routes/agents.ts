// The Berth agent's own endpoints (issue 15), outside the platform API: registration with a token,
// and the reverse tunnel through which Berth drives the node's engine. Neither takes user
// credentials: the token, then the node key, are the credentials, checked before any upgrade.
import { createReadStream } from "node:fs";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Type } from "typebox";
import type { WebSocket } from "ws";
import { ErrorView } from "../../contract/common.ts";
import { RegisteredNodeView } from "../../contract/nodes.ts";
import type { AgentNodes } from "../../nodes/agents.ts";
import { nodeView } from "../../nodes/views.ts";
import type { NodeRow } from "../../store/nodes.ts";

/** Where an accepted tunnel goes: the tunnel hub of src/drivers/tunnel (the API holds no driver). */
export interface TunnelAcceptor {
  attach(nodeUuid: string, ws: WebSocket, remoteAddress: string, now: number, features: string[]): unknown;
}

interface Deps {
  agents: AgentNodes;
  hub: TunnelAcceptor;
  clock: { now(): number };
  /** The agent as one file that needs only Node (src/agent/bundle.ts). */
  bundle: { file(): Promise<string> };
}

export const AGENT_REGISTER_PATH = "/api/agent/v1/register/";
export const AGENT_TUNNEL_PATH = "/api/agent/v1/node/:uuid/tunnel/";
export const AGENT_DOWNLOAD_PATH = "/api/agent/v1/berth-agent.mjs";

const Text = (maxLength: number) => Type.String({ maxLength });

const RegisterBody = Type.Object({
  token: Type.String({ minLength: 1, maxLength: 200 }),
  engine: Type.Object({
    id: Type.String({ minLength: 1, maxLength: 200 }),
    name: Text(253),
    cpus: Type.Integer({ minimum: 1, maximum: 4096 }),
    memory_mb: Type.Integer({ minimum: 1, maximum: 64 * 1024 * 1024 }),
    disk_gb: Type.Optional(Type.Number({ minimum: 0, maximum: 1024 * 1024 })),
    version: Text(64),
    storage_driver: Text(64),
    exec_driver: Type.Optional(Text(64)),
  }),
  nickname: Type.Optional(Text(100)),
  tags: Type.Optional(Type.Array(Text(100), { maxItems: 50 })),
  agent_version: Type.Optional(Text(64)),
});

/** A file sent as it is (a stream): never serialized. */
const FileBody = Type.Unsafe<NodeJS.ReadableStream>({ type: "string", description: "text/javascript" });

const TunnelParams = Type.Object({ uuid: Type.String({ format: "uuid" }) });

/** `Authorization: Bearer <node key>`. */
function bearer(req: FastifyRequest): string | undefined {
  const m = /^Bearer\s+(\S{1,200})\s*$/i.exec(req.headers.authorization ?? "");
  return m?.[1];
}

export function agentRoutes(untyped: FastifyInstance, deps: Deps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { agents, hub } = deps;
  const tags = ["berth agent"];

  app.post(
    AGENT_REGISTER_PATH,
    {
      config: { access: "public" },
      schema: {
        tags,
        summary:
          "Register the agent's host as a node of the token's namespace; answers the node's identity and its node key, once",
        body: RegisterBody,
        security: [],
        response: { 201: RegisteredNodeView },
      },
    },
    async (req, reply) => {
      const body = req.body;
      const { node, key } = await agents.register({
        token: body.token,
        facts: body.engine,
        nickname: body.nickname,
        tags: body.tags,
        meta: {
          method: req.method,
          path: AGENT_REGISTER_PATH,
          userAgent: `${req.headers["user-agent"] ?? ""}`.slice(0, 200),
          ip: req.ip,
        },
      });
      return reply.status(201).send({
        ...nodeView(node, { currentNumContainers: 0 }),
        namespace: node.namespace,
        node_key: key,
      });
    },
  );

  app.get(
    AGENT_DOWNLOAD_PATH,
    {
      config: { access: "public" },
      schema: {
        tags,
        summary:
          "The Berth agent as one file for Node 20 (no other install needed); run it on the server with --url and --token",
        security: [],
        response: { 200: FileBody },
      },
    },
    async (_req, reply) => {
      const file = await deps.bundle.file();
      return reply
        .header("content-type", "text/javascript; charset=utf-8")
        .header("content-disposition", 'attachment; filename="berth-agent.mjs"')
        .send(createReadStream(file));
    },
  );

  const nodes = new WeakMap<FastifyRequest, NodeRow>();
  app.route({
    method: "GET",
    url: AGENT_TUNNEL_PATH,
    config: { access: "public", websocket: true },
    schema: {
      tags,
      summary:
        "The agent's reverse tunnel (WebSocket, Authorization: Bearer <node key>): Berth opens streams to the node's engine through it",
      params: TunnelParams,
      security: [],
      response: { 426: ErrorView },
    },
    preHandler: async (req) => {
      nodes.set(req, await agents.authenticate(req.params.uuid, bearer(req)));
    },
    handler: async (req, reply) =>
      reply
        .status(426)
        .header("Upgrade", "websocket")
        .send({ error: `${req.url} is the agent's WebSocket tunnel.`, code: "websocket_required" }),
    wsHandler: (ws, req) => {
      const node = nodes.get(req);
      nodes.delete(req);
      if (!node) {
        ws.close(1011, "not authenticated");
        return;
      }
      // What the agent offers besides its engine (`router`, agents of version 2); older agents say nothing.
      const offered = `${req.headers["x-berth-agent-features"] ?? ""}`.slice(0, 200);
      const features = offered
        .split(",")
        .map((f) => f.trim())
        .filter(Boolean);
      hub.attach(node.uuid, ws, req.ip, deps.clock.now(), features);
    },
  });
}
