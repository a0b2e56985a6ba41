// TypeBox schemas of a namespace's settings (Berth extension next to organizations, CONTRACT §3):
// `GET /api/v1.1/namespaces/<ns>/` and `PATCH` with `{privileges: {...}}` (administrators). The
// answer is an open object, so further settings (limits and usage) join it as fields of their own.
import { type Static, Type } from "typebox";
import { MAX_LIMIT, QUOTA_RESOURCES } from "../domain/quotas.ts";
import { View } from "./common.ts";

const PathList = (description: string) =>
  Type.Array(Type.String({ minLength: 1, maxLength: 1024 }), { maxItems: 100, description });

const Capabilities = Type.Union(
  [Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 64 }), Type.Literal("all")],
  {
    description:
      'capabilities beyond Docker\'s default set that cap_add may name (such as NET_ADMIN), or "all" (cap_add ALL too)',
  },
);

const fields = {
  privileged: Type.Boolean({ description: "privileged: true" }),
  host_network: Type.Boolean({ description: "net: host (the node's network)" }),
  host_pid: Type.Boolean({ description: "pid: host (the node's processes)" }),
  capabilities: Capabilities,
  devices: Type.Boolean({ description: "devices of the node" }),
  security_opt: Type.Boolean({ description: "security_opt (AppArmor, seccomp, SELinux, no-new-privileges)" }),
  cgroup_parent: Type.Boolean({ description: "cgroup_parent" }),
  host_paths: PathList(
    "host paths bindings may mount: each allows itself and what lies under it (/srv allows /srv/data, not /srvx)",
  ),
  local_nodes: Type.Boolean({
    description: "node clusters of provider local and engines attached on the Berth host itself",
  }),
};

/** What the namespace's containers may do that reaches their node (domain/privileges.ts `Privileges`). */
export const PrivilegesView = View(fields, "what the namespace's containers may do that reaches their node");

export const NamespaceView = View({
  name: Type.String(),
  kind: Type.Union([Type.Literal("user"), Type.Literal("org")]),
  resource_uri: Type.String({ description: "/api/v1.1/namespaces/<name>/" }),
  administrator: Type.Boolean({
    description: "the personal namespace of an administrator: allowed everything, whatever is stored",
  }),
  privileges: PrivilegesView,
  limits: Type.Record(Type.String(), Type.Union([Type.Integer(), Type.Null()]), {
    description:
      "limits an administrator set (null: no limit); a quota not named here has its default (docs: domain/quotas.ts)",
  }),
  quotas: Type.Record(
    Type.String(),
    View({
      limit: Type.Union([Type.Integer(), Type.Null()], { description: "null: no limit" }),
      usage: Type.Integer(),
    }),
    {
      description:
        "each counted quota's limit in force and usage: services, containers (target_num_containers of live services), stacks, nodeclusters, nodes, apikeys, tokens, triggers; the limits of streams_per_key, envvars_per_service and env_bytes_per_service (usage 0: counted per key and per service)",
    },
  ),
});
export type NamespaceSettingsView = Static<typeof NamespaceView>;

/** A change of privileges: the keys given replace the stored ones; unknown keys are refused. */
export const PrivilegesPatch = Type.Object(
  {
    privileged: Type.Optional(fields.privileged),
    host_network: Type.Optional(fields.host_network),
    host_pid: Type.Optional(fields.host_pid),
    capabilities: Type.Optional(fields.capabilities),
    devices: Type.Optional(fields.devices),
    security_opt: Type.Optional(fields.security_opt),
    cgroup_parent: Type.Optional(fields.cgroup_parent),
    host_paths: Type.Optional(fields.host_paths),
    local_nodes: Type.Optional(fields.local_nodes),
  },
  { additionalProperties: false },
);

/** Limits to set: a quota's name and a whole number, or null for no limit; the others stay. */
export const LimitsPatch = Type.Object(
  Object.fromEntries(
    QUOTA_RESOURCES.map((r) => [
      r,
      Type.Optional(Type.Union([Type.Integer({ minimum: 0, maximum: MAX_LIMIT }), Type.Null()])),
    ]),
  ),
  { additionalProperties: false, description: "quota limits to set (null: no limit)" },
);

export const NamespacePatchBody = Type.Object(
  { privileges: Type.Optional(PrivilegesPatch), limits: Type.Optional(LimitsPatch) },
  { additionalProperties: false, description: "settings to change (administrators)" },
);
export type NamespacePatch = Static<typeof NamespacePatchBody>;

export const namespaceUri = (name: string): string => `/api/v1.1/namespaces/${name}/`;
