// Scheduled control-plane backups (issue 31): with BERTH_BACKUP_DIR set, every
// BERTH_BACKUP_EVERY_HOURS the replica leading the reconcile job writes a sealed backup
// (backup.ts) named `berth-<time>.backup` into that directory, then keeps the newest
// BERTH_BACKUP_KEEP of them (older ones are deleted). The last outcome is a control fact; the
// list (name, size, time, status) is answered by GET /api/v1.1/backups/ to administrators.
import fs from "node:fs";
import path from "node:path";
import { loadBackupSecret } from "../config/backup-secret.ts";
import type { Config } from "../config/index.ts";
import { ensurePrivateDir } from "../config/private-files.ts";
import type { Clock } from "../domain/time.ts";
import type { Store } from "../store/store.ts";
import { backupControlPlane } from "./backup.ts";

const NAME = /^berth-(\d{8}T\d{6}(?:\d{3})?Z)\.backup$/;
const LAST_FACT = "control_backup_last";
const CHECK_MS = 60_000;

/** The time in a backup's name (`berth-20261127T163000123Z.backup`), ISO 8601. */
function timeOf(name: string): string | undefined {
  const t = NAME.exec(name)?.[1];
  if (!t) return undefined;
  return `${t.slice(0, 4)}-${t.slice(4, 6)}-${t.slice(6, 8)}T${t.slice(9, 11)}:${t.slice(11, 13)}:${t.slice(13, 15)}.${t.slice(15, 18) || "000"}Z`;
}

export interface ControlBackupEntry {
  name: string;
  size_bytes: number;
  created_datetime: string;
  status: "Success" | "Failed";
  error: string | null;
}

export class ScheduledBackups {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly d: {
      config: Config;
      store: Store;
      clock: Clock;
      /** Whether this replica runs the schedule now (the reconcile job's leader). */
      leads(): boolean;
      onError(err: unknown): void;
    },
  ) {}

  get enabled(): boolean {
    return this.d.config.backups !== undefined;
  }

  start(): void {
    if (!this.enabled) return;
    this.timer = setInterval(() => void this.tick(), CHECK_MS);
    this.timer.unref();
    void this.tick();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async tick(): Promise<void> {
    if (this.running || !this.d.leads()) return;
    const last = this.entries().find((e) => e.status === "Success");
    const everyMs = this.d.config.backups!.everyHours * 3_600_000;
    if (last && this.d.clock.now() - Date.parse(last.created_datetime) < everyMs) return;
    await this.runOnce().catch((err) => this.d.onError(err));
  }

  /** Makes one backup now and applies the retention; resolves when both are done. */
  runOnce(): Promise<void> {
    this.running ??= this.backup().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async backup(): Promise<void> {
    const b = this.d.config.backups!;
    ensurePrivateDir(b.dir);
    const at = new Date(this.d.clock.now()).toISOString().replace(/[-:]/g, "").replace(".", "");
    const name = `berth-${at}.backup`;
    try {
      await backupControlPlane({
        config: this.d.config,
        file: path.join(b.dir, name),
        secret: loadBackupSecret(b.secretFiles),
      });
      await this.d.store.replicas.putFact(LAST_FACT, `${name} Success `);
    } catch (err) {
      const message = (err instanceof Error ? err.message : String(err)).split("\n")[0]!;
      await this.d.store.replicas.putFact(LAST_FACT, `${name} Failed ${message}`);
      throw err;
    }
    for (const old of this.entries().slice(b.keep)) fs.rmSync(path.join(b.dir, old.name), { force: true });
  }

  /** The backups in the directory, newest first. */
  entries(): ControlBackupEntry[] {
    const b = this.d.config.backups;
    if (!b || !fs.existsSync(b.dir)) return [];
    return fs
      .readdirSync(b.dir)
      .flatMap((name) => {
        const iso = timeOf(name);
        if (!iso) return [];
        return [
          {
            name,
            size_bytes: fs.statSync(path.join(b.dir, name)).size,
            created_datetime: iso,
            status: "Success" as const,
            error: null,
          },
        ];
      })
      .sort((x, y) => y.name.localeCompare(x.name));
  }

  /** The entries, with the last attempt when it failed (it left no file). */
  async list(): Promise<ControlBackupEntry[]> {
    const out = this.entries();
    const last = await this.d.store.replicas.findFact(LAST_FACT);
    const [name, status, ...rest] = (last ?? "").split(" ");
    if (name && status === "Failed")
      out.unshift({
        name,
        size_bytes: 0,
        created_datetime: timeOf(name) ?? "",
        status: "Failed",
        error: rest.join(" "),
      });
    return out;
  }
}
