// One S3-compatible backup target as Berth calls it (issue 31), through the `minio` client: put a
// file, list objects under a prefix, download one into a file, delete one. Berth names the keys
// (`<prefix><kind>/…`), never a user. Every connection goes through the outbound guard
// (registry/outbound.ts): the endpoint's host is resolved by Berth, refused when private unless
// BERTH_BACKUP_TARGET_ALLOW names it, and the socket goes to the address checked. Every call is
// bounded (drivers/bounds.ts BACKUP_TARGET): a call in time, a transfer in idle time, total time
// and bytes; past a bound the connections are destroyed. Errors are one line that names the
// target, never its secret.
import fs from "node:fs";
import http from "node:http";
import https from "node:https";
import { isIP, type LookupFunction } from "node:net";
import type { Duplex } from "node:stream";
import { pipeline } from "node:stream/promises";
import { Client } from "minio";
import { BACKUP_TARGET, boundedBytes, formatMs } from "../drivers/bounds.ts";
import { type OutboundPolicy, OutboundRefused, resolveAllowed } from "../registry/outbound.ts";

export interface S3Settings {
  name: string;
  endpoint: string;
  bucket: string;
  prefix: string;
  region: string;
  accessKey: string;
  secretKey: string;
  pathStyle: boolean;
}

export interface S3Object {
  /** The key below the target's prefix. */
  key: string;
  bytes: number;
  modified: number;
}

/** A target refused or failed a call: one line, naming the target and what to do. */
export class TargetError extends Error {
  constructor(
    message: string,
    /** The S3 error code the server answered (SignatureDoesNotMatch, NoSuchBucket…), if any. */
    readonly s3Code?: string,
  ) {
    super(message);
  }
}

/** The object a connection check writes and deletes again, below the target's prefix. */
export const CHECK_KEY = ".berth-check";

const HINTS: Record<string, string> = {
  SignatureDoesNotMatch: "its secret key is wrong",
  InvalidAccessKeyId: "its access key is unknown",
  AccessDenied: "the keys may not do this",
  NoSuchBucket: "the bucket does not exist",
  NoSuchKey: "no such object",
  NotFound: "no such object",
};

type Limits = typeof BACKUP_TARGET;

/** An agent whose sockets go to the address the guard checked and die after `idleMs` of silence. */
function guardedAgent(secure: boolean, policy: OutboundPolicy, idleMs: number): http.Agent {
  const lookup = (
    hostname: string,
    options: { all?: boolean },
    cb: (err: Error | null, address?: unknown, family?: number) => void,
  ) => {
    resolveAllowed(policy, hostname.replace(/^\[|\]$/g, "")).then(
      (a) => (options.all ? cb(null, [a]) : cb(null, a.address, a.family)),
      (err: Error) => cb(err),
    );
  };
  const Base = secure ? https.Agent : http.Agent;
  const agent = new Base({ keepAlive: true, maxSockets: 4 });
  const create = agent.createConnection.bind(agent);
  agent.createConnection = ((opts: object, cb?: (err: Error | null, s: Duplex) => void) => {
    const socket = create({ ...opts, lookup: lookup as unknown as LookupFunction }, cb) as Duplex & {
      setTimeout(ms: number, f: () => void): void;
    };
    socket.setTimeout(idleMs, () =>
      socket.destroy(new Error(`said nothing for ${formatMs(idleMs)}; Berth gave up`)),
    );
    return socket;
  }) as typeof agent.createConnection;
  return agent;
}

export class S3Target {
  private readonly client: Client;
  private readonly agent: http.Agent;
  private readonly root: string;

  constructor(
    readonly settings: S3Settings,
    private readonly policy: OutboundPolicy,
    private readonly limits: Limits = BACKUP_TARGET,
  ) {
    const url = new URL(settings.endpoint);
    const secure = url.protocol === "https:";
    this.agent = guardedAgent(secure, policy, limits.idleMs);
    this.client = new Client({
      endPoint: url.hostname.replace(/^\[|\]$/g, ""),
      port: url.port ? Number(url.port) : secure ? 443 : 80,
      useSSL: secure,
      accessKey: settings.accessKey,
      secretKey: settings.secretKey,
      region: settings.region,
      pathStyle: settings.pathStyle,
      transportAgent: this.agent,
      retryOptions: { disableRetry: true },
    });
    this.root = settings.prefix;
  }

  /** Closes the target's connections. */
  close(): void {
    this.agent.destroy();
  }

