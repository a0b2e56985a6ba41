// Pieces the answer schemas of several resources share. Answer objects are open
// (`additionalProperties: true`): a response schema also drives Fastify's serializer, which would
// silently drop any field it does not list, and historical clients read compat aliases
// (api/compat.ts). Listed fields are typed exactly; test/api/answers.test.ts checks that an answer
// over HTTP is the view object itself, and every test's harness checks each answer against its
// schema (api/answers.ts).
import { type TObject, type TProperties, type TSchema, Type } from "typebox";

/** An answer object: the listed fields typed, any other field passed through untouched. */
export const View = <P extends TProperties>(properties: P, description?: string): TObject<P> =>
  Type.Object(properties, { additionalProperties: true, ...(description ? { description } : {}) });

export const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);

/**
 * A list's `state=` filter: one of the kind's states (domain/states.ts), so a wrong one is a 400
 * by schema ("must be one of …", naming `state`) and OpenAPI lists the values.
 */
export const StateFilter = <S extends string>(states: readonly S[], kind: string) =>
  Type.Optional(Type.Enum([...states], { description: `only ${kind} in this state` }));

/** `state__not`: leaves out the objects in this state (`state__not=Terminated` hides the terminated). */
export const StateNotFilter = <S extends string>(states: readonly S[], kind: string) =>
  Type.Optional(Type.Enum([...states], { description: `leave out ${kind} in this state` }));

/** REST timestamps: ISO 8601 UTC, null until the event happened. */
export const Time = Nullable(Type.String({ description: "ISO 8601 UTC; null until it happened" }));

export const Uri = Type.String({ description: "resource URI" });

export const TagView = View({ name: Type.String() });

export const EnvVarView = View({ key: Type.String(), value: Type.String() });

export const CalculatedEnvVarView = View({
  key: Type.String(),
  value: Type.String(),
  origin: Type.String({ description: "user, image or platform" }),
});

export const PortView = View({
  protocol: Type.String({ description: "tcp or udp" }),
  inner_port: Type.Integer(),
  outer_port: Nullable(Type.Integer()),
  port_name: Type.String(),
  endpoint_uri: Nullable(Type.String()),
  published: Type.Boolean(),
});

export const BindingView = View({
  host_path: Nullable(Type.String()),
  container_path: Nullable(Type.String()),
  rewritable: Type.Boolean(),
  volumes_from: Nullable(Type.String({ description: "service resource URI" })),
});

export const ServiceLinkView = View({
  name: Type.String(),
  from_service: Uri,
  to_service: Uri,
});

export const StringMap = Type.Record(Type.String(), Type.String());

/** An answer with no body (204). */
export const NoContent = Type.Unsafe<void>({ type: "null", description: "no body" });

/** A refusal: what to fix, and a code programs can test (CONTRACT §6). */
export const ErrorView = View({ error: Type.String(), code: Type.String() });

/** Fields of a service's definition that services and containers both show. */
export const DefinitionFields = {
  labels: StringMap,
  working_dir: Type.String(),
  user: Type.String(),
  hostname: Type.String(),
  domainname: Type.String(),
  mac_address: Type.String(),
  cgroup_name: Type.String(),
  cgroup_parent: Type.String(),
  tty: Type.Boolean(),
  stdin_open: Type.Boolean(),
  dns: Type.Array(Type.String()),
  dns_search: Type.Array(Type.String()),
  cap_add: Type.Array(Type.String()),
  cap_drop: Type.Array(Type.String()),
  devices: Type.Array(Type.String()),
  extra_hosts: Type.Array(Type.String()),
  security_opt: Type.Array(Type.String()),
  secuirty_opt: Type.Array(Type.String(), { description: "historical misspelling of security_opt" }),
  entrypoint: Type.String(),
  run_command: Type.String(),
};

/** How a definition's containers are stopped (null: the image's signal, the platform's grace period). */
export const StopFields = {
  stop_signal: Nullable(Type.String({ description: "signal that asks the command to stop" })),
  stop_grace_period: Nullable(
    Type.Integer({ description: "seconds a stop waits after the stop signal before the engine kills" }),
  ),
};

/** Resource limits of a definition (CPU shares, memory in MB). */
export const ResourceFields = {
  cpu_shares: Nullable(Type.Number()),
  cpuset: Type.String(),
  memory: Nullable(Type.Number({ description: "MB" })),
  memory_swap: Nullable(Type.Number({ description: "MB" })),
};
