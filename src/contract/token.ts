// Schemas of node registration tokens (`POST /api/infra/v1/[ns/]token/`, the historical CLI's
// `node byo`): the token itself is answered once, at creation.
import { type Static, Type } from "typebox";
import { Time, Uri, View } from "./common.ts";

const tokenFields = {
  uuid: Type.String(),
  resource_uri: Uri,
  created: Time,
  expires: Time,
  created_by: Type.String(),
};

export const RegistrationTokenView = View(tokenFields, "a node registration token (never its secret)");
export type RegistrationToken = Static<typeof RegistrationTokenView>;

export const CreatedRegistrationTokenView = View(
  {
    ...tokenFields,
    token: Type.String({ description: "the registration token; shown only in this answer" }),
    command: Type.String({ description: "what to run on the server that becomes a node" }),
  },
  "a new node registration token, with its secret",
);
export type CreatedRegistrationToken = Static<typeof CreatedRegistrationTokenView>;
