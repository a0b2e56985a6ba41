// Backups of services' volumes (issue 31): each backup and each restore is an action with its
// log. A backup reads every volume path of every container of the service (its bindings with a
// container path, `volumes_from` aside) through the engine's archive API (drivers, bounded by
// VOLUME_ARCHIVE), consistent: the container paused while it is read (or a pre-backup command run
// in it first), into one tar file per container and path under the backups directory (0600).
// A restore writes each archive into the container of the same rank (by number) of the same or
// another service that has a volume at that path, paused meanwhile. Schedules back a service up
// every N hours; one replica claims each due schedule (store/volume-backups.ts claimSchedule).
// Where the archives are kept, locally or on an S3-compatible target, and how a restore fetches
// and checks them all (size and SHA-256) before writing anything, is ops/volume-archives.ts.
// Retention keeps the newest `keep` successful backups of the service and, with tiers, the
// newest of each of the last N days / weeks (domain/retention.ts).
import fs from "node:fs";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { Type } from "typebox";
import type { ActionEngine } from "../actions/engine.ts";
import type { ActionKind, CallMeta, StepContext } from "../actions/types.ts";
import { ensurePrivateDir } from "../config/private-files.ts";
import { conflict, notFound } from "../domain/errors.ts";
import { describeRetention, retained } from "../domain/retention.ts";
import type { Clock } from "../domain/time.ts";
import { nsUri, serviceUri } from "../domain/uri.ts";
import type { Engine } from "../drivers/engine.ts";
import type { EngineSource } from "../nodes/provisioners.ts";
import type { BackupTargetRow } from "../store/backup-targets.ts";
import { archivesOf, specOf, type VolumeArchive } from "../store/codec.ts";
import type { ContainerRow, ServiceRow } from "../store/services.ts";
import type { ActionRow, Store } from "../store/store.ts";
import { type VolumeBackupRow, VolumeBackupStore } from "../store/volume-backups.ts";
import type { BackupTargets } from "./backup-targets.ts";
import { hashing, VolumeArchives } from "./volume-archives.ts";

export const volumeBackupUri = (b: { namespace: string; uuid: string }) =>
  nsUri("app", b.namespace, "volumebackup", b.uuid);

export interface BackupOptions {
  /** Pause each running container while its volumes are read (default true). */
  pause: boolean;
  /** A shell command run in each running container before its volumes are read; it must exit 0. */
  preCommand: string | null;
  /** Successful backups of the service kept (older ones are removed after this one succeeds). */
  keep: number | null;
  /** Tiers besides `keep`: the newest of each of the last N days / weeks (0: none). */
  keepDaily: number;
  keepWeekly: number;
  /** Where the archives go (null: the data directory). */
  target: BackupTargetRow | null;
}

const BackupParams = Type.Object({
  backup: Type.String(),
  pause: Type.Boolean(),
  pre_command: Type.Union([Type.String(), Type.Null()]),
  keep: Type.Union([Type.Integer(), Type.Null()]),
  keep_daily: Type.Optional(Type.Integer()),
  keep_weekly: Type.Optional(Type.Integer()),
});
const RestoreParams = Type.Object({ backup: Type.String(), service: Type.String() });
interface BackupP {
  backup: string;
  pause: boolean;
  pre_command: string | null;
  keep: number | null;
  keep_daily?: number;
  keep_weekly?: number;
}
interface RestoreP {
  backup: string;
  service: string;
}

/** The volume paths of a service's definition (anonymous volumes and host directories). */
export function volumePaths(s: { spec: string }): string[] {
  return [
    ...new Set(
      specOf(s).bindings.flatMap((b) =>
        b.container_path !== null && b.volumes_from === null ? [b.container_path] : [],
      ),
    ),
  ];
}

const STEP_MS = 2 * 3_600_000;

export class VolumeBackups {
  constructor(
    private readonly d: {
      store: Store;
      engines: EngineSource;
      clock: Clock;
      dir: string;
      targets: BackupTargets;
    },
  ) {
    this.archives = new VolumeArchives({ dir: d.dir, targets: d.targets });
  }

  /** Where the archives are kept (locally or on a target) and how they are fetched back. */
  private readonly archives: VolumeArchives;

