// Rows seeded straight into the store by tests and benchmarks: a Deployed node on a fake engine
// (the engine facts a real one would have reported), built on the platform's own newNodeRow.
// Also a change-feed entry, for tests that only need the feed to move.
import { randomUUID } from "node:crypto";
import { newNodeRow } from "../../src/nodes/records.ts";
import type { NewNode } from "../../src/store/nodes.ts";
import type { ChangeTable } from "../../src/store/schema.ts";

export function fakeEngineNodeRow(namespace: string, now: number, fields: Partial<NewNode> = {}): NewNode {
  const uuid = fields.uuid ?? randomUUID();
  return newNodeRow({
    uuid,
    namespace,
    cluster_uuid: null,
    provider: "aws",
    region: "/api/infra/v1/region/aws/us-east-1/",
    node_type: "/api/infra/v1/nodetype/aws/t2.micro/",
    phase: null,
    created: now,
    engine_url: `fake://${uuid}`,
    engine_id: uuid,
    engine_execdriver: "native",
    engine_graphdriver: "overlay2",
    engine_version: "27.0.0",
    cpu: 1,
    memory: 1024,
    disk: 8,
    public_ip: "10.9.0.1",
    last_seen: now,
    deployed_at: now,
    ...fields,
  });
}

/** A change-feed entry of a service in `namespace` (tests that only need the feed to move). */
export function serviceChangeRow(namespace: string): Omit<ChangeTable, "revision"> {
  return {
    type: "service",
    action: "update",
    resource_uri: `/api/app/v1/${namespace}/service/x/`,
    state: "Running",
    parents: "[]",
    namespace,
    datetime: 1,
  };
}
