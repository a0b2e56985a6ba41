// Attaching an existing Docker engine by its address as a node of the `byon` provider ("bring
// your own node" without the agent): the engine must answer and must not be attached already; its
// TLS material is sealed at rest. Terminating such a node leaves the engine alone
// (provisioners.ts `AttachedProvisioner`); agent nodes are registered in agents.ts instead.
import { randomUUID } from "node:crypto";
import { isIP } from "node:net";
import os from "node:os";
import { conflict, invalidField } from "../domain/errors.ts";
import type { Clock } from "../domain/time.ts";
import type { EngineInfo } from "../drivers/engine.ts";
import type { NamespacePolicies } from "../identity/privileges.ts";
import type { NodeRow } from "../store/nodes.ts";
import type { Store } from "../store/store.ts";
import { engineFields, type NodeProbe } from "./probe.ts";
import { newNodeRow, nodeFqdn, tagNames } from "./records.ts";

export interface AttachInput {
  engine_url: string;
  tls?: { ca: string; cert: string; key: string };
  nickname?: string;
  tags?: ({ name: string } | string)[];
}

export interface AttachedEnginesOptions {
  store: Store;
  /** An engine on the Berth host itself is a local node: only namespaces allowed `local_nodes` get one. */
  policies: NamespacePolicies;
  probe: NodeProbe;
  clock: Clock;
  /** Seals secrets at rest (the TLS key of an attached engine). */
  sealSecret?: (plain: string) => string;
}

export class AttachedEngines {
  constructor(private readonly o: AttachedEnginesOptions) {}

  /** Attaches the engine at `engine_url` as a Deployed node of `namespace`. */
  async attach(namespace: string, input: AttachInput): Promise<NodeRow> {
    if (!/^(unix:\/\/\/|tcp:\/\/)/.test(input.engine_url)) {
      throw invalidField("engine_url", "must be unix:///path/to/docker.sock or tcp://host:port");
    }
    if (onBerthHost(input.engine_url)) await this.o.policies.checkLocalNodes(namespace, "engine_url");
    const tags = tagNames(input.tags);
    const tlsJson = input.tls ? (this.o.sealSecret ?? ((x: string) => x))(JSON.stringify(input.tls)) : null;
    const uuid = randomUUID();
    let info: EngineInfo;
    try {
      info = await this.o.probe.engineInfo({ uuid, engine_url: input.engine_url, engine_tls: tlsJson });
    } catch (err) {
      throw invalidField(
        "engine_url",
        `no Docker engine answered there: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    const existing = (await this.o.store.nodes.liveNodes()).find((n) => n.engine_id === info.id);
    if (existing) throw conflict("That engine is already attached as a node.", "engine_already_attached");
    const now = this.o.clock.now();
    const host = input.engine_url.startsWith("tcp://")
      ? new URL(input.engine_url.replace(/^tcp/, "http")).hostname
      : "127.0.0.1";
    return this.o.store.transaction(async (tx) => {
      const row = newNodeRow({
        uuid,
        namespace,
        cluster_uuid: null,
        provider: "byon",
        region: "/api/infra/v1/region/byon/byon/",
        node_type: "/api/infra/v1/nodetype/byon/byon/",
        phase: null,
        nickname: input.nickname ?? info.name ?? nodeFqdn(uuid, namespace),
        engine_url: input.engine_url,
        engine_tls: tlsJson,
        public_ip: host,
        deployed_at: now,
        tags: JSON.stringify(tags),
        created: now,
        ...engineFields(info, now),
      });
      const n = await tx.nodes.insertNode(row);
      return n;
    });
  }
}

/**
 * Whether an engine address names the Berth host itself: a Unix socket (only a local file), a
 * loopback address, `localhost`, or an address of one of the host's interfaces. Other names are
 * not resolved here; an operator who lets users attach engines (BERTH_ALLOW_USER_ENGINES) trusts
 * the names they give.
 */
export function onBerthHost(engineUrl: string): boolean {
  if (engineUrl.startsWith("unix://")) return true;
  let host: string;
  try {
    host = new URL(engineUrl.replace(/^tcp:/, "http:")).hostname.replace(/^\[|\]$/g, "").toLowerCase();
  } catch {
    return false;
  }
  if (host === "localhost" || host.endsWith(".localhost") || host === "0.0.0.0" || host === "::") return true;
  if (isIP(host) === 4 && host.startsWith("127.")) return true;
  if (host === "::1" || /^::ffff:127\./.test(host) || /^::ffff:7f/.test(host)) return true;
  const own = Object.values(os.networkInterfaces())
    .flat()
    .map((i) => i?.address.toLowerCase());
  return own.includes(host);
}