  private fail(what: string, thrown: unknown): TargetError {
    // A connection's lookup refusal may come wrapped (AggregateError of the address attempts).
    let err = thrown;
    while (err instanceof AggregateError && err.errors.length > 0) err = err.errors[0];
    const e = err as { code?: string; message?: string };
    if (err instanceof OutboundRefused)
      return new TargetError(`backup target ${this.settings.name}: ${e.message}`);
    const hint = e.code ? HINTS[e.code] : undefined;
    const first = (e.message ?? String(err)).split("\n")[0]!;
    return new TargetError(
      `backup target ${this.settings.name} (${this.settings.endpoint}, bucket ${this.settings.bucket}): ${what} failed: ${hint ? `${hint} (${e.code})` : first}`,
      e.code,
    );
  }

  /** Runs one call within `ms`; past it the connections are destroyed. */
  private async bounded<T>(what: string, ms: number, work: () => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    try {
      // Node connects to an address literal without a lookup: the guard judges it here first.
      const host = new URL(this.settings.endpoint).hostname.replace(/^\[|\]$/g, "");
      if (isIP(host)) await resolveAllowed(this.policy, host);
      return await Promise.race([
        work(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            this.agent.destroy();
            reject(new Error(`did not finish within ${formatMs(ms)}`));
          }, ms);
        }),
      ]);
    } catch (err) {
      throw this.fail(what, err);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Checks that backups can go there: the bucket is listed (the endpoint answers, the keys and
   * their signature are accepted, the bucket exists), then a small object is written below the
   * prefix and deleted (the keys may write and delete).
   */
  async check(): Promise<void> {
    await this.bounded("checking the bucket", this.limits.callMs, async () => {
      const stream = this.client.listObjectsV2(this.settings.bucket, this.root, false);
      for await (const _ of stream) {
        stream.destroy();
        break;
      }
      const probe = Buffer.from("written by Berth to check this backup target; safe to delete\n");
      await this.client.putObject(this.settings.bucket, this.root + CHECK_KEY, probe, probe.length);
      await this.client.removeObject(this.settings.bucket, this.root + CHECK_KEY);
    });
  }

  /** Uploads a file as `key`; checks the stored object's size. */
  async put(key: string, file: string): Promise<number> {
    const bytes = fs.statSync(file).size;
    return this.bounded(`uploading ${key}`, this.limits.totalMs, async () => {
      await this.client.putObject(this.settings.bucket, this.root + key, fs.createReadStream(file), bytes);
      const stat = await this.client.statObject(this.settings.bucket, this.root + key);
      if (stat.size !== bytes) throw new Error(`stored ${stat.size} of ${bytes} bytes`);
      return bytes;
    });
  }

  /** The objects under `sub` (below the prefix), at most BACKUP_TARGET.listEntries. */
  async list(sub: string): Promise<S3Object[]> {
    return this.bounded(`listing ${sub}`, this.limits.callMs, async () => {
      const out: S3Object[] = [];
      const stream = this.client.listObjectsV2(this.settings.bucket, this.root + sub, true);
      for await (const item of stream) {
        if (!item.name) continue;
        out.push({
          key: item.name.slice(this.root.length),
          bytes: item.size,
          modified: item.lastModified.getTime(),
        });
        if (out.length >= this.limits.listEntries) {
          stream.destroy();
          break;
        }
      }
      return out;
    });
  }

  /**
   * Downloads `key` into `file` (created, never overwritten), at most `expected` bytes when given
   * (else the object's size): a shorter or longer object is refused and the file removed.
   */
  async download(key: string, file: string, expected?: number): Promise<number> {
    return this.bounded(`downloading ${key}`, this.limits.totalMs, async () => {
      const stat = await this.client.statObject(this.settings.bucket, this.root + key);
      const want = expected ?? stat.size;
      if (want > this.limits.bytes || stat.size !== want)
        throw new Error(
          `${key} holds ${stat.size} bytes, ${want > this.limits.bytes ? "more than Berth reads" : `not the ${want} recorded`}`,
        );
      const body = await this.client.getObject(this.settings.bucket, this.root + key);
      try {
        await pipeline(
          boundedBytes(body, { ...this.limits, bytes: want }, `${key} of ${this.settings.name}`),
          fs.createWriteStream(file, { mode: 0o600, flags: "wx" }),
        );
        const got = fs.statSync(file).size;
        if (got !== want) throw new Error(`${key} ended after ${got} of ${want} bytes`);
        return got;
      } catch (err) {
        fs.rmSync(file, { force: true });
        throw err;
      }
    });
  }

  async remove(key: string): Promise<void> {
    await this.bounded(`deleting ${key}`, this.limits.callMs, () =>
      this.client.removeObject(this.settings.bucket, this.root + key),
    );
  }
}
