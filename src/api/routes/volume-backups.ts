// Volume backups (issue 31): back a service's volumes up (an action), list backups with their
// size and state, restore one into the same or another service of the namespace (an action),
// delete one, and keep a service's backup schedule. Namespace access: another namespace's
// backups and services are 404s like missing ones.
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Type } from "typebox";
import type { ActionEngine } from "../../actions/engine.ts";
import { ActionView } from "../../contract/action.ts";
import {
  VolumeBackupCreateBody,
  VolumeBackupScheduleBody,
  VolumeBackupScheduleView,
  VolumeBackupView,
  VolumeRestoreBody,
} from "../../contract/volume-backup.ts";
import { invalidField, notFound } from "../../domain/errors.ts";
import { actionUri, serviceUri } from "../../domain/uri.ts";
import { type VolumeBackups, volumeBackupUri } from "../../ops/volume-backups.ts";
import type { BackupTargetRow } from "../../store/backup-targets.ts";
import { archivesOf } from "../../store/codec.ts";
import type { ServiceRow } from "../../store/services.ts";
import type { Store } from "../../store/store.ts";
import type { VolumeBackupRow, VolumeBackupScheduleRow } from "../../store/volume-backups.ts";
import { ACTION_URI_HEADERS } from "../compat.ts";
import { envelope, listSchema, PAGE_QUERY, pageOf } from "../lists.ts";
import { namespaceOf } from "../namespaces.ts";
import { NsParams, ownObject, UuidParams } from "../objects.ts";
import { callMeta } from "../recorder.ts";
import { nsPaths } from "../routing.ts";
import { actionView } from "./actions.ts";

