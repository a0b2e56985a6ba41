// TypeBox schemas of the Service bodies (spec "Services": Create service, Update service).
// They give the route validation, the static types of the bodies, and the OpenAPI document.
//
// Shape decisions:
// - Integers are `Type.Integer`: the server's ajv runs with `coerceTypes`, so numeric strings are
//   accepted (CONTRACT §12). Nullable integers list `null` first so that ajv's coercion turns ""
//   into null (unset) rather than failing.
// - Enumerations use `Type.Enum`: the static type is the same union of literals as a union of
//   `Type.Literal`, but the JSON Schema is `enum`, which api/errors.ts turns into
//   "must be one of OFF, ON_FAILURE, ALWAYS" instead of ajv's "must match a schema in anyOf".
// - The bodies themselves refuse unknown keys (a typo, or a field that cannot be updated, is a 400
//   naming it rather than silently ignored). Items of the lists accept extra keys, because clients
//   echo the read-only fields of a GET back (`port_name`, `endpoint_uri`, `uri_protocol`,
//   `from_service`); they are ignored.
// - Every type, enumeration, length and bound is stated here, explicitly (api/input.ts adds no
//   default bound to these schemas: test/domain/service-contract.test.ts): the one compiled check of
//   contract/check.ts holds them for /service/ and for stack items alike, and domain/service-spec.ts
//   keeps only the rules a schema cannot say (forms, references, duplicates, rules across fields).
import { type Static, Type } from "typebox";
import {
  BindingView,
  CalculatedEnvVarView,
  DefinitionFields,
  EnvVarView,
  Nullable,
  PortView,
  ResourceFields,
  ServiceLinkView,
  StopFields,
  StringMap,
  TagView,
  Time,
  Uri,
  View,
} from "./common.ts";
import { HealthCheckBody, HealthCheckView, RolloutBody, RolloutView, ServiceHealthField } from "./health.ts";
import { SERVICE_LIMITS as L } from "./limits.ts";
import { DomainView } from "./router.ts";

const AUTORESTART = ["OFF", "ON_FAILURE", "ALWAYS"] as const;
const AUTODESTROY = ["OFF", "ON_SUCCESS", "ALWAYS"] as const;
const STRATEGIES = ["EMPTIEST_NODE", "HIGH_AVAILABILITY", "EVERY_NODE"] as const;

export const ServicePortBody = Type.Object(
  {
    protocol: Type.Enum(["tcp", "udp"], { description: "tcp or udp" }),
    inner_port: Type.Integer({ minimum: 1, maximum: 65535, description: "port inside the container" }),
    outer_port: Type.Optional(
      Type.Union([Type.Null(), Type.Integer({ minimum: 0, maximum: 65535 })], {
        description:
          "port on the node's public interface; null or 0: the engine picks one when the port is published",
      }),
    ),
    published: Type.Optional(
      Type.Boolean({
        default: false,
        description:
          "published on the node's public interface; unpublished ports are reachable through links",
      }),
    ),
  },
  { description: "a port of the service's containers" },
);

export const EnvVarBody = Type.Object(
  {
    key: Type.String({
      maxLength: L.envKeyMaxLength,
      description: "variable name: letters, digits and _, not starting with a digit",
    }),
    value: Type.String({
      maxLength: L.envValueMaxLength,
      description: "variable value; overrides the image's value",
    }),
  },
  { description: "an environment variable of the service's containers" },
);

export const ServiceLinkBody = Type.Object(
  {
    to_service: Type.String({
      minLength: 1,
      maxLength: L.textMaxLength,
      description: "resource URI of the target service, in the same namespace",
    }),
    name: Type.Optional(
      Type.Union([Type.Null(), Type.String({ maxLength: L.linkNameMaxLength })], {
        description: "link name (host name and variable prefix); defaults to the target's name",
      }),
    ),
  },
  { description: "a link to another service" },
);

export const ServiceBindingBody = Type.Object(
  {
    host_path: Type.Optional(
      Type.Union([Type.Null(), Type.String({ maxLength: L.textMaxLength })], {
        description: "absolute host path to mount; null or empty: a volume owned by the container",
      }),
    ),
    container_path: Type.Optional(
      Type.Union([Type.Null(), Type.String({ maxLength: L.textMaxLength })], {
        description: "absolute mount path in the container; required unless volumes_from is given",
      }),
    ),
    rewritable: Type.Optional(Type.Boolean({ default: true, description: "writable (false: read-only)" })),
    volumes_from: Type.Optional(
      Type.Union([Type.Null(), Type.String({ maxLength: L.textMaxLength })], {
        description: "resource URI of a service whose volumes are mounted; replaces container_path",
      }),
    ),
  },
  { description: "a volume or host directory mounted into the service's containers" },
);

