// S3-compatible backup targets (issue 31, ops/backup-targets.ts), for administrators: list,
// create (the secret key sealed, never answered), get and delete. Volume backups of any namespace
// name a target in their body or schedule; control-plane backups use BERTH_BACKUP_TARGET.
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { BackupTargetCreateBody, BackupTargetView, TargetName } from "../../contract/backup-target.ts";
import { type BackupTargets, backupTargetView } from "../../ops/backup-targets.ts";

const ACCESS = { admin: "only administrators see and configure backup targets" };
const NameParams = Type.Object({ name: TargetName });

export function backupTargetRoutes(untyped: FastifyInstance, deps: { targets: BackupTargets }): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { targets } = deps;
  const tags = ["operations"];
  app.get(
    "/api/v1.1/backuptargets/",
    {
      config: { access: ACCESS },
      schema: {
        tags,
        summary: "The S3-compatible backup targets",
        response: { 200: Type.Object({ objects: Type.Array(BackupTargetView) }) },
      },
    },
    async () => ({ objects: (await targets.rows().list()).map(backupTargetView) }),
  );
  app.post(
    "/api/v1.1/backuptargets/",
    {
      config: { action: "Backup Target Create", access: ACCESS },
      schema: {
        tags,
        summary: "Add an S3-compatible backup target (its secret key is sealed and never shown again)",
        description:
          "Berth first checks the target as backups use it: it lists the bucket, writes a small object below the prefix and deletes it. A target that fails is not added: 400 `target_check_failed`, naming the field (secret_key, access_key, bucket, endpoint) and the server's reason.",
        body: BackupTargetCreateBody,
        response: { 201: BackupTargetView },
      },
    },
    async (req, reply) => reply.status(201).send(backupTargetView(await targets.create(req.body))),
  );
  app.get(
    "/api/v1.1/backuptargets/:name/",
    {
      config: { access: ACCESS },
      schema: {
        tags,
        summary: "Get a backup target",
        params: NameParams,
        response: { 200: BackupTargetView },
      },
    },
    async (req) => backupTargetView(await targets.named(req.params.name)),
  );
  app.delete(
    "/api/v1.1/backuptargets/:name/",
    {
      config: { action: "Backup Target Delete", access: ACCESS },
      schema: {
        tags,
        summary: "Delete a backup target no volume backup or schedule names (its objects stay in the bucket)",
        params: NameParams,
        response: { 204: Type.Null() },
      },
    },
    async (req, reply) => {
      await targets.remove(await targets.named(req.params.name));
      return reply.status(204).send(null);
    },
  );
}
