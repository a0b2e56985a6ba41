// S3-compatible backup targets (issue 31): an administrator names a bucket on an S3-compatible
// server (endpoint, bucket, prefix, region, access key, secret key, path-style addressing);
// control-plane backups (BERTH_BACKUP_TARGET) and volume backups (`target` in their body or
// schedule) go there. The secret key is sealed in the store (identity/secret-box.ts), never
// answered, logged or written anywhere in clear — a control-plane backup holds only the sealed
// form, inside its own encryption. Objects are `<prefix>control/berth-<time>.backup` and
// `<prefix>volumes/<namespace>/<backup uuid>/<archive>`.
import { badRequest, conflict, notFound } from "../domain/errors.ts";
import type { SecretBox } from "../identity/secret-box.ts";
import type { OutboundPolicy } from "../registry/outbound.ts";
import { type BackupTargetRow, BackupTargetStore } from "../store/backup-targets.ts";
import type { Kernel } from "../store/types.ts";
import { type S3Settings, S3Target, TargetError } from "./s3-target.ts";

export interface BackupTargetInput {
  name: string;
  endpoint: string;
  bucket: string;
  prefix?: string;
  region?: string;
  access_key: string;
  secret_key: string;
  path_style?: boolean;
}

const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** The field a failed connection check points at, by the S3 error code the server answered. */
const CHECKED_FIELD: Record<string, string> = {
  SignatureDoesNotMatch: "secret_key",
  InvalidAccessKeyId: "access_key",
  AccessDenied: "access_key",
  NoSuchBucket: "bucket",
  AuthorizationHeaderMalformed: "region",
};

/** The endpoint as stored (`https://host[:port]`), or a 400 saying what is wrong. */
function endpointOf(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw badRequest("endpoint must be a URL such as https://s3.example.com", [
      { field: "endpoint", problem: "is not a URL" },
    ]);
  }
  const problem =
    url.protocol !== "http:" && url.protocol !== "https:"
      ? "must be http or https"
      : url.username || url.password
        ? "must not carry credentials (give access_key and secret_key)"
        : (url.pathname !== "/" && url.pathname !== "") || url.search || url.hash
          ? "must be the server's address only, without a path (the bucket is its own field)"
          : undefined;
  if (problem) throw badRequest(`endpoint ${problem}`, [{ field: "endpoint", problem }]);
  return url.origin;
}

/** "" or a prefix ending in "/" (`backups` → `backups/`). */
function prefixOf(text: string | undefined): string {
  const p = (text ?? "").replace(/^\/+/, "");
  if (p === "") return "";
  if (p.includes("..") || p.includes("//"))
    throw badRequest("prefix must not contain '..' or '//'", [
      { field: "prefix", problem: "is not a plain key prefix" },
    ]);
  return p.endsWith("/") ? p : `${p}/`;
}

export function backupTargetView(t: BackupTargetRow) {
  return {
    uuid: t.uuid,
    name: t.name,
    resource_uri: `/api/v1.1/backuptargets/${t.name}/`,
    endpoint: t.endpoint,
    bucket: t.bucket,
    prefix: t.prefix,
    region: t.region,
    access_key: t.access_key,
    secret_key_set: true,
    path_style: t.path_style === 1,
    created_datetime: new Date(Number(t.created)).toISOString(),
  };
}

export class BackupTargets {
  constructor(private readonly d: { store: Kernel; box: SecretBox; policy: OutboundPolicy; now(): number }) {}

  rows(s: Kernel = this.d.store): BackupTargetStore {
    return new BackupTargetStore(s);
  }

  get policy(): OutboundPolicy {
    return this.d.policy;
  }

  async create(input: BackupTargetInput): Promise<BackupTargetRow> {
    if (!BUCKET.test(input.bucket))
      throw badRequest("bucket must be an S3 bucket name (3-63 lower-case letters, digits, dots, hyphens)", [
        { field: "bucket", problem: "is not a bucket name" },
      ]);
    const row: BackupTargetRow = {
      uuid: crypto.randomUUID(),
      name: input.name,
      endpoint: endpointOf(input.endpoint),
      bucket: input.bucket,
      prefix: prefixOf(input.prefix),
      region: input.region || "us-east-1",
      access_key: input.access_key,
      sealed_secret: this.d.box.seal(input.secret_key),
      path_style: input.path_style === false ? 0 : 1,
      created: this.d.now(),
    };
    if (await this.rows().findByName(row.name))
      throw conflict(`backup target ${row.name} already exists`, "name_taken");
    await this.check(settingsOf(row, input.secret_key));
    await this.rows().insert(row);
    return row;
  }

  /**
   * A target is kept only once it answered as backups need (S3Target.check), so that a wrong key
   * or bucket shows here and not at the first backup: else a 400 naming the field and the reason.
   */
  private async check(settings: S3Settings): Promise<void> {
    const target = new S3Target(settings, this.d.policy);
    try {
      await target.check();
    } catch (err) {
      if (!(err instanceof TargetError)) throw err;
      const field = (err.s3Code && CHECKED_FIELD[err.s3Code]) || "endpoint";
      const problem = err.message.split(" failed: ").at(-1) ?? err.message;
      throw badRequest(
        `${err.message}; the target was not added`,
        [{ field, problem }],
        "target_check_failed",
      );
    } finally {
      target.close();
    }
  }

  async named(name: string): Promise<BackupTargetRow> {
    const t = await this.rows().findByName(name);
    if (!t) throw notFound("backup target");
    return t;
  }

  async remove(t: BackupTargetRow): Promise<void> {
    if (await this.rows().inUse(t.uuid))
      throw conflict(
        `backup target ${t.name} holds volume backups or is named by a schedule: delete those first`,
        "target_in_use",
      );
    await this.rows().remove(t.uuid);
  }

  /** A client of the target (close it when done). */
  open(t: BackupTargetRow): S3Target {
    return new S3Target(settingsOf(t, this.d.box.open(t.sealed_secret)), this.d.policy);
  }
}

export function settingsOf(t: BackupTargetRow, secretKey: string): S3Settings {
  return {
    name: t.name,
    endpoint: t.endpoint,
    bucket: t.bucket,
    prefix: t.prefix,
    region: t.region,
    accessKey: t.access_key,
    secretKey,
    pathStyle: t.path_style === 1,
  };
}
