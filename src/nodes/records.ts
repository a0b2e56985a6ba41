// New node records and the tag lists as stored on nodes and clusters. Their writes, each with its
// change-feed entry, are the store's (`Store.mutate`, `NodeStore.insertNode`/`updateNode`).
import { invalidField } from "../domain/errors.ts";
import type { NewNode } from "../store/nodes.ts";

/** The distinct, trimmed tag names of a request's `tags` (objects with a name, or strings). */
export function tagNames(tags: ({ name: string } | string)[] | undefined, field = "tags"): string[] {
  const names = (tags ?? []).map((t, i) => {
    const name = typeof t === "string" ? t : t?.name;
    if (typeof name !== "string" || name.trim() === "")
      throw invalidField(`${field}[${i}].name`, "must be a non-empty string");
    return name.trim();
  });
  return [...new Set(names)];
}

/** The name a node is known by before it has a nickname of its own. */
export const nodeFqdn = (uuid: string, namespace: string) =>
  `${uuid.slice(0, 8)}.${namespace}.node.berth.internal`;

/**
 * A new node row: no engine facts, no lifecycle times, no tags and the FQDN as nickname until
 * `fields` say otherwise (clusters' nodes, attached engines and agent nodes all start here).
 * `phase` is "deploying" for a node still being brought up, null for one whose engine answered.
 */
export function newNodeRow(
  fields: Pick<
    NewNode,
    "uuid" | "namespace" | "cluster_uuid" | "provider" | "region" | "node_type" | "phase" | "created"
  > &
    Partial<NewNode>,
): NewNode {
  const fqdn = nodeFqdn(fields.uuid, fields.namespace);
  return {
    availability_zone: null,
    external_fqdn: fqdn,
    nickname: fqdn,
    engine_url: "",
    engine_tls: null,
    engine_id: "",
    engine_execdriver: "",
    engine_graphdriver: "",
    engine_version: "",
    cpu: 0,
    memory: 0,
    disk: 0,
    public_ip: "",
    tunnel: null,
    private_subnet: "",
    slot: 0,
    last_seen: null,
    unreachable_since: null,
    deployed_at: null,
    destroyed_at: null,
    observed: "reachable",
    tags: "[]",
    ...fields,
  };
}
