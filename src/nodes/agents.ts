// Bring your own node with the Berth agent (issue 15): single-use registration tokens, node
// registration in the token's namespace, per-node keys, node states that follow the agent's
// tunnel, and the provisioner that terminates an agent node (the agent cleans its host and exits).
import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import type { ActionEngine } from "../actions/engine.ts";
import type { CallMeta } from "../actions/types.ts";
import { ApiError, conflict, unauthorized } from "../domain/errors.ts";
import type { Clock } from "../domain/time.ts";
import { nsUri } from "../domain/uri.ts";
import type { AgentMessage, TunnelHub } from "../drivers/tunnel/hub.ts";
import { creatorMayUse } from "../identity/creators.ts";
import type { RegistrationTokenRow } from "../store/agents.ts";
import type { NodeRow } from "../store/nodes.ts";
import type { Store } from "../store/store.ts";
import type { NodeProbe } from "./probe.ts";
import type { ProvisionContext, Provisioned, Provisioner } from "./provisioners.ts";
import { newNodeRow, nodeFqdn, tagNames } from "./records.ts";
import { nodeUri } from "./views.ts";

/** Engine URL of a node reached through its agent's tunnel. */
export const TUNNEL_SCHEME = "tunnel://";
export const isAgentNode = (n: Pick<NodeRow, "engine_url">) => n.engine_url.startsWith(TUNNEL_SCHEME);

/** What the agent reports about its host when it registers (untrusted; checked by the route schema). */
export interface EngineFacts {
  id: string;
  name: string;
  cpus: number;
  memory_mb: number;
  disk_gb?: number;
  version: string;
  storage_driver: string;
  exec_driver?: string;
}

export interface AgentNodesOptions {
  store: Store;
  clock: Clock;
  actions: ActionEngine;
  probe: NodeProbe;
  hub: TunnelHub;
  publicUrl: string;
  tokenTtlS: number;
  /** A tunnel that stays down this long makes its node Unreachable (within the health grace). */
  reconnectGraceMs: number;
  /** How long terminate waits for the agent to report that it cleaned its host. */
  terminateWaitMs?: number;
  onError?(err: unknown): void;
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
const secret = () => randomBytes(30).toString("base64url");

export const tokenUri = (t: Pick<RegistrationTokenRow, "namespace" | "uuid">) =>
  nsUri("infra", t.namespace, "token", t.uuid);

export class AgentNodes {
  private readonly dropTimers = new Map<string, NodeJS.Timeout>();
  private readonly terminations = new Map<string, (m: AgentMessage) => void>();

  constructor(private readonly o: AgentNodesOptions) {
    // The hub tells the node records what happens to tunnels; it never needs to know who listens.
    o.hub.listen({
      changed: (uuid, connected) => this.tunnelChanged(uuid, connected),
      said: (uuid, message) => this.agentSaid(uuid, message),
    });
  }

  /** The command a user runs on the server (the token is part of it, so it is shown once too). */
  command(token: string): string {
    const url = this.o.publicUrl;
    return `curl -fsSL ${url}/api/agent/v1/berth-agent.mjs -o berth-agent.mjs && sudo node berth-agent.mjs --url ${url} --token ${token} --install-systemd`;
  }

  tunnelUrl(nodeUuid: string): string {
    return `${this.o.publicUrl.replace(/^http/, "ws")}/api/agent/v1/node/${nodeUuid}/tunnel/`;
  }

  // ---- registration tokens -----------------------------------------------------------------------

  async createToken(
    namespace: string,
    createdBy: { id: number; username: string },
  ): Promise<{ row: RegistrationTokenRow; token: string }> {
    // Never starting with "-": a base64url secret does one time in 64, and `--token -x…` is then
    // taken for an option by the agent's parser (the command printed would fail). The prefix also
    // lets secret scanners recognize a leaked token.
    const token = `brt_${secret()}`;
    const now = this.o.clock.now();
    const row = await this.o.store.transaction(async (tx) => {
      await tx.quotas.enforce(namespace, "tokens", 1, { now });
      return tx.agents.insertToken({
        uuid: randomUUID(),
        namespace,
        token_hash: sha256(token),
        created_by: createdBy.username,
        creator_id: createdBy.id,
        created: now,
        expires: now + this.o.tokenTtlS * 1000,
        used_at: null,
        node_uuid: null,
      });
    });
    return { row, token };
  }

  listTokens(namespace: string, page: { limit: number; offset: number }) {
    return this.o.store.agents.listUsableTokens(namespace, this.o.clock.now(), page);
  }

