// Schemas of S3-compatible backup targets (issue 31, ops/backup-targets.ts): the secret key is
// taken, never answered (`secret_key_set`).
import { type Static, Type } from "typebox";
import { View } from "./common.ts";

export const BackupTargetView = View(
  {
    uuid: Type.String(),
    name: Type.String(),
    resource_uri: Type.String(),
    endpoint: Type.String({ description: "the S3-compatible server, https://host[:port]" }),
    bucket: Type.String(),
    prefix: Type.String({ description: "key prefix of every object Berth writes" }),
    region: Type.String(),
    access_key: Type.String(),
    secret_key_set: Type.Boolean({ description: "the secret key is held sealed and never shown" }),
    path_style: Type.Boolean(),
    created_datetime: Type.String(),
  },
  "an S3-compatible bucket that control-plane and volume backups go to",
);
export type BackupTarget = Static<typeof BackupTargetView>;

export const TargetName = Type.String({
  pattern: "^[a-z0-9][a-z0-9-]{0,62}$",
  description: "a backup target's name (lower-case letters, digits, hyphens)",
});

export const BackupTargetCreateBody = Type.Object(
  {
    name: TargetName,
    endpoint: Type.String({ minLength: 1, maxLength: 500 }),
    bucket: Type.String({ minLength: 3, maxLength: 63 }),
    prefix: Type.Optional(Type.String({ maxLength: 200 })),
    region: Type.Optional(Type.String({ maxLength: 64, pattern: "^[a-z0-9-]*$" })),
    access_key: Type.String({ minLength: 1, maxLength: 256 }),
    secret_key: Type.String({ minLength: 1, maxLength: 1024 }),
    path_style: Type.Optional(
      Type.Boolean({
        default: true,
        description: "endpoint/bucket/key addressing (false: bucket.endpoint/key)",
      }),
    ),
  },
  { additionalProperties: false },
);
export type BackupTargetCreateBody = Static<typeof BackupTargetCreateBody>;
