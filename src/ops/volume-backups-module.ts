// Backups as a capability: volume backups (ops/volume-backups.ts: action kinds, routes, the timer
// that runs due schedules; files under `<data>/volume-backups/<backup uuid>/`) and scheduled
// control-plane backups (ops/scheduled-backups.ts, with BERTH_BACKUP_DIR or BERTH_BACKUP_TARGET),
// and the S3-compatible targets both may go to (ops/backup-targets.ts), reached through the
// outbound guard with their own allow-list (BERTH_BACKUP_TARGET_ALLOW).
import path from "node:path";
import type { ActionEngine } from "../actions/engine.ts";
import { backupTargetRoutes } from "../api/routes/backup-targets.ts";
import { controlBackupRoutes } from "../api/routes/control-backups.ts";
import { volumeBackupRoutes } from "../api/routes/volume-backups.ts";
import type { Core, Routes } from "../composition.ts";
import type { Duties } from "../domain/duties.ts";
import type { EngineSource } from "../nodes/provisioners.ts";
import type { HostLookup } from "../registry/outbound.ts";
import { BackupTargets } from "./backup-targets.ts";
import { ScheduledBackups } from "./scheduled-backups.ts";
import { VolumeBackups } from "./volume-backups.ts";

const SCHEDULE_CHECK_MS = 60_000;
const SCHEDULER = {
  method: "POST",
  path: "",
  user: "berth",
  userAgent: "berth-volume-backup-schedule",
  ip: "",
  isUserAction: false,
};

export function volumeBackupsModule(
  core: Core,
  parts: { actions: ActionEngine; engines: EngineSource; duties: Duties; resolveHost?: HostLookup },
) {
  const { store, clock, config, onError, box } = core;
  const { actions, engines, duties } = parts;
  const targets = new BackupTargets({
    store,
    box,
    now: () => clock.now(),
    policy: {
      allow: config.backupTargetAllow,
      insecure: [],
      timeoutMs: 10_000,
      lookup: parts.resolveHost,
      allowSetting: "BERTH_BACKUP_TARGET_ALLOW",
    },
  });
  const scheduled = new ScheduledBackups({
    config,
    store,
    clock,
    targets,
    leads: () => duties.leads("reconcile"),
    onError: onError("scheduled backups"),
  });
  const backups = new VolumeBackups({
    store,
    engines,
    clock,
    targets,
    dir: path.join(config.dataDir, "volume-backups"),
  });
  backups.register(actions);
  const routes: Routes = [
    (a) => volumeBackupRoutes(a, { store, actions, backups }),
    (a) => controlBackupRoutes(a, { scheduled }),
    (a) => backupTargetRoutes(a, { targets }),
  ];
  let timer: NodeJS.Timeout | undefined;
  return {
    backups,
    scheduled,
    targets,
    routes,
    start() {
      scheduled.start();
      timer = setInterval(() => {
        void backups.runSchedules(actions, SCHEDULER).catch(onError("volume backup schedules"));
      }, SCHEDULE_CHECK_MS);
      timer.unref();
    },
    stop() {
      scheduled.stop();
      clearInterval(timer);
    },
  };
}