  get targets(): BackupTargets {
    return this.d.targets;
  }

  rows(s: Store = this.d.store): VolumeBackupStore {
    return new VolumeBackupStore(s);
  }

  fileOf(b: { uuid: string }, a: { file: string }): string {
    return this.archives.fileOf(b, a);
  }

  register(actions: ActionEngine): void {
    const backup: ActionKind<BackupP> = {
      kind: "service.volume_backup",
      name: "Service Volume Backup",
      params: BackupParams,
      steps: [{ name: "back up volumes", timeoutMs: STEP_MS, run: (ctx) => this.runBackup(ctx) }],
      finish: async (ctx, outcome) => {
        const row = await this.rows().find(ctx.params.backup);
        if (row && row.state === "In progress" && outcome !== "Success")
          await this.rows().update(row.uuid, {
            state: "Failed",
            finished: this.d.clock.now(),
            error: `the backup ${outcome.toLowerCase()}`,
          });
      },
    };
    const restore: ActionKind<RestoreP> = {
      kind: "service.volume_restore",
      name: "Service Volume Restore",
      params: RestoreParams,
      steps: [{ name: "restore volumes", timeoutMs: STEP_MS, run: (ctx) => this.runRestore(ctx) }],
    };
    actions.register(backup as unknown as ActionKind<never>);
    actions.register(restore as unknown as ActionKind<never>);
  }

  /** Records a backup of `service` (In progress) and queues its action, in one transaction. */
  async request(
    service: ServiceRow,
    opts: BackupOptions & { trigger: "user" | "schedule"; actionUuid?: string; meta: CallMeta },
    actions: Pick<ActionEngine, "enqueue">,
  ): Promise<{ backup: VolumeBackupRow; action: ActionRow }> {
    if (volumePaths(service).length === 0)
      throw conflict(
        `service ${service.name} has no volumes to back up (no binding with a container path)`,
        "no_volumes",
      );
    const uuid = crypto.randomUUID();
    return this.d.store.transaction(async (tx) => {
      const backup = await this.rows(tx).insert({
        uuid,
        namespace: service.namespace,
        service_uuid: service.uuid,
        service_name: service.name,
        state: "In progress",
        trigger: opts.trigger,
        created: this.d.clock.now(),
        finished: null,
        size_bytes: 0,
        archives: "[]",
        action_uuid: null,
        error: null,
        target_uuid: opts.target?.uuid ?? null,
      });
      const action = await actions.enqueue(tx, {
        ...(opts.actionUuid ? { uuid: opts.actionUuid } : {}),
        kind: "service.volume_backup",
        params: {
          backup: uuid,
          pause: opts.pause,
          pre_command: opts.preCommand,
          keep: opts.keep,
          keep_daily: opts.keepDaily,
          keep_weekly: opts.keepWeekly,
        },
        namespace: service.namespace,
        object: serviceUri(service),
        meta: opts.meta,
      });
      await this.rows(tx).update(uuid, { action_uuid: action.uuid });
      return { backup: { ...backup, action_uuid: action.uuid }, action };
    });
  }

  /** Checks that `target` can take the backup (a volume at every path), for the API's answer. */
  async checkRestore(b: VolumeBackupRow, target: ServiceRow): Promise<void> {
    if (b.state !== "Success")
      throw conflict(
        `volume backup ${b.uuid} is ${b.state}: only a successful backup restores`,
        "invalid_state",
      );
    const paths = volumePaths(target);
    const missing = [...new Set(archivesOf(b).map((a) => a.path))].filter((p) => !paths.includes(p));
    if (missing.length)
      throw conflict(
        `service ${target.name} has no volume at ${missing.join(", ")}: add a binding with that container path`,
        "no_volumes",
      );
    const live = (await this.d.store.services.containersOfService(target.uuid)).filter(
      (c) => c.engine_id && c.state !== "Terminated",
    );
    if (live.length === 0)
      throw conflict(
        `service ${target.name} has no containers to restore into: start it first`,
        "invalid_state",
      );
  }