export const DomainBody = Type.Object(
  {
    host: Type.String({
      minLength: 1,
      maxLength: 253,
      description: "host name the service serves, such as app.example.com; '*.' first for every sub-domain",
    }),
    path: Type.Optional(
      Type.Union([Type.Null(), Type.String({ maxLength: L.textMaxLength })], {
        description: "path prefix (default /); requests keep their whole path",
      }),
    ),
    port: Type.Optional(
      Type.Union([Type.Null(), Type.Integer({ minimum: 1, maximum: 65535 })], {
        description: "the containers' port requests go to; null: the service's first TCP port, else 80",
      }),
    ),
    tls: Type.Optional(
      Type.Enum(["acme", "uploaded", "off"], {
        description:
          "certificate: from the ACME server (default), uploaded (PUT …/service/<uuid>/certificate/), or off (plain HTTP)",
      }),
    ),
    redirect_https: Type.Optional(
      Type.Boolean({ description: "redirect plain HTTP to HTTPS (default: true unless tls is off)" }),
    ),
    sticky: Type.Optional(
      Type.Boolean({
        description: "sticky sessions: a client goes back to the same container (default false)",
      }),
    ),
    weight: Type.Optional(
      Type.Integer({
        minimum: -1000,
        maximum: 1000,
        description:
          "routes of higher weight are matched first where host names and paths overlap (default 0)",
      }),
    ),
  },
  { description: "a host name (and path prefix) served through the router" },
);

/** Tags are `{name}` objects on the wire; plain strings are accepted too (stack files, Go SDK). */
export const TagBody = Type.Union(
  [
    Type.Object({ name: Type.String({ minLength: 1, maxLength: L.tagMaxLength }) }),
    Type.String({ minLength: 1, maxLength: L.tagMaxLength }),
  ],
  {
    description: "a tag: {name} or the name alone",
  },
);

const StringList = (description: string) =>
  Type.Array(Type.String({ minLength: 1, maxLength: L.textMaxLength }), {
    maxItems: L.maxListItems,
    description,
  });

/** Fields that both bodies take, with the same types and meaning. */
const commonFields = {
  target_num_containers: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: 100,
      description: "requested number of containers (default 1); ignored by EVERY_NODE services",
    }),
  ),
  run_command: Type.Optional(
    Type.Union([Type.Null(), Type.String({ maxLength: L.commandMaxLength })], {
      description: "overrides the image's command; split like a shell would (quotes group words)",
    }),
  ),
  entrypoint: Type.Optional(
    Type.Union([Type.Null(), Type.String({ maxLength: L.commandMaxLength })], {
      description: "overrides the image's entrypoint; split like a shell would",
    }),
  ),
  container_ports: Type.Optional(
    Type.Array(ServicePortBody, {
      maxItems: L.maxPorts,
      description: "ports, added to those the image exposes",
    }),
  ),
  container_envvars: Type.Optional(
    Type.Array(EnvVarBody, {
      maxItems: L.maxEnvVars,
      description: "environment variables; override the image's",
    }),
  ),
  linked_to_service: Type.Optional(
    Type.Array(ServiceLinkBody, { maxItems: L.maxLinks, description: "links to other services" }),
  ),
  autorestart: Type.Optional(
    Type.Enum([...AUTORESTART], { description: "restart policy of the containers (default OFF)" }),
  ),
  autodestroy: Type.Optional(
    Type.Enum([...AUTODESTROY], {
      description: "terminate containers when they exit (default OFF)",
    }),
  ),
  sequential_deployment: Type.Optional(
    Type.Boolean({
      description: "deploy and scale containers one after the other, each linked to the previous",
    }),
  ),
  roles: Type.Optional(
    Type.Array(Type.Enum(["global"]), {
      maxItems: L.maxListItems,
      description: "platform API roles; `global` gives the containers PLATFORM_AUTH",
    }),
  ),
  privileged: Type.Optional(Type.Boolean({ description: "run containers privileged (default false)" })),
  deployment_strategy: Type.Optional(
    Type.Enum([...STRATEGIES], {
      description: "how containers are placed on nodes (default EMPTIEST_NODE)",
    }),
  ),
  tags: Type.Optional(
    Type.Array(TagBody, { maxItems: L.maxTags, description: "node tags the containers must be deployed on" }),
  ),
  autoredeploy: Type.Optional(
    Type.Boolean({ description: "redeploy when the image is updated in the platform registry" }),
  ),
  net: Type.Optional(Type.Enum(["bridge", "host"], { description: "network mode (default bridge)" })),
  pid: Type.Optional(Type.Enum(["none", "host"], { description: "PID namespace mode (default none)" })),
  working_dir: Type.Optional(
    Type.String({ maxLength: L.textMaxLength, description: "absolute working directory (default /)" }),
  ),
  nickname: Type.Optional(
    Type.String({ maxLength: L.nicknameMaxLength, description: "display name; defaults to name" }),
  ),
  cpu_shares: Type.Optional(
    Type.Union([Type.Null(), Type.Integer({ minimum: 0, maximum: L.cpuSharesMax })], {
      description: "relative CPU priority; placement counts 1024 shares as one CPU",
    }),
  ),
  memory: Type.Optional(
    Type.Union([Type.Null(), Type.Integer({ minimum: 0, maximum: L.memoryMaxMb })], {
      description: "memory limit in MB (at least 6); placement reserves it on the node",
    }),
  ),
  health_check: Type.Optional(HealthCheckBody),
  domains: Type.Optional(
    Type.Array(DomainBody, {
      maxItems: 20,
      description:
        "host names served through the router on the namespace's nodes; a host name belongs to the first namespace that claims it",
    }),
  ),
  rollout: Type.Optional(RolloutBody),
};