  /** A token of the namespace that can still be used (revoking a used one makes no sense). */
  async findUsableToken(namespace: string, uuid: string): Promise<RegistrationTokenRow | undefined> {
    const t = await this.o.store.agents.findToken(uuid);
    if (!t || t.namespace !== namespace || t.used_at !== null || t.expires <= this.o.clock.now())
      return undefined;
    return t;
  }

  revokeToken(t: RegistrationTokenRow): Promise<void> {
    return this.o.store.agents.deleteToken(t.uuid);
  }

  // ---- registration ------------------------------------------------------------------------------

  /**
   * Registers the agent's host as a node of the token's namespace with the facts it reported. The
   * node is Deploying until Berth reaches the engine through the agent's tunnel (then Deployed,
   * with what the engine itself says), or Unreachable if no tunnel comes within the grace.
   * The token is used up; the node key is returned once and only its hash is kept.
   */
  async register(input: {
    token: string;
    facts: EngineFacts;
    nickname?: string;
    tags?: string[];
    meta: Omit<CallMeta, "user">;
  }): Promise<{ node: NodeRow; key: string }> {
    const found = await this.o.store.agents.findTokenByHash(sha256(input.token));
    // A token whose creator no longer may use its namespace (removed from the organization, or
    // deactivated) is as dead as a revoked one: the node never joins.
    const t =
      found && (await creatorMayUse(this.o.store, found.creator_id, found.namespace)) ? found : undefined;
    const now = this.o.clock.now();
    if (!t)
      throw unauthorized(
        "That registration token is not valid (or was revoked); create one with POST /api/infra/v1/token/.",
      );
    if (t.used_at !== null)
      throw new ApiError(
        "forbidden",
        "token_used",
        "That registration token was already used: each token registers one node. Create a new one with POST /api/infra/v1/token/.",
      );
    if (t.expires <= now)
      throw new ApiError(
        "forbidden",
        "token_expired",
        "That registration token has expired. Create a new one with POST /api/infra/v1/token/.",
      );
    const live = await this.o.store.nodes.liveNodes({ namespace: t.namespace });
    const same = live.find((n) => n.engine_id !== "" && n.engine_id === input.facts.id);
    if (same)
      throw conflict(
        `This engine is already node ${same.uuid}; restart its agent with the identity file it keeps, or terminate that node first.`,
        "engine_already_registered",
      );
    const uuid = randomUUID();
    const key = secret();
    const tags = tagNames(input.tags);
    const node = await this.o.store.transaction(async (tx) => {
      await tx.quotas.enforce(t.namespace, "nodes", 1, { now });
      if (!(await tx.agents.claimToken(t.id, now, uuid)))
        throw new ApiError(
          "forbidden",
          "token_used",
          "That registration token was just used by another registration.",
        );
      const n = await tx.nodes.insertNode(
        newNodeRow({
          uuid,
          namespace: t.namespace,
          cluster_uuid: null,
          provider: "byon",
          region: "/api/infra/v1/region/byon/byon/",
          node_type: "/api/infra/v1/nodetype/byon/byon/",
          phase: "deploying",
          nickname: input.nickname || input.facts.name || nodeFqdn(uuid, t.namespace),
          engine_url: `${TUNNEL_SCHEME}${uuid}`,
          engine_id: input.facts.id,
          engine_execdriver: input.facts.exec_driver || "native",
          engine_graphdriver: input.facts.storage_driver,
          engine_version: input.facts.version,
          cpu: input.facts.cpus,
          memory: input.facts.memory_mb,
          disk: Math.round(input.facts.disk_gb ?? 0),
          public_ip: input.meta.ip,
          tunnel: this.tunnelUrl(uuid),
          tags: JSON.stringify(tags),
          created: now,
        }),
      );
      await tx.agents.insertKey({
        node_uuid: uuid,
        namespace: t.namespace,
        key_hash: sha256(key),
        created: now,
        revoked_at: null,
      });
      return n;
    });
    await this.o.actions.recordSync({
      uuid: randomUUID(),
      namespace: t.namespace,
      object: nodeUri(node),
      name: "Node Register",
      meta: { ...input.meta, user: t.created_by },
      state: "Success",
      logLine: `Node ${uuid} registered by the Berth agent on ${input.facts.name || "its host"} (engine ${input.facts.version})`,
    });
    return { node, key };
  }

