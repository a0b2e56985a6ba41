// The query of every logs stream (spec "Limits"; CONTRACT §9): `tail` and `follow`. A value out of
// range or of the wrong type is a 400 on the upgrade.
import { Type } from "typebox";

export const MAX_TAIL = 10_000;

export const LogsQuery = Type.Object({
  tail: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: MAX_TAIL,
      default: 300,
      description: "lines from the end of the log sent first (0 to 10000)",
    }),
  ),
  follow: Type.Optional(
    Type.Boolean({ default: true, description: "keep sending new lines; false closes after the tail" }),
  ),
  user: Type.Optional(
    Type.String({ description: "username, for clients that send no Authorization header" }),
  ),
  token: Type.Optional(Type.String({ description: "API key, with user" })),
});

export interface LogsQueryT {
  tail?: number;
  follow?: boolean;
}