/** How the containers are stopped (domain/stop.ts); both bodies take them. */
const stopFields = {
  stop_signal: Type.Optional(
    Type.Union([Type.Null(), Type.String({ maxLength: L.stopSignalMaxLength })], {
      description:
        "signal that asks the containers' command to stop, such as SIGTERM, SIGINT or SIGQUIT (or its number); null or empty: the image's STOPSIGNAL, or SIGTERM",
    }),
  ),
  stop_grace_period: Type.Optional(
    Type.Union([Type.Null(), Type.Integer({ minimum: 0, maximum: L.stopGracePeriodMaxS })], {
      description:
        "seconds a stop or redeploy waits after the stop signal before the engine kills the command (0 to 3600); null: the platform's default (BERTH_CONTAINER_STOP_TIMEOUT_S, 10 s)",
    }),
  ),
};

export const ServiceCreateBody = Type.Object(
  {
    image: Type.String({
      minLength: 1,
      maxLength: L.imageMaxLength,
      description: "image name, <name>[:<tag>]; latest when no tag",
    }),
    name: Type.Optional(
      Type.String({
        maxLength: L.nameMaxLength,
        description: "lower-case DNS label; inherited by containers (`web-1`); defaults from the image",
      }),
    ),
    ...commonFields,
    ...stopFields,
    bindings: Type.Optional(
      Type.Array(ServiceBindingBody, {
        maxItems: L.maxBindings,
        description: "volumes and host directories",
      }),
    ),
    memory_swap: Type.Optional(
      Type.Union([Type.Null(), Type.Integer({ minimum: -1, maximum: 2 * L.memoryMaxMb })], {
        description: "memory plus swap in MB; -1: unlimited swap",
      }),
    ),
    cpuset: Type.Optional(
      Type.String({
        maxLength: L.textMaxLength,
        description: "CPUs the containers may use, for example 0-1,3",
      }),
    ),
    dns: Type.Optional(StringList("DNS server addresses")),
    dns_search: Type.Optional(StringList("DNS search domains")),
    cap_add: Type.Optional(StringList("capabilities added, for example NET_ADMIN")),
    cap_drop: Type.Optional(StringList("capabilities dropped")),
    devices: Type.Optional(StringList("device mappings <host device>:<container device>[:<permissions>]")),
    extra_hosts: Type.Optional(StringList("extra /etc/hosts entries <host name>:<ip>")),
    security_opt: Type.Optional(StringList("security options (labeling scheme)")),
    secuirty_opt: Type.Optional(StringList("alias of security_opt (the spec's attribute list spells it so)")),
    labels: Type.Optional(
      Type.Record(
        Type.String({ maxLength: L.labelKeyMaxLength }),
        Type.String({ maxLength: L.labelValueMaxLength }),
        {
          maxProperties: L.maxLabels,
          description: "engine labels set on every container",
        },
      ),
    ),
    user: Type.Optional(
      Type.String({
        maxLength: L.textMaxLength,
        description: "user the command runs as (default: the image's)",
      }),
    ),
    hostname: Type.Optional(
      Type.String({
        maxLength: L.textMaxLength,
        description: "container host name (default: the container name)",
      }),
    ),
    domainname: Type.Optional(
      Type.String({ maxLength: L.textMaxLength, description: "container domain name" }),
    ),
    mac_address: Type.Optional(
      Type.String({ maxLength: L.textMaxLength, description: "container MAC address" }),
    ),
    cgroup_parent: Type.Optional(
      Type.String({ maxLength: L.textMaxLength, description: "parent cgroup of the containers" }),
    ),
    cgroup_name: Type.Optional(
      Type.String({
        maxLength: L.textMaxLength,
        description: "alias of cgroup_parent (the spec's attribute list)",
      }),
    ),
    tty: Type.Optional(Type.Boolean({ description: "allocate a pseudo-terminal (default false)" })),
    stdin_open: Type.Optional(Type.Boolean({ description: "keep stdin open (default false)" })),
    read_only: Type.Optional(Type.Boolean({ description: "read-only root filesystem (default false)" })),
  },
  { additionalProperties: false, description: "Create service" },
);
export type ServiceCreateBody = Static<typeof ServiceCreateBody>;

