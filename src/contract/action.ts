// The answer schema of actions (spec "Actions"): the record every platform call leaves.
import { type Static, Type } from "typebox";
import { Time, Uri, View } from "./common.ts";

export const ActionView = View(
  {
    resource_uri: Uri,
    uuid: Type.String(),
    object: Type.String({ description: "resource URI of the object the call was about" }),
    action: Type.String(),
    method: Type.String(),
    path: Type.String(),
    user: Type.String(),
    user_agent: Type.String(),
    start_date: Time,
    end_date: Time,
    state: Type.String(),
    ip: Type.String(),
    location: Type.String(),
    is_user_action: Type.Boolean(),
    can_be_canceled: Type.Boolean(),
    can_be_retried: Type.Boolean(),
  },
  "an action (spec Action)",
);
export type Action = Static<typeof ActionView>;
