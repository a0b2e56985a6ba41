// TypeBox schemas of the Stack bodies (spec "Stacks"; CONTRACT §12 stack files).
//
// The items of `services` are left open here: each is a service in either dialect (REST keys of
// Create/Update service, or stack-file keys, even mixed), which domain/stackfile.ts converts and
// checks key by key so that every problem names the service (`services.web.ports[1]`).
import { type Static, Type } from "typebox";
import { Time, Uri, View } from "./common.ts";
import { SERVICE_LIMITS as L } from "./limits.ts";

const ServiceItem = Type.Record(Type.String(), Type.Unknown(), {
  description:
    "a service: the keys of Create service (REST dialect) or stack-file keys (image, links, ports, expose, environment, volumes, volumes_from, restart, command, mem_limit, …), named by name",
});

export const StackCreateBody = Type.Object(
  {
    name: Type.String({ minLength: 1, description: "lower-case DNS label, unique among live stacks" }),
    nickname: Type.Optional(
      Type.String({ maxLength: L.nicknameMaxLength, description: "display name; defaults to name" }),
    ),
    services: Type.Optional(
      Type.Array(ServiceItem, {
        maxItems: L.maxStackServices,
        description:
          "services of the stack (default []); links and volumes_from may name other services of the stack, or <service>.<stack>",
      }),
    ),
  },
  { additionalProperties: false, description: "Create stack" },
);
export type StackCreateBody = Static<typeof StackCreateBody>;

export const StackUpdateBody = Type.Object(
  {
    services: Type.Optional(
      Type.Array(ServiceItem, {
        maxItems: L.maxStackServices,
        description:
          "services to update (matched by name: the keys of Update service) or to add (the keys of Create service); links by service name allowed",
      }),
    ),
  },
  { additionalProperties: false, description: "Update stack" },
);
export type StackUpdateBody = Static<typeof StackUpdateBody>;

// ---- answers ----------------------------------------------------------------------------------

export const StackView = View(
  {
    uuid: Type.String(),
    resource_uri: Uri,
    name: Type.String(),
    nickname: Type.String(),
    state: Type.String(),
    synchronized: Type.Boolean(),
    services: Type.Array(Uri),
    deployed_datetime: Time,
    destroyed_datetime: Time,
  },
  "a stack (spec Stack)",
);
export type Stack = Static<typeof StackView>;

/** `GET …/stack/<uuid>/export/`: `{<service name>: {<stack-file keys>}}`. */
export const StackFileView = Type.Record(Type.String(), Type.Object({}, { additionalProperties: true }), {
  description: "the stack as a stack file: service name → its stack-file keys (defaults left out)",
});