/** Exactly the fields the spec lets an update change; all optional. */
export const ServiceUpdateBody = Type.Object(
  {
    image: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: L.imageMaxLength,
        description: "image name, <name>[:<tag>]; latest when no tag",
      }),
    ),
    ...commonFields,
    ...stopFields,
  },
  { additionalProperties: false, description: "Update service" },
);
export type ServiceUpdateBody = Static<typeof ServiceUpdateBody>;

/**
 * The fields of the service definition: Create service's keys, read from its schema. This is the
 * one list of them; the stack file's REST keys and the stack's create-only checks derive from it,
 * and the dashboard's form and the CLI's options each say per field what they do with it
 * (`Record<ServiceField, …>`, so the compiler refuses a field they do not mention;
 * test/domain/service-definition.test.ts checks they do what they say).
 */
export type ServiceField = keyof ServiceCreateBody;
export const SERVICE_FIELDS = Object.keys(ServiceCreateBody.properties) as readonly ServiceField[];
/** The fields Update service takes (a subset of SERVICE_FIELDS). */
export const UPDATABLE_FIELDS: ReadonlySet<string> = new Set(Object.keys(ServiceUpdateBody.properties));

export type ServicePortBody = Static<typeof ServicePortBody>;
export type EnvVarBody = Static<typeof EnvVarBody>;
export type ServiceLinkBody = Static<typeof ServiceLinkBody>;
export type ServiceBindingBody = Static<typeof ServiceBindingBody>;
export type TagBody = Static<typeof TagBody>;
export type DomainBody = Static<typeof DomainBody>;

// ---- answers ----------------------------------------------------------------------------------

/** A service as the API shows it (spec "Service"). */
export const ServiceView = View(
  {
    uuid: Type.String(),
    resource_uri: Uri,
    image_name: Type.String(),
    name: Type.String(),
    nickname: Type.String(),
    public_dns: Type.String(),
    state: Type.String(),
    net: Type.String(),
    pid: Type.String(),
    synchronized: Type.Boolean(),
    deployed_datetime: Time,
    started_datetime: Time,
    stopped_datetime: Time,
    destroyed_datetime: Time,
    target_num_containers: Type.Integer(),
    current_num_containers: Type.Integer(),
    running_num_containers: Type.Integer(),
    stopped_num_containers: Type.Integer(),
    stack: Nullable(Uri),
    containers: Type.Array(Uri),
    container_ports: Type.Array(PortView),
    container_envvars: Type.Array(EnvVarView),
    calculated_envvars: Type.Array(CalculatedEnvVarView),
    ...DefinitionFields,
    ...StopFields,
    health_check: HealthCheckView,
    health: ServiceHealthField,
    restart_count: Type.Integer({
      description: "its live containers' restart_count summed: how often their engines restarted them",
    }),
    rollout: RolloutView,
    sequential_deployment: Type.Boolean(),
    ...ResourceFields,
    linked_from_service: Type.Array(ServiceLinkView),
    linked_to_service: Type.Array(ServiceLinkView),
    bindings: Type.Array(BindingView),
    autorestart: Type.String(),
    autodestroy: Type.String(),
    roles: Type.Array(Type.String()),
    link_variables: StringMap,
    privileged: Type.Boolean(),
    read_only: Type.Boolean(),
    deployment_strategy: Type.String(),
    tags: Type.Array(TagView),
    autoredeploy: Type.Boolean(),
    domains: Type.Array(DomainView),
  },
  "a service (spec Service)",
);
export type Service = Static<typeof ServiceView>;

/** `POST …/service/<uuid>/start|scale/?dry_run=true`: the placement plan, nothing changed. */
export const ServicePlanView = View({
  dry_run: Type.Literal(true),
  operation: Type.String(),
  service: Uri,
  target_num_containers: Type.Integer(),
  fits: Type.Boolean(),
  placements: Type.Array(View({ node: Uri, node_name: Type.String() })),
  explanation: Type.Array(Type.String()),
});
export type ServicePlan = Static<typeof ServicePlanView>;
