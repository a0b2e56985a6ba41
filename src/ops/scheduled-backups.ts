// Scheduled control-plane backups (issue 31): with BERTH_BACKUP_DIR or BERTH_BACKUP_TARGET set,
// every BERTH_BACKUP_EVERY_HOURS the replica leading the reconcile job writes a sealed backup
// (backup.ts) named `berth-<time>.backup` into that directory, or uploads it to the S3 target as
// `<prefix>control/berth-<time>.backup` (ops/backup-targets.ts), then applies the retention: the
// newest BERTH_BACKUP_KEEP, and the newest of each of the last BERTH_BACKUP_KEEP_DAILY days and
// BERTH_BACKUP_KEEP_WEEKLY weeks (domain/retention.ts); the others are deleted. The last outcome
// is a control fact; the list (name, size, time, status) is answered by GET /api/v1.1/backups/ to
// administrators.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadBackupSecret } from "../config/backup-secret.ts";
import type { BackupSettings } from "../config/backups.ts";
import type { Config } from "../config/index.ts";
import { ensurePrivateDir } from "../config/private-files.ts";
import { retained } from "../domain/retention.ts";
import type { Clock } from "../domain/time.ts";
import type { Store } from "../store/store.ts";
import { backupControlPlane } from "./backup.ts";
import type { BackupTargets } from "./backup-targets.ts";
import type { S3Target } from "./s3-target.ts";

const NAME = /^berth-(\d{8}T\d{6}(?:\d{3})?Z)\.backup$/;
const LAST_FACT = "control_backup_last";
const CHECK_MS = 60_000;
/** Where control-plane backups live on an S3 target, below its prefix. */
export const CONTROL_PREFIX = "control/";

/** The time in a backup's name (`berth-20261127T163000123Z.backup`), ISO 8601. */
export function timeOfBackupName(name: string): string | undefined {
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

/** The backups of one place (a directory or an S3 target): list, add a file, delete one. */
interface Place {
  list(): Promise<{ name: string; bytes: number }[]>;
  add(name: string, file: string): Promise<void>;
  remove(name: string): Promise<void>;
  close(): void;
}

function dirPlace(dir: string): Place {
  return {
    list: async () =>
      fs.existsSync(dir)
        ? fs.readdirSync(dir).map((name) => ({ name, bytes: fs.statSync(path.join(dir, name)).size }))
        : [],
    add: async () => undefined, // written in place
    remove: async (name) => fs.rmSync(path.join(dir, name), { force: true }),
    close: () => undefined,
  };
}

function s3Place(target: S3Target): Place {
  return {
    list: async () =>
      (await target.list(CONTROL_PREFIX)).map((o) => ({
        name: o.key.slice(CONTROL_PREFIX.length),
        bytes: o.bytes,
      })),
    add: async (name, file) => {
      await target.put(CONTROL_PREFIX + name, file);
    },
    remove: (name) => target.remove(CONTROL_PREFIX + name),
    close: () => target.close(),
  };
}

export class ScheduledBackups {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly d: {
      config: Config;
      store: Store;
      clock: Clock;
      targets: BackupTargets;
      /** Whether this replica runs the schedule now (the reconcile job's leader). */
      leads(): boolean;
      onError(err: unknown): void;
    },
  ) {}

  get enabled(): boolean {
    return this.d.config.backups !== undefined;
  }

  get settings(): BackupSettings | undefined {
    return this.d.config.backups;
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
    const last = (await this.entries().catch(() => [])).find((e) => e.status === "Success");
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

  private async place(): Promise<Place> {
    const b = this.d.config.backups!;
    if (b.target) return s3Place(this.d.targets.open(await this.d.targets.named(b.target)));
    return dirPlace(b.dir!);
  }

  private async backup(): Promise<void> {
    const b = this.d.config.backups!;
    const at = new Date(this.d.clock.now()).toISOString().replace(/[-:]/g, "").replace(".", "");
    const name = `berth-${at}.backup`;
    let place: Place | undefined;
    const scratch = b.target ? fs.mkdtempSync(path.join(os.tmpdir(), "berth-upload-")) : undefined;
    try {
      place = await this.place().catch((err: Error) => {
        throw new Error(`BERTH_BACKUP_TARGET names ${b.target}: ${err.message}`);
      });
      if (!scratch) ensurePrivateDir(b.dir!);
      const file = path.join(scratch ?? b.dir!, name);
      await backupControlPlane({ config: this.d.config, file, secret: loadBackupSecret(b.secretFiles) });
      await place.add(name, file);
      await this.d.store.replicas.putFact(LAST_FACT, `${name} Success `);
      const all = await this.entriesOf(place);
      const keep = retained(
        all.map((e) => ({ id: e.name, time: Date.parse(e.created_datetime) })),
        { last: b.keep, daily: b.keepDaily, weekly: b.keepWeekly },
      );
      for (const old of all) if (!keep.has(old.name)) await place.remove(old.name);
    } catch (err) {
      const message = (err instanceof Error ? err.message : String(err)).split("\n")[0]!;
      await this.d.store.replicas.putFact(LAST_FACT, `${name} Failed ${message}`);
      throw err;
    } finally {
      place?.close();
      if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
    }
  }

  private async entriesOf(place: Place): Promise<ControlBackupEntry[]> {
    return (await place.list())
      .flatMap(({ name, bytes }) => {
        const iso = timeOfBackupName(name);
        if (!iso) return [];
        return [{ name, size_bytes: bytes, created_datetime: iso, status: "Success" as const, error: null }];
      })
      .sort((x, y) => y.name.localeCompare(x.name));
  }

  /** The backups in the directory or on the target, newest first. */
  async entries(): Promise<ControlBackupEntry[]> {
    if (!this.enabled) return [];
    const place = await this.place();
    try {
      return await this.entriesOf(place);
    } finally {
      place.close();
    }
  }

  /**
   * The entries, with the last attempt when it failed (it left no file), and why the place could
   * not be listed when it could not (a target that refuses its keys, or does not answer).
   */
  async list(): Promise<{ objects: ControlBackupEntry[]; error: string | null }> {
    let error: string | null = null;
    const out: ControlBackupEntry[] = await this.entries().catch((err: Error) => {
      error = err.message.split("\n")[0]!;
      return [];
    });
    const last = await this.d.store.replicas.findFact(LAST_FACT);
    const [name, status, ...rest] = (last ?? "").split(" ");
    if (name && status === "Failed")
      out.unshift({
        name,
        size_bytes: 0,
        created_datetime: timeOfBackupName(name) ?? "",
        status: "Failed",
        error: rest.join(" "),
      });
    return { objects: out, error };
  }
}