  /** Deletes a backup and its archives (on its target too; a target that refuses: 409, nothing removed). */
  async remove(b: VolumeBackupRow): Promise<void> {
    if (b.state === "In progress") throw conflict(`volume backup ${b.uuid} is in progress`, "invalid_state");
    await this.archives.remove(b);
    await this.rows().remove(b.uuid);
  }

  private async containers(serviceUuid: string): Promise<{ c: ContainerRow; engine: Engine }[]> {
    const rows = (await this.d.store.services.containersOfService(serviceUuid))
      .filter((c) => c.engine_id && c.state !== "Terminated")
      .sort((a, b) => a.number - b.number);
    const nodes = await this.d.store.nodes.knownNodes(rows.map((c) => c.node_uuid));
    return rows.flatMap((c) => {
      const node = nodes.get(c.node_uuid);
      return node ? [{ c, engine: this.d.engines.forNode(node) }] : [];
    });
  }

  /** Pauses a running container (or runs the pre-backup command) around `work`. */
  private async consistently<T>(
    ctx: StepContext<unknown>,
    x: { c: ContainerRow; engine: Engine },
    opts: { pause: boolean; preCommand: string | null },
    work: () => Promise<T>,
  ): Promise<T> {
    const running = (await x.engine.inspectContainer(x.c.engine_id!))?.state === "running";
    if (running && opts.preCommand) {
      const session = await x.engine.exec(x.c.engine_id!, {
        cmd: ["sh", "-c", opts.preCommand],
        signal: ctx.signal,
      });
      session.end();
      for await (const _ of session.output) {
        // drained: only the exit code matters
      }
      const code = await session.exitCode;
      if (code !== 0) throw new Error(`the pre-backup command exited ${code} in ${x.c.name}`);
      await ctx.log(`Ran the pre-backup command in ${x.c.name}`);
    }
    const pause = running && opts.pause;
    if (pause) await x.engine.pauseContainer(x.c.engine_id!);
    try {
      return await work();
    } finally {
      if (pause) await x.engine.unpauseContainer(x.c.engine_id!);
    }
  }

  private async runBackup(ctx: StepContext<BackupP>): Promise<void> {
    const b = await this.rows().find(ctx.params.backup);
    if (!b) throw new Error("the backup's record is gone");
    const service = await this.d.store.services.findService(b.service_uuid);
    if (!service) throw new Error("the service is gone");
    const paths = volumePaths(service);
    const dir = this.archives.dirOf(b);
    ensurePrivateDir(dir);
    const archives: VolumeArchive[] = [];
    let size = 0;
    try {
      const containers = await this.containers(service.uuid);
      if (containers.length === 0) throw new Error(`service ${service.name} has no containers`);
      for (const x of containers) {
        await this.consistently(
          ctx,
          x,
          { pause: ctx.params.pause, preCommand: ctx.params.pre_command },
          async () => {
            for (const [i, p] of paths.entries()) {
              const file = `${x.c.number}-${i}.tar`;
              const target = path.join(dir, file);
              const hash = hashing();
              await pipeline(
                await x.engine.readArchive(x.c.engine_id!, p),
                hash,
                fs.createWriteStream(target, { mode: 0o600 }),
              );
              const bytes = fs.statSync(target).size;
              size += bytes;
              archives.push({ number: x.c.number, path: p, file, bytes, sha256: hash.digest });
              await ctx.log(`Backed up ${p} of ${x.c.name} (${bytes} bytes)`);
            }
          },
        );
      }
      if (b.target_uuid) {
        const name = await this.archives.upload(b, archives);
        await ctx.log(`Uploaded ${archives.length} archive(s) to backup target ${name}`);
      }
    } catch (err) {
      await this.archives.forget(b, archives);
      const message = err instanceof Error ? err.message : String(err);
      await this.rows().update(b.uuid, { state: "Failed", finished: this.d.clock.now(), error: message });
      throw err;
    }
    await this.rows().update(b.uuid, {
      state: "Success",
      finished: this.d.clock.now(),
      size_bytes: size,
      archives: JSON.stringify(archives),
    });
    await ctx.log(`Volume backup ${b.uuid}: ${archives.length} archive(s), ${size} bytes`);
    if (ctx.params.keep !== null) await this.retain(ctx, service.uuid);
  }

