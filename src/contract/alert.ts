// Schemas of alert rules (issue 32): a condition over a namespace's containers, nodes or actions,
// delivered to webhooks (generic JSON or Slack-compatible) and email; their incidents and the
// delivery log.
import { type Static, Type } from "typebox";
import { Nullable, Time, Uri, View } from "./common.ts";

export const ALERT_KINDS = [
  "container_exited",
  "crash_looping",
  "unhealthy",
  "memory_high",
  "node_unreachable",
  "action_failed",
  "certificate_expiring",
] as const;
export type AlertKind = (typeof ALERT_KINDS)[number];

export const AlertParams = Type.Object(
  {
    threshold_percent: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 100,
        description: "memory_high: percent of the limit (default 90)",
      }),
    ),
    for_minutes: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 60, description: "memory_high: for how long (default 5)" }),
    ),
    restarts: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 1000, description: "crash_looping: restarts (default 3)…" }),
    ),
    window_minutes: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 60,
        description: "crash_looping: …within this window (default 10)",
      }),
    ),
    days: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 365,
        description: "certificate_expiring: days before (default 14)",
      }),
    ),
  },
  { additionalProperties: false },
);
export type AlertParams = Static<typeof AlertParams>;

export const AlertChannelBody = Type.Union([
  Type.Object(
    {
      type: Type.Literal("webhook"),
      url: Type.String({
        minLength: 1,
        maxLength: 2000,
        description: "http(s) URL; internal addresses refused",
      }),
      format: Type.Optional(
        Type.Union([Type.Literal("json"), Type.Literal("slack")], {
          description:
            "json (default): the incident as JSON; slack: `{text}` for Slack-compatible incoming webhooks",
        }),
      ),
    },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      type: Type.Literal("email"),
      to: Type.String({ minLength: 3, maxLength: 254, pattern: "^[^@\\s]+@[^@\\s]+$" }),
    },
    { additionalProperties: false },
  ),
]);
export type AlertChannelBody = Static<typeof AlertChannelBody>;

export const AlertCreateBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 100 }),
  // Spelled out: a union mapped from ALERT_KINDS would be typed `never`.
  kind: Type.Union(
    [
      Type.Literal("container_exited"),
      Type.Literal("crash_looping"),
      Type.Literal("unhealthy"),
      Type.Literal("memory_high"),
      Type.Literal("node_unreachable"),
      Type.Literal("action_failed"),
      Type.Literal("certificate_expiring"),
    ],
    { description: ALERT_KINDS.join(", ") },
  ),
  params: Type.Optional(AlertParams),
  channels: Type.Array(AlertChannelBody, { minItems: 1, maxItems: 10 }),
  enabled: Type.Optional(Type.Boolean({ default: true })),
});
export type AlertCreateBody = Static<typeof AlertCreateBody>;

export const AlertPatchBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    enabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type AlertPatchBody = Static<typeof AlertPatchBody>;

export const AlertChannelView = View({
  type: Type.String({ description: "webhook or email" }),
  format: Nullable(Type.String({ description: "json or slack (webhooks)" })),
  target: Type.String({ description: "the address, or the webhook's origin (its path may hold a secret)" }),
});

export const AlertView = View(
  {
    uuid: Type.String(),
    name: Type.String(),
    kind: Type.String(),
    params: View({}),
    channels: Type.Array(AlertChannelView),
    enabled: Type.Boolean(),
    firing: Type.Integer({ description: "incidents open now" }),
    created: Time,
    resource_uri: Uri,
  },
  "an alert rule",
);
export type AlertView = Static<typeof AlertView>;

export const IncidentView = View(
  {
    uuid: Type.String(),
    subject: Uri,
    summary: Type.String(),
    state: Type.String({ description: "firing or resolved" }),
    started: Time,
    resolved: Time,
  },
  "one time an alert's condition held",
);

export const DeliveryView = View(
  {
    uuid: Type.String(),
    incident: Type.String({ description: "the incident's uuid" }),
    event: Type.String({ description: "firing or resolved" }),
    target: Type.String(),
    state: Type.String({ description: "pending, delivered or failed" }),
    attempts: Type.Integer(),
    last_error: Type.String(),
    created: Time,
    delivered: Time,
  },
  "one notification of an incident to one channel",
);
