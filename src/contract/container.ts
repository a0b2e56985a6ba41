// The answer schema of containers (spec "Container"); the static type `Container` is what the
// dashboard and CLI may share.
import { type Static, Type } from "typebox";
import {
  BindingView,
  CalculatedEnvVarView,
  DefinitionFields,
  EnvVarView,
  Nullable,
  PortView,
  ResourceFields,
  StopFields,
  StringMap,
  Time,
  Uri,
  View,
} from "./common.ts";
import { HealthCheckView, HealthField } from "./health.ts";

export const ContainerLinkView = View({
  name: Type.String(),
  from_container: Uri,
  to_container: Uri,
  endpoints: StringMap,
});

export const ContainerView = View(
  {
    uuid: Type.String(),
    resource_uri: Uri,
    image_name: Type.String(),
    name: Type.String(),
    public_dns: Type.String(),
    state: Type.String(),
    synchronized: Type.Boolean(),
    deployed_datetime: Time,
    started_datetime: Time,
    stopped_datetime: Time,
    destroyed_datetime: Time,
    node: Nullable(Uri),
    service: Nullable(Uri),
    exit_code: Nullable(Type.Integer()),
    exit_code_msg: Nullable(Type.String()),
    exit_code_message: Nullable(Type.String({ description: "the Go SDK's name of exit_code_msg" })),
    private_ip: Type.String(),
    container_ports: Type.Array(
      View({ ...PortView.properties, uri_protocol: Type.String({ description: "scheme of endpoint_uri" }) }),
    ),
    container_envvars: Type.Array(EnvVarView),
    calculated_envvars: Type.Array(CalculatedEnvVarView, {
      description: "the environment its engine container was created with (secrets left out)",
    }),
    ...DefinitionFields,
    ...StopFields,
    health: HealthField,
    health_output: Nullable(
      Type.String({
        description:
          "what its health check printed when its health last changed (why it is unhealthy); null: no check",
      }),
    ),
    health_check: HealthCheckView,
    restart_count: Type.Integer({
      description: "how often its engine restarted it (restart policy) since Berth last started it",
    }),
    ...ResourceFields,
    autorestart: Type.String(),
    autodestroy: Type.String(),
    roles: Type.Array(Type.String()),
    link_variables: StringMap,
    privileged: Type.Boolean(),
    read_only: Type.Boolean(),
    net: Type.String(),
    pid: Type.String(),
    bindings: Type.Array(View({ ...BindingView.properties, volume: Nullable(Type.String()) })),
    linked_to_container: Type.Array(ContainerLinkView),
  },
  "a container (spec Container)",
);
export type Container = Static<typeof ContainerView>;
