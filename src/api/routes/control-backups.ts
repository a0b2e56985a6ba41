// Scheduled control-plane backups (issue 31, ops/scheduled-backups.ts), for administrators: the
// backups in BERTH_BACKUP_DIR with their size, time and status, and one made now.
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
  enabled: Type.Boolean({ description: "whether BERTH_BACKUP_DIR is set" }),
  every_hours: Type.Union([Type.Integer(), Type.Null()]),
  keep: Type.Union([Type.Integer(), Type.Null()]),
  objects: Type.Array(Entry),
});
const ACCESS = { admin: "only administrators see and make control-plane backups" };

export function controlBackupRoutes(
  untyped: FastifyInstance,
  deps: { scheduled: ScheduledBackups; everyHours?: number; keep?: number },
): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ["operations"];
  const listing = async () => ({
    enabled: deps.scheduled.enabled,
    every_hours: deps.everyHours ?? null,
    keep: deps.keep ?? null,
    objects: await deps.scheduled.list(),
  });
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
        summary: "Make a control-plane backup into BERTH_BACKUP_DIR now (retention applies)",
        response: { 201: Listing },
      },
    },
    async (_req, reply) => {
      if (!deps.scheduled.enabled)
        throw conflict(
          "set BERTH_BACKUP_DIR (and BERTH_BACKUP_PASSPHRASE_FILE or BERTH_BACKUP_KEY_FILE) to make backups",
          "backups_not_configured",
        );
      await deps.scheduled.runOnce().catch((err: Error) => {
        // The operator's setup (a secret file, the directory) is what failed: said in one line.
        throw conflict(`the backup failed: ${err.message.split("\n")[0]}`, "backup_failed");
      });
      return reply.status(201).send(await listing());
    },
  );
}
