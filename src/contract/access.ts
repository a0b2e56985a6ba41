// Answer schemas of the calls that end access (issue 26): a password change says what it ended.
import { type Static, Type } from "typebox";
import { View } from "./common.ts";

export const PasswordChangedView = View(
  {
    username: Type.String(),
    sessions_ended: Type.Integer({
      description: "dashboard sessions ended (all but the one the change was made from)",
    }),
    access_tokens_ended: Type.Integer({ description: "Bearer access tokens ended" }),
  },
  "the password was changed; what it ended",
);
export type PasswordChanged = Static<typeof PasswordChangedView>;
