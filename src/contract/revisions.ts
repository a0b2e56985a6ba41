// A service's kept definitions (issue 29): `GET …/service/<uuid>/revisions/` lists them, newest
// first; `POST …/service/<uuid>/rollback/` goes back to one. Berth additions (CONTRACT: additive).
import { type Static, Type } from "typebox";
import { Nullable, Time, Uri, View } from "./common.ts";
import { ServiceView } from "./service.ts";

/** The definition fields a revision shows, as the service's view shows them. */
const DEFINITION_KEYS = [
  "image_name",
  "run_command",
  "entrypoint",
  "container_envvars",
  "linked_to_service",
  "bindings",
  "autorestart",
  "autodestroy",
  "health_check",
  "rollout",
  "sequential_deployment",
  "stop_signal",
  "stop_grace_period",
  "roles",
  "privileged",
  "read_only",
  "deployment_strategy",
  "tags",
  "autoredeploy",
  "net",
  "pid",
  "working_dir",
  "user",
  "labels",
  "cpu_shares",
  "cpuset",
  "memory",
  "memory_swap",
  "domains",
] as const;

export const RevisionPortView = View({
  protocol: Type.String({ description: "tcp or udp" }),
  inner_port: Type.Integer(),
  outer_port: Nullable(Type.Integer()),
  published: Type.Boolean(),
});

type DefinitionKey = (typeof DEFINITION_KEYS)[number];
const picked = Object.fromEntries(DEFINITION_KEYS.map((k) => [k, ServiceView.properties[k]])) as {
  [K in DefinitionKey]: (typeof ServiceView.properties)[K];
};

export const RevisionDefinitionView = View({
  ...picked,
  container_ports: Type.Array(RevisionPortView),
});

export const RevisionView = View(
  {
    number: Type.Integer({ description: "the service's spec_version with this definition" }),
    current: Type.Boolean({ description: "the definition the service has now" }),
    created_datetime: Time,
    cause: Type.String({
      description:
        "what gave the service this definition: create, update, key rotation, existing (before revisions were kept)",
    }),
    action: Nullable(Uri),
    service: Uri,
    definition: RevisionDefinitionView,
  },
  "a definition a service had or has (a numbered revision)",
);
export type Revision = Static<typeof RevisionView>;

export const RollbackBody = Type.Optional(
  Type.Object(
    {
      revision: Type.Optional(
        Type.Integer({
          minimum: 1,
          description: "the kept revision to go back to; default: the newest before the current one",
        }),
      ),
    },
    { additionalProperties: false },
  ),
);