interface Deps {
  store: Store;
  actions: ActionEngine;
  backups: VolumeBackups;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** Target names by uuid (a handful of rows), for views. */
type Names = Map<string, string>;

export function volumeBackupView(b: VolumeBackupRow, names: Names = new Map()) {
  return {
    uuid: b.uuid,
    resource_uri: volumeBackupUri(b),
    service: serviceUri({ namespace: b.namespace, uuid: b.service_uuid }),
    service_name: b.service_name,
    state: b.state,
    trigger: b.trigger,
    created_datetime: iso(b.created),
    finished_datetime: iso(b.finished),
    size_bytes: Number(b.size_bytes),
    archives: archivesOf(b).map((a) => ({ container_number: a.number, path: a.path, size_bytes: a.bytes })),
    action: b.action_uuid ? actionUri(b.action_uuid) : null,
    error: b.error,
    target: b.target_uuid ? (names.get(b.target_uuid) ?? b.target_uuid) : null,
  };
}

function scheduleView(s: VolumeBackupScheduleRow, names: Names) {
  return {
    service: serviceUri({ namespace: s.namespace, uuid: s.service_uuid }),
    every_hours: s.every_hours,
    keep: s.keep,
    keep_daily: s.keep_daily,
    keep_weekly: s.keep_weekly,
    pause: s.pause === 1,
    pre_command: s.pre_command,
    target: s.target_uuid ? (names.get(s.target_uuid) ?? s.target_uuid) : null,
    next_datetime: iso(Number(s.next_at)),
  };
}

export function volumeBackupRoutes(untyped: FastifyInstance, deps: Deps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { store, actions, backups } = deps;
  const tags = ["services and containers"];

  const serviceOf = async (req: FastifyRequest, uuid: string): Promise<ServiceRow> =>
    ownObject(req, await store.services.findService(uuid), "service", serviceUri);
  const backupOf = async (req: FastifyRequest, uuid: string): Promise<VolumeBackupRow> =>
    ownObject(req, await backups.rows().find(uuid), "volume backup", volumeBackupUri);
  const names = async (): Promise<Names> =>
    new Map((await backups.targets.rows().list()).map((t) => [t.uuid, t.name]));
  const targetNamed = async (name: string | null | undefined): Promise<BackupTargetRow | null> => {
    if (!name) return null;
    const t = await backups.targets.rows().findByName(name);
    if (!t) throw invalidField("target", `names no backup target (${name})`);
    return t;
  };
  const list = async (req: FastifyRequest, query: { limit?: number; offset?: number }, service?: string) => {
    const page = pageOf(query);
    const { rows, total } = await backups.rows().list({ namespace: namespaceOf(req), service }, page);
    const n = await names();
    return envelope(
      req,
      page,
      total,
      rows.map((r) => volumeBackupView(r, n)),
    );
  };

  for (const url of nsPaths("/api/app/v1/{ns}service/:uuid/volumebackup/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary: "List a service's volume backups, newest first",
          params: UuidParams,
          querystring: Type.Object({ ...PAGE_QUERY }),
          response: { 200: listSchema(VolumeBackupView) },
        },
      },
      async (req) => list(req, req.query, (await serviceOf(req, req.params.uuid)).uuid),
    );
    app.post(
      url,
      {
        config: { action: "Service Volume Backup", access: "namespace" },
        schema: {
          tags,
          summary:
            "Back up a service's volumes now (an action): each container paused while read, or a pre-backup command run in it",
          params: UuidParams,
          body: Type.Optional(VolumeBackupCreateBody),
          response: { 202: VolumeBackupView },
        },
      },
      async (req, reply) => {
        const s = await serviceOf(req, req.params.uuid);
        const body = req.body ?? {};
        const { backup, action } = await backups.request(
          s,
          {
            pause: body.pause ?? true,
            preCommand: body.pre_command ?? null,
            keep: body.keep ?? null,
            keepDaily: body.keep_daily ?? 0,
            keepWeekly: body.keep_weekly ?? 0,
            target: await targetNamed(body.target),
            trigger: "user",
            actionUuid: req.actionUuid,
            meta: callMeta(req),
          },
          actions,
        );
        req.audit.recorded = true;
        for (const h of ACTION_URI_HEADERS) reply.header(h, actionUri(action.uuid));
        return reply.status(202).send(volumeBackupView(backup, await names()));
      },
    );
  }

  for (const url of nsPaths("/api/app/v1/{ns}service/:uuid/volumebackupschedule/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary: "Get a service's volume backup schedule",
          params: UuidParams,
          response: { 200: VolumeBackupScheduleView },
        },
      },
      async (req) => {
        const s = await serviceOf(req, req.params.uuid);
        const found = await backups.rows().findSchedule(s.uuid);
        if (!found) throw notFound("volume backup schedule");
        return scheduleView(found, await names());
      },
    );
    app.put(
      url,
      {
        config: { action: "Service Volume Backup Schedule", access: "namespace" },
        schema: {
          tags,
          summary: "Back a service's volumes up every N hours, keeping the newest `keep` backups",
          params: UuidParams,
          body: VolumeBackupScheduleBody,
          response: { 200: VolumeBackupScheduleView },
        },
      },
      async (req) => {
        const s = await serviceOf(req, req.params.uuid);
        const row: VolumeBackupScheduleRow = {
          service_uuid: s.uuid,
          namespace: s.namespace,
          every_hours: req.body.every_hours,
          keep: req.body.keep,
          keep_daily: req.body.keep_daily ?? 0,
          keep_weekly: req.body.keep_weekly ?? 0,
          pause: req.body.pause === false ? 0 : 1,
          pre_command: req.body.pre_command ?? null,
          target_uuid: (await targetNamed(req.body.target))?.uuid ?? null,
          next_at: Date.now() + req.body.every_hours * 3_600_000,
        };
        await backups.rows().putSchedule(row);
        return scheduleView(row, await names());
      },
    );
    app.delete(
      url,
      {
        config: { action: "Service Volume Backup Schedule Delete", access: "namespace" },
        schema: {
          tags,
          summary: "Stop a service's scheduled volume backups",
          params: UuidParams,
          response: { 204: Type.Null() },
        },
      },
      async (req, reply) => {
        const s = await serviceOf(req, req.params.uuid);
        if (!(await backups.rows().findSchedule(s.uuid))) throw notFound("volume backup schedule");
        await backups.rows().removeSchedule(s.uuid);
        return reply.status(204).send(null);
      },
    );
  }

  for (const url of nsPaths("/api/app/v1/{ns}volumebackup/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary: "List the namespace's volume backups, newest first",
          params: NsParams,
          querystring: Type.Object({
            ...PAGE_QUERY,
            service: Type.Optional(
              Type.String({ maxLength: 300, description: "only this service's (URI or uuid)" }),
            ),
          }),
          response: { 200: listSchema(VolumeBackupView) },
        },
      },
      async (req) => {
        const service = req.query.service?.split("/").filter(Boolean).at(-1);
        return list(req, req.query, service);
      },
    );
  }

  for (const url of nsPaths("/api/app/v1/{ns}volumebackup/:uuid/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary: "Get a volume backup",
          params: UuidParams,
          response: { 200: VolumeBackupView },
        },
      },
      async (req) => volumeBackupView(await backupOf(req, req.params.uuid), await names()),
    );
    app.delete(
      url,
      {
        config: { action: "Volume Backup Delete", access: "namespace" },
        schema: {
          tags,
          summary: "Delete a volume backup and its files",
          params: UuidParams,
          response: { 200: VolumeBackupView },
        },
      },
      async (req) => {
        const b = await backupOf(req, req.params.uuid);
        await backups.remove(b);
        return volumeBackupView(b, await names());
      },
    );
  }

  for (const url of nsPaths("/api/app/v1/{ns}volumebackup/:uuid/restore/")) {
    app.post(
      url,
      {
        config: { action: "Service Volume Restore", access: "namespace" },
        schema: {
          tags,
          summary: "Restore a volume backup into the same or another service of the namespace (an action)",
          params: UuidParams,
          body: Type.Optional(VolumeRestoreBody),
          response: { 202: ActionView },
        },
      },
      async (req, reply) => {
        const b = await backupOf(req, req.params.uuid);
        const targetUuid = req.body?.service?.split("/").filter(Boolean).at(-1) ?? b.service_uuid;
        const target = await store.services.findService(targetUuid);
        if (!target || target.namespace !== namespaceOf(req)) throw notFound("service");
        await backups.checkRestore(b, target);
        const a = await store.transaction((tx) =>
          actions.enqueue(tx, {
            uuid: req.actionUuid,
            kind: "service.volume_restore",
            params: { backup: b.uuid, service: target.uuid },
            namespace: target.namespace,
            object: serviceUri(target),
            meta: callMeta(req),
          }),
        );
        req.audit.recorded = true;
        for (const h of ACTION_URI_HEADERS) reply.header(h, actionUri(a.uuid));
        return reply.status(202).send(actionView(a, actions));
      },
    );
  }
}
