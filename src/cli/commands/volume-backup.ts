// `berth volume-backup …`: backups of a service's volumes (issue 31): make one now (paused, or
// after a pre-backup command), list them with size and state, restore one into the same or another
// service, delete one, and keep a service's schedule.
import type { Command } from "commander";
import type { VolumeBackup, VolumeBackupCreateBody } from "../../contract/volume-backup.ts";
import { type Ctx, finish } from "../context.ts";
import { CliError } from "../errors.ts";
import { short } from "../output.ts";
import { KINDS, resolve } from "../resolve.ts";
import { quietOption, syncOption, wholeNumber } from "./common.ts";

export function registerVolumeBackup(program: Command, ctx: (cmd: Command) => Ctx): void {
  const vb = program
    .command("volume-backup")
    .description("backups of services' volumes: make, list, restore, delete, schedule");
  const serviceBase = async (c: Ctx, ref: string) => {
    const s = await resolve(c.client, KINDS.service, ref);
    return { service: s, base: `${c.client.collection(KINDS.service.prefix, "service")}${s.uuid}/` };
  };
  const collection = (c: Ctx) => c.client.collection(KINDS.service.prefix, "volumebackup");
  const find = async (c: Ctx, ref: string): Promise<VolumeBackup> => {
    const all =
      (await c.client.get<{ objects?: VolumeBackup[] }>(collection(c), { limit: 1000 })).objects ?? [];
    const matches = all.filter((b) => b.uuid === ref || b.uuid.startsWith(ref));
    if (matches.length !== 1)
      throw new CliError(
        matches.length
          ? `volume backup ${ref} is ambiguous; use more of its uuid`
          : `volume backup ${ref} not found`,
      );
    return matches[0]!;
  };

  vb.command("create <service>")
    .description("back a service's volumes up now; prints the backup's uuid")
    .option("--no-pause", "do not pause the containers while their volumes are read")
    .option("--pre-command <command>", "a shell command run in each running container first (must exit 0)")
    .option("--keep <n>", "keep the newest n successful backups of the service", wholeNumber)
    .option("--keep-daily <n>", "also keep the newest backup of each of the last n days", wholeNumber)
    .option("--keep-weekly <n>", "also keep the newest backup of each of the last n weeks", wholeNumber)
    .option(
      "--target <name>",
      "store it on this backup target (an S3-compatible bucket) rather than the data directory",
    )
    .addOption(syncOption())
    .action(
      async (
        ref: string,
        o: {
          pause: boolean;
          preCommand?: string;
          keep?: number;
          keepDaily?: number;
          keepWeekly?: number;
          target?: string;
          sync?: boolean;
        },
        cmd: Command,
      ) => {
        const c = ctx(cmd);
        const { base } = await serviceBase(c, ref);
        const body: VolumeBackupCreateBody = { pause: o.pause };
        if (o.preCommand) body.pre_command = o.preCommand;
        if (o.keep !== undefined) body.keep = o.keep;
        if (o.keepDaily !== undefined) body.keep_daily = o.keepDaily;
        if (o.keepWeekly !== undefined) body.keep_weekly = o.keepWeekly;
        if (o.target) body.target = o.target;
        const reply = await c.client.request<VolumeBackup>("POST", `${base}volumebackup/`, { body });
        await finish(c, reply, { sync: o.sync, refetch: reply.body.resource_uri });
      },
    );
  vb.command("ls [service]")
    .description("list volume backups (of one service), newest first, with their size and state")
    .addOption(quietOption())
    .action(async (ref: string | undefined, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const path = ref ? `${(await serviceBase(c, ref)).base}volumebackup/` : collection(c);
      c.out.list(await c.client.get<{ objects: VolumeBackup[] }>(path, { limit: 1000 }), [
        { header: "UUID", value: (b) => short(b.uuid) },
        { header: "SERVICE", value: (b) => b.service_name },
        { header: "STATE", value: (b) => b.state },
        { header: "SIZE", value: (b) => String(b.size_bytes) },
        { header: "TRIGGER", value: (b) => b.trigger },
        { header: "CREATED", value: (b) => b.created_datetime ?? "" },
      ]);
    });
  vb.command("restore <backup>")
    .description("restore a backup into its service, or into another one with --into")
    .option("--into <service>", "the service to restore into (it needs a volume at each backed-up path)")
    .addOption(syncOption())
    .action(async (ref: string, o: { into?: string; sync?: boolean }, cmd: Command) => {
      const c = ctx(cmd);
      const b = await find(c, ref);
      const body = o.into ? { service: (await serviceBase(c, o.into)).service.resource_uri } : {};
      const reply = await c.client.request("POST", `${b.resource_uri}restore/`, { body });
      await finish(c, reply, { sync: o.sync });
    });
  vb.command("rm <backup...>")
    .description("delete volume backups and their files")
    .action(async (refs: string[], _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      for (const ref of refs) {
        const b = await find(c, ref);
        await c.client.request("DELETE", b.resource_uri);
        c.out.line(b.uuid);
      }
    });
  vb.command("schedule <service>")
    .description(
      "back a service's volumes up every N hours (--every), keeping the newest --keep; --off stops it",
    )
    .option("--every <hours>", "hours between backups", wholeNumber)
    .option("--keep <n>", "successful backups kept", wholeNumber)
    .option("--keep-daily <n>", "also keep the newest backup of each of the last n days", wholeNumber)
    .option("--keep-weekly <n>", "also keep the newest backup of each of the last n weeks", wholeNumber)
    .option("--target <name>", "store them on this backup target (an S3-compatible bucket)")
    .option("--no-pause", "do not pause the containers while their volumes are read")
    .option("--pre-command <command>", "a shell command run in each running container first")
    .option("--off", "stop the scheduled backups")
    .action(
      async (
        ref: string,
        o: {
          every?: number;
          keep?: number;
          keepDaily?: number;
          keepWeekly?: number;
          target?: string;
          pause: boolean;
          preCommand?: string;
          off?: boolean;
        },
        cmd: Command,
      ) => {
        const c = ctx(cmd);
        const { base } = await serviceBase(c, ref);
        if (o.off) {
          await c.client.request("DELETE", `${base}volumebackupschedule/`);
          return;
        }
        if (o.every === undefined || o.keep === undefined)
          throw new CliError("give --every <hours> and --keep <n> (or --off)", 2);
        const reply = await c.client.request("PUT", `${base}volumebackupschedule/`, {
          body: {
            every_hours: o.every,
            keep: o.keep,
            keep_daily: o.keepDaily ?? 0,
            keep_weekly: o.keepWeekly ?? 0,
            target: o.target ?? null,
            pause: o.pause,
            pre_command: o.preCommand ?? null,
          },
        });
        c.out.done(reply.body);
      },
    );
}

