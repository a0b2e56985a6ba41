// The dashboard's session answer (`GET /api/session/`): who is signed in and the CSRF token the
// page sends on every non-GET call; shared by the session route, OpenAPI and the dashboard.
import { type Static, Type } from "typebox";

export const SessionView = Type.Object({
  signed_in: Type.Literal(true),
  username: Type.String(),
  is_admin: Type.Boolean(),
  namespaces: Type.Array(Type.String(), { description: "namespaces the user may use: its own first" }),
  csrf_token: Type.String({
    description: "send it as X-CSRF-Token on every non-GET call made with the cookie",
  }),
  expires: Type.String({ description: "ISO 8601 UTC" }),
});
export type Session = Static<typeof SessionView>;
