// Schemas of volume backups (issue 31): a backup of a service's volumes, its restore into the same
// or another service, and a service's backup schedule.
import { type Static, Type } from "typebox";
import { Nullable, Time, Uri, View } from "./common.ts";

export const VolumeBackupView = View(
  {
    uuid: Type.String(),
    resource_uri: Uri,
    service: Uri,
    service_name: Type.String(),
    state: Type.String({ description: "In progress, Success or Failed" }),
    trigger: Type.String({ description: "user (on demand) or schedule" }),
    created_datetime: Time,
    finished_datetime: Time,
    size_bytes: Type.Integer(),
    archives: Type.Array(
      Type.Object({ container_number: Type.Integer(), path: Type.String(), size_bytes: Type.Integer() }),
    ),
    action: Nullable(Uri),
    error: Nullable(Type.String()),
    target: Nullable(Type.String({ description: "the backup target holding it; null: the data directory" })),
  },
  "a backup of a service's volumes",
);
export type VolumeBackup = Static<typeof VolumeBackupView>;

const PreCommand = Type.String({
  minLength: 1,
  maxLength: 1000,
  description: "a shell command run in each running container before its volumes are read; it must exit 0",
});
const Keep = Type.Integer({
  minimum: 1,
  maximum: 1000,
  description: "successful backups of the service kept; older ones are removed after this one succeeds",
});
const Tier = (period: string) =>
  Type.Integer({
    minimum: 0,
    maximum: 1000,
    description: `besides keep, the newest backup of each of the last N ${period} that have one (0: none)`,
  });
const Target = Type.String({
  pattern: "^[a-z0-9][a-z0-9-]{0,62}$",
  description:
    "the backup target (an S3-compatible bucket an administrator configured) to store it on; default the data directory",
});
const Pause = Type.Boolean({
  default: true,
  description: "pause each running container while its volumes are read (a consistent copy)",
});

export const VolumeBackupCreateBody = Type.Object(
  {
    pause: Type.Optional(Pause),
    pre_command: Type.Optional(PreCommand),
    keep: Type.Optional(Keep),
    keep_daily: Type.Optional(Tier("days")),
    keep_weekly: Type.Optional(Tier("weeks")),
    target: Type.Optional(Target),
  },
  { additionalProperties: false },
);
export type VolumeBackupCreateBody = Static<typeof VolumeBackupCreateBody>;

export const VolumeRestoreBody = Type.Object(
  {
    service: Type.Optional(
      Type.String({
        maxLength: 300,
        description: "the service to restore into (its URI or uuid): default the backed-up service",
      }),
    ),
  },
  { additionalProperties: false },
);
export type VolumeRestoreBody = Static<typeof VolumeRestoreBody>;

export const VolumeBackupScheduleBody = Type.Object(
  {
    every_hours: Type.Integer({ minimum: 1, maximum: 24 * 366 }),
    keep: Keep,
    keep_daily: Type.Optional(Tier("days")),
    keep_weekly: Type.Optional(Tier("weeks")),
    pause: Type.Optional(Pause),
    pre_command: Type.Optional(Nullable(PreCommand)),
    target: Type.Optional(Nullable(Target)),
  },
  { additionalProperties: false },
);
export type VolumeBackupScheduleBody = Static<typeof VolumeBackupScheduleBody>;

export const VolumeBackupScheduleView = View(
  {
    service: Uri,
    every_hours: Type.Integer(),
    keep: Type.Integer(),
    keep_daily: Type.Integer(),
    keep_weekly: Type.Integer(),
    pause: Type.Boolean(),
    pre_command: Nullable(Type.String()),
    target: Nullable(Type.String()),
    next_datetime: Time,
  },
  "a service's volume backup schedule",
);