  /**
   * The node a tunnel connection speaks for. 401 for a wrong or revoked key; 403 `node_terminated`
   * once the node is terminated (the agent then cleans its host and exits).
   */
  async authenticate(nodeUuid: string, key: string | undefined): Promise<NodeRow> {
    const row = key ? await this.o.store.agents.findKey(nodeUuid) : undefined;
    const ok =
      row !== undefined &&
      key !== undefined &&
      timingSafeEqual(Buffer.from(row.key_hash, "hex"), Buffer.from(sha256(key), "hex"));
    if (!ok || !row) throw unauthorized("Unknown node or wrong node key.");
    const node = await this.o.store.nodes.findNode(nodeUuid);
    if (!node || node.state === "Terminated" || node.state === "Terminating")
      throw new ApiError(
        "forbidden",
        "node_terminated",
        "This node was terminated in Berth: remove Berth's containers from the engine and stop the agent.",
      );
    if (row.revoked_at !== null) throw unauthorized("This node's key was revoked.");
    return node;
  }

  // ---- tunnel up and down ------------------------------------------------------------------------

  /** Called by the tunnel hub when a node's tunnel comes up or goes down. */
  tunnelChanged(nodeUuid: string, connected: boolean): void {
    clearTimeout(this.dropTimers.get(nodeUuid));
    this.dropTimers.delete(nodeUuid);
    if (connected) {
      const session = this.o.hub.session(nodeUuid);
      void this.o.store
        .mutate("node", nodeUuid, (n) =>
          session && (n.public_ip !== session.remoteAddress || n.tunnel !== this.tunnelUrl(nodeUuid))
            ? { public_ip: session.remoteAddress, tunnel: this.tunnelUrl(nodeUuid) }
            : undefined,
        )
        .then(() => this.o.probe.probe(nodeUuid, { immediate: true }))
        .catch((err) => this.o.onError?.(err));
      return;
    }
    // A short wait, so that an agent that reconnects at once does not flap the node's state.
    const timer = setTimeout(() => {
      this.dropTimers.delete(nodeUuid);
      if (this.o.hub.isConnected(nodeUuid)) return;
      void this.o.probe.probe(nodeUuid, { immediate: true }).catch((err) => this.o.onError?.(err));
    }, this.o.reconnectGraceMs);
    timer.unref();
    this.dropTimers.set(nodeUuid, timer);
  }

  /** Called by the tunnel hub with each control message of an agent. */
  agentSaid(nodeUuid: string, message: AgentMessage): void {
    if (message.type === "terminated") this.terminations.get(nodeUuid)?.(message);
  }

  stop(): void {
    for (const t of this.dropTimers.values()) clearTimeout(t);
    this.dropTimers.clear();
  }

  // ---- terminate ----------------------------------------------------------------------------------

  /** Revokes the node's key and asks a connected agent to remove Berth's containers and exit. */
  async terminate(ctx: ProvisionContext): Promise<void> {
    const uuid = ctx.node.uuid;
    await this.o.store.agents.revokeKey(uuid, this.o.clock.now());
    const session = this.o.hub.session(uuid);
    if (!session) {
      await ctx.log(
        "The agent is not connected: its key no longer opens a tunnel, and when it next connects it is told to remove Berth's containers and exit",
      );
      return;
    }
    await ctx.log("Asking the agent to remove Berth's containers from its engine and exit");
    const waitMs = this.o.terminateWaitMs ?? 60_000;
    const answer = await new Promise<AgentMessage | undefined>((resolve) => {
      const timer = setTimeout(() => finish(undefined), waitMs);
      const closed = () => finish(undefined);
      const finish = (m: AgentMessage | undefined) => {
        clearTimeout(timer);
        this.terminations.delete(uuid);
        ctx.signal.removeEventListener("abort", closed);
        resolve(m);
      };
      this.terminations.set(uuid, finish);
      ctx.signal.addEventListener("abort", closed, { once: true });
      session.send({ type: "terminate" });
    });
    if (answer) {
      await ctx.log(`The agent removed ${answer.removed} container(s) and exits`);
      for (const e of answer.errors) await ctx.log(`The agent reported: ${e}`);
    } else {
      await ctx.log(
        "The agent did not confirm within the wait; it removes Berth's containers when it next connects",
      );
    }
    session.close("node terminated");
  }
}

/**
 * The `byon` provider's nodes: engines attached by address (Berth leaves them alone at terminate)
 * and agent nodes (the agent removes Berth's containers and exits).
 */
export class ByonProvisioner implements Provisioner {
  constructor(
    private readonly attached: Provisioner,
    private readonly agents: AgentNodes,
  ) {}

  availability() {
    return { available: true };
  }

  deployNode(ctx: ProvisionContext): Promise<Provisioned> {
    return this.attached.deployNode(ctx);
  }

  terminateNode(ctx: ProvisionContext): Promise<void> {
    return isAgentNode(ctx.node) ? this.agents.terminate(ctx) : this.attached.terminateNode(ctx);
  }

  restartEngine(ctx: ProvisionContext): Promise<void> {
    return this.attached.restartEngine(ctx);
  }
}
