// Backups as a capability: volume backups (ops/volume-backups.ts: action kinds, routes, the timer
// that runs due schedules; files under `<data>/volume-backups/<backup uuid>/`) and scheduled
// control-plane backups (ops/scheduled-backups.ts, with BERTH_BACKUP_DIR).
import path from "node:path";
import type { ActionEngine } from "../actions/engine.ts";
import { controlBackupRoutes } from "../api/routes/control-backups.ts";
import { volumeBackupRoutes } from "../api/routes/volume-backups.ts";
import type { Core, Routes } from "../composition.ts";
import type { Duties } from "../domain/duties.ts";
import type { EngineSource } from "../nodes/provisioners.ts";
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
  parts: { actions: ActionEngine; engines: EngineSource; duties: Duties },
) {
  const { store, clock, config, onError } = core;
  const { actions, engines, duties } = parts;
  const scheduled = new ScheduledBackups({
    config,
    store,
    clock,
    leads: () => duties.leads("reconcile"),
    onError: onError("scheduled backups"),
  });
  const backups = new VolumeBackups({
    store,
    engines,
    clock,
    dir: path.join(config.dataDir, "volume-backups"),
  });
  backups.register(actions);
  const routes: Routes = [
    (a) => volumeBackupRoutes(a, { store, actions, backups }),
    (a) =>
      controlBackupRoutes(a, {
        scheduled,
        everyHours: config.backups?.everyHours,
        keep: config.backups?.keep,
      }),
  ];
  let timer: NodeJS.Timeout | undefined;
  return {
    backups,
    scheduled,
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
