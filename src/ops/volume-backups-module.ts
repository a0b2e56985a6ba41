// Volume backups as a capability (ops/volume-backups.ts): their action kinds, routes, and the
// timer that runs due schedules. Files live under `<data>/volume-backups/<backup uuid>/`.
import path from "node:path";
import type { ActionEngine } from "../actions/engine.ts";
import { volumeBackupRoutes } from "../api/routes/volume-backups.ts";
import type { Core, Routes } from "../composition.ts";
import type { EngineSource } from "../nodes/provisioners.ts";
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

export function volumeBackupsModule(core: Core, parts: { actions: ActionEngine; engines: EngineSource }) {
  const { store, clock, config, onError } = core;
  const { actions, engines } = parts;
  const backups = new VolumeBackups({
    store,
    engines,
    clock,
    dir: path.join(config.dataDir, "volume-backups"),
  });
  backups.register(actions);
  const routes: Routes = [(a) => volumeBackupRoutes(a, { store, actions, backups })];
  let timer: NodeJS.Timeout | undefined;
  return {
    backups,
    routes,
    start() {
      timer = setInterval(() => {
        void backups.runSchedules(actions, SCHEDULER).catch(onError("volume backup schedules"));
      }, SCHEDULE_CHECK_MS);
      timer.unref();
    },
    stop() {
      clearInterval(timer);
    },
  };
}
