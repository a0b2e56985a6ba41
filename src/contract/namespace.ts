// TypeBox schemas of a namespace's settings (Berth extension next to organizations, CONTRACT §3):
// `GET /api/v1.1/namespaces/<ns>/` and `PATCH` with `{privileges: {...}}` (administrators). The
// answer is an open object, so further settings (limits and usage) join it as fields of their own.
import { type Static, Type } from "typebox";
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

export const NamespacePatchBody = Type.Object(
  { privileges: Type.Optional(PrivilegesPatch) },
  { additionalProperties: false, description: "settings to change (administrators)" },
);
export type NamespacePatch = Static<typeof NamespacePatchBody>;

export const namespaceUri = (name: string): string => `/api/v1.1/namespaces/${name}/`;
