// Where a volume backup's archives are kept (issue 31): under the backups directory
// (`<dir>/<backup uuid>/<file>`, 0600), or on the backup's S3-compatible target
// (ops/backup-targets.ts) as `<prefix>volumes/<namespace>/<backup uuid>/<file>`, the local copies
// removed once uploaded. Every archive's SHA-256 is recorded as it is written; `fetchAll` gives
// every archive of a backup as a checked local file (size and SHA-256), or an error naming the
// first that is not whole, so that a restore writes nothing unless all of them are. Split from
// ops/volume-backups.ts (the backup and restore steps), which calls these.
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { Transform } from "node:stream";
import { ensurePrivateDir } from "../config/private-files.ts";
import { conflict } from "../domain/errors.ts";
import { archivesOf, type VolumeArchive } from "../store/codec.ts";
import type { VolumeBackupRow } from "../store/volume-backups.ts";
import type { BackupTargets } from "./backup-targets.ts";
import { type S3Target, TargetError } from "./s3-target.ts";

/** The key of an archive on a target, below its prefix. */
const objectKey = (b: { namespace: string; uuid: string }, file: string) =>
  `volumes/${b.namespace}/${b.uuid}/${file}`;

/** Passes bytes on and hashes them (SHA-256, hex in `digest` once they end). */
export function hashing(): Transform & { digest: string } {
  const hash = createHash("sha256");
  const t = new Transform({
    transform(chunk: Buffer, _e, done) {
      hash.update(chunk);
      done(null, chunk);
    },
    flush(done) {
      t.digest = hash.digest("hex");
      done();
    },
  }) as Transform & { digest: string };
  return t;
}

function sha256Of(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash("sha256");
    fs.createReadStream(file)
      .on("data", (c) => hash.update(c))
      .on("end", () => resolve(hash.digest("hex")))
      .on("error", reject);
  });
}

export class VolumeArchives {
  constructor(private readonly d: { dir: string; targets: BackupTargets }) {}

  /** The local directory of a backup's archives (while written, or kept when it has no target). */
  dirOf(b: { uuid: string }): string {
    return path.join(this.d.dir, b.uuid);
  }

  fileOf(b: { uuid: string }, a: { file: string }): string {
    return path.join(this.dirOf(b), a.file);
  }

  /** Uploads the archives to the backup's target, then removes the local copies; answers its name. */
  async upload(b: VolumeBackupRow, archives: VolumeArchive[]): Promise<string> {
    const t = await this.d.targets.rows().find(b.target_uuid!);
    if (!t) throw new Error("the backup target is gone");
    const target = this.d.targets.open(t);
    try {
      for (const a of archives) await target.put(objectKey(b, a.file), this.fileOf(b, a));
    } finally {
      target.close();
    }
    fs.rmSync(this.dirOf(b), { recursive: true, force: true });
    return t.name;
  }

  /** After a failed backup, best effort: no objects left on its target, no local copies. */
  async forget(b: VolumeBackupRow, archives: VolumeArchive[]): Promise<void> {
    const t = b.target_uuid ? await this.d.targets.rows().find(b.target_uuid) : undefined;
    if (t) {
      const target = this.d.targets.open(t);
      try {
        for (const a of archives) await target.remove(objectKey(b, a.file)).catch(() => undefined);
      } finally {
        target.close();
      }
    }
    fs.rmSync(this.dirOf(b), { recursive: true, force: true });
  }

  /** Deletes a backup's archives, on its target too (a target that refuses: 409, nothing removed). */
  async remove(b: VolumeBackupRow): Promise<void> {
    if (b.target_uuid) {
      const t = await this.d.targets.rows().find(b.target_uuid);
      if (t) {
        const target = this.d.targets.open(t);
        try {
          for (const a of archivesOf(b)) await target.remove(objectKey(b, a.file));
        } catch (err) {
          throw conflict((err as Error).message, "target_failed");
        } finally {
          target.close();
        }
      }
    }
    fs.rmSync(this.dirOf(b), { recursive: true, force: true });
  }

  /**
   * Every archive of the backup as a checked local file (downloaded from its target into
   * `staging`), or an error naming the first that is not whole: nothing is written before.
   */
  async fetchAll(b: VolumeBackupRow, staging: string): Promise<Map<string, string>> {
    const files = new Map<string, string>();
    let target: S3Target | undefined;
    try {
      if (b.target_uuid) {
        const t = await this.d.targets.rows().find(b.target_uuid);
        if (!t) throw new Error("the backup target holding this backup is gone");
        target = this.d.targets.open(t);
        ensurePrivateDir(staging);
      }
      for (const a of archivesOf(b)) {
        const file = target ? path.join(staging, a.file) : this.fileOf(b, a);
        if (target) await target.download(objectKey(b, a.file), file, a.bytes);
        else if (!fs.existsSync(file) || fs.statSync(file).size !== a.bytes)
          throw new Error(`archive ${a.file} of volume backup ${b.uuid} is missing or not ${a.bytes} bytes`);
        if (a.sha256 && (await sha256Of(file)) !== a.sha256)
          throw new Error(`archive ${a.file} of volume backup ${b.uuid} is corrupted (its SHA-256 differs)`);
        files.set(a.file, file);
      }
      return files;
    } catch (err) {
      if (err instanceof TargetError) throw new Error(err.message);
      throw err;
    } finally {
      target?.close();
    }
  }
}