  /** Retention: the newest `keep`, and the newest of each of the last `keep_daily` days / `keep_weekly` weeks. */
  private async retain(ctx: StepContext<BackupP>, serviceUuid: string): Promise<void> {
    const policy = {
      last: ctx.params.keep ?? 0,
      daily: ctx.params.keep_daily ?? 0,
      weekly: ctx.params.keep_weekly ?? 0,
    };
    const all = await this.rows().successfulOfService(serviceUuid);
    const keep = retained(
      all.map((o) => ({ id: o.uuid, time: Number(o.created) })),
      policy,
    );
    for (const o of all) {
      if (keep.has(o.uuid)) continue;
      try {
        await this.remove(o);
        await ctx.log(
          `Retention (${describeRetention(policy)}): removed volume backup ${o.uuid} of ${new Date(Number(o.created)).toISOString()}`,
        );
      } catch (err) {
        await ctx.log(`Retention: volume backup ${o.uuid} could not be removed: ${(err as Error).message}`);
      }
    }
  }

  private async runRestore(ctx: StepContext<RestoreP>): Promise<void> {
    const b = await this.rows().find(ctx.params.backup);
    if (!b) throw new Error("the backup is gone");
    const target = await this.d.store.services.findService(ctx.params.service);
    if (!target) throw new Error("the service to restore into is gone");
    await this.checkRestore(b, target);
    const containers = await this.containers(target.uuid);
    const archives = archivesOf(b);
    const staging = path.join(this.d.dir, `.restore-${ctx.action.uuid}`);
    try {
      const files = await this.archives.fetchAll(b, staging);
      await ctx.log(`Checked ${files.size} archive(s) of volume backup ${b.uuid}: whole`);
      await this.writeAll(ctx, b, target, containers, archives, files);
    } finally {
      fs.rmSync(staging, { recursive: true, force: true });
    }
  }

  private async writeAll(
    ctx: StepContext<RestoreP>,
    b: VolumeBackupRow,
    target: ServiceRow,
    containers: { c: ContainerRow; engine: Engine }[],
    archives: VolumeArchive[],
    files: Map<string, string>,
  ): Promise<void> {
    const ranks = [...new Set(archives.map((a) => a.number))].sort((x, y) => x - y);
    for (const [rank, number] of ranks.entries()) {
      const x = containers[rank];
      if (!x) {
        await ctx.log(
          `No container of ${target.name} for the archives of container number ${number}: skipped`,
        );
        continue;
      }
      await this.consistently(ctx, x, { pause: true, preCommand: null }, async () => {
        for (const a of archives.filter((a) => a.number === number)) {
          await x.engine.writeArchive(
            x.c.engine_id!,
            path.posix.dirname(a.path),
            fs.createReadStream(files.get(a.file)!),
          );
          await ctx.log(
            `Restored ${a.path} of ${b.service_name} #${number} into ${x.c.name} (${a.bytes} bytes)`,
          );
        }
      });
    }
  }

  /** Runs the schedules due now (one replica claims each); answers how many backups were queued. */
  async runSchedules(actions: Pick<ActionEngine, "enqueue">, meta: CallMeta): Promise<number> {
    const now = this.d.clock.now();
    let queued = 0;
    for (const s of await this.rows().dueSchedules(now)) {
      const next = Math.max(s.next_at + s.every_hours * 3_600_000, now + 60_000);
      if (!(await this.rows().claimSchedule(s.service_uuid, s.next_at, next))) continue;
      const service = await this.d.store.services.findService(s.service_uuid);
      if (!service || service.state === "Terminated") {
        await this.rows().removeSchedule(s.service_uuid);
        continue;
      }
      const target = s.target_uuid ? ((await this.d.targets.rows().find(s.target_uuid)) ?? null) : null;
      await this.request(
        service,
        {
          pause: s.pause === 1,
          preCommand: s.pre_command,
          keep: s.keep,
          keepDaily: s.keep_daily,
          keepWeekly: s.keep_weekly,
          target,
          trigger: "schedule",
          meta,
        },
        actions,
      ).then(
        () => queued++,
        () => undefined,
      );
    }
    return queued;
  }

  notFoundError() {
    return notFound("volume backup");
  }
}
