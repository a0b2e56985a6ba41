// Scheduled control-plane backups (issue 31, ops/scheduled-backups.ts), for administrators: the
// backups in BERTH_BACKUP_DIR or on the S3 target BERTH_BACKUP_TARGET with their size, time and
// status, and one made now.
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { conflict } from "../../domain/errors.ts";
import type { ScheduledBackups } from "../../ops/scheduled-backups.ts";

const Entry = Type.Object({
  name: Type.String(),
  size_bytes: Type.Integer(),
  created_datetime: Type.String(),
  status: Type.String({ description: "Success, or Failed for the last attempt when it failed" }),
  error: Type.Union([Type.String(), Type.Null()]),
});
const Listing = Type.Object({
  enabled: Type.Boolean({ description: "whether BERTH_BACKUP_DIR or BERTH_BACKUP_TARGET is set" }),
  every_hours: Type.Union([Type.Integer(), Type.Null()]),
  keep: Type.Union([Type.Integer(), Type.Null()]),
  keep_daily: Type.Union([Type.Integer(), Type.Null()]),
  keep_weekly: Type.Union([Type.Integer(), Type.Null()]),
  target: Type.Union([Type.String(), Type.Null()], {
    description: "the S3 backup target's name (BERTH_BACKUP_TARGET); null: the directory",
  }),
  error: Type.Union([Type.String(), Type.Null()], {
    description: "why the backups could not be listed (the target refused or did not answer)",
  }),
  objects: Type.Array(Entry),
});
const ACCESS = { admin: "only administrators see and make control-plane backups" };

export function controlBackupRoutes(untyped: FastifyInstance, deps: { scheduled: ScheduledBackups }): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ["operations"];
  const listing = async () => {
    const s = deps.scheduled.settings;
    return {
      enabled: deps.scheduled.enabled,
      every_hours: s?.everyHours ?? null,
      keep: s?.keep ?? null,
      keep_daily: s?.keepDaily ?? null,
      keep_weekly: s?.keepWeekly ?? null,
      target: s?.target ?? null,
      ...(await deps.scheduled.list()),
    };
  };
  app.get(
    "/api/v1.1/backups/",
    {
      config: { access: ACCESS },
      schema: {
        tags,
        summary: "The scheduled control-plane backups, newest first, with size and status",
        response: { 200: Listing },
      },
    },
    listing,
  );
  app.post(
    "/api/v1.1/backups/",
    {
      config: { action: "Control Plane Backup", access: ACCESS },
      schema: {
        tags,
        summary:
          "Make a control-plane backup into BERTH_BACKUP_DIR or BERTH_BACKUP_TARGET now (retention applies)",
        response: { 201: Listing },
      },
    },
    async (_req, reply) => {
      if (!deps.scheduled.enabled)
        throw conflict(
          "set BERTH_BACKUP_DIR or BERTH_BACKUP_TARGET (and BERTH_BACKUP_PASSPHRASE_FILE or BERTH_BACKUP_KEY_FILE) to make backups",
          "backups_not_configured",
        );
      await deps.scheduled.runOnce().catch((err: Error) => {
        // The operator's setup (a secret file, the directory, the target) is what failed: one line.
        throw conflict(`the backup failed: ${err.message.split("\n")[0]}`, "backup_failed");
      });
      return reply.status(201).send(await listing());
    },
  );
}
