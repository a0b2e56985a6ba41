// Schemas of service triggers: a secret call URL that starts a redeploy or a scale-up.
import { type Static, Type } from "typebox";
import { Uri, View } from "./common.ts";

export const TRIGGER_OPERATIONS = ["REDEPLOY", "SCALEUP"] as const;
export type TriggerOperation = (typeof TRIGGER_OPERATIONS)[number];

export const TriggerView = View(
  {
    uuid: Type.String(),
    name: Type.String(),
    operation: Type.String({ description: "REDEPLOY or SCALEUP" }),
    url: Type.String({ description: "the call URL; it holds the trigger's secret" }),
    resource_uri: Uri,
  },
  "a service trigger",
);
export type Trigger = Static<typeof TriggerView>;

export const TriggerCreateBody = Type.Object({
  name: Type.Optional(Type.String({ maxLength: 100 })),
  operation: Type.Optional(
    // Spelled out: a union mapped from TRIGGER_OPERATIONS would be typed `never`.
    Type.Union([Type.Literal("REDEPLOY"), Type.Literal("SCALEUP")], { default: "REDEPLOY" }),
  ),
});
export type TriggerCreateBody = Static<typeof TriggerCreateBody>;