interface ControlBackups {
  enabled: boolean;
  every_hours: number | null;
  keep: number | null;
  objects: {
    name: string;
    size_bytes: number;
    created_datetime: string;
    status: string;
    error: string | null;
  }[];
}

/** `berth control-backup ls|create`: the scheduled control-plane backups (administrators). */
export function registerControlBackup(program: Command, ctx: (cmd: Command) => Ctx): void {
  const cb = program
    .command("control-backup")
    .description("scheduled control-plane backups in BERTH_BACKUP_DIR (administrators)");
  const show = (c: Ctx, listing: ControlBackups) => {
    if (c.out.opts.json) return c.out.json(listing);
    c.out.table(
      [
        { header: "NAME", value: (b: ControlBackups["objects"][number]) => b.name },
        { header: "SIZE", value: (b) => String(b.size_bytes) },
        { header: "STATUS", value: (b) => b.status },
        { header: "CREATED", value: (b) => b.created_datetime },
        { header: "ERROR", value: (b) => b.error ?? "" },
      ],
      listing.objects,
    );
  };
  cb.command("ls")
    .description("list the backups, newest first, with size and status")
    .action(async (_o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      show(c, await c.client.get<ControlBackups>("/api/v1.1/backups/"));
    });
  cb.command("create")
    .description("make a backup now (the retention applies)")
    .action(async (_o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      show(c, (await c.client.request<ControlBackups>("POST", "/api/v1.1/backups/")).body);
    });
}
