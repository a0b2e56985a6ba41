// The backup file (issue 31): named entries (the database, the key file, local nodes' records)
// sealed with a secret the operator gives, and a checksum over the whole file.
//
//   BERTH-BACKUP 2\n
//   {header: dialect, time, how the secret is given, scrypt parameters and salt, IV, sizes}\n
//   AES-256-GCM ciphertext of: one JSON line naming the entries and their sizes, then their bytes
//   the 16-byte GCM tag
//   \nBERTH-END sha256=<64 hex digits over every byte before this line>\n
//
// The key is scrypt(secret, salt): the secret (a passphrase or the bytes of a key file) is never
// in the file, nor is anything of the contents in clear. Reading checks, before anything is
// decrypted: the end line is there (else the file is truncated), the checksum holds (else it is
// corrupted), the sizes add up; the GCM tag (the header is its additional data) then tells a wrong
// secret. Entries are written into a staging directory only after the tag has been checked.
import { createCipheriv, createDecipheriv, createHash, randomBytes, scrypt } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import type { BackupSecret } from "../config/backup-secret.ts";

export const MAGIC_V1 = "BERTH-BACKUP 1";
export const MAGIC = "BERTH-BACKUP 2";
const MAX_HEADER_BYTES = 64 * 1024;
const TAG_BYTES = 16;
const END_PREFIX = "\nBERTH-END sha256=";
const END_BYTES = END_PREFIX.length + 64 + 1;
/** scrypt's cost: about 32 MiB and a tenth of a second, once per backup or restore. */
const SCRYPT = { N: 1 << 15, r: 8, p: 1 } as const;

export class BackupError extends Error {}

export interface SealedHeader {
  dialect: "sqlite" | "postgres";
  createdAt: string;
  secret: BackupSecret["kind"];
  kdf: { name: "scrypt"; N: number; r: number; p: number; salt: string };
  iv: string;
  /** Bytes of the ciphertext (as many as the plaintext). */
  bytes: number;
  /** Whether the entries hold the data directory's key file (checked against the target before decrypting). */
  keyFile: boolean;
}

export interface Entry {
  name: string;
  /** A file whose bytes are the entry's. */
  file: string;
}

interface Manifest {
  entries: { name: string; bytes: number }[];
}

function deriveKey(secret: BackupSecret, kdf: SealedHeader["kdf"]): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(
      secret.bytes,
      Buffer.from(kdf.salt, "base64"),
      32,
      { N: kdf.N, r: kdf.r, p: kdf.p, maxmem: 256 * kdf.N * kdf.r },
      (err, key) =>
        err ? reject(new BackupError(`the backup's key cannot be derived: ${err.message}`)) : resolve(key),
    ),
  );
}

/** An entry's name is a relative path without `..`, so it lands inside the staging directory. */
function checkName(name: string): string {
  const parts = name.split("/");
  if (!name || name.startsWith("/") || parts.some((p) => p === "" || p === "." || p === ".."))
    throw new BackupError(`the backup names an entry outside its data: "${name}"`);
  return name;
}

/** Writes `entries` sealed into `file` (through `file.partial`, renamed when complete; 0600). */
export async function writeSealed(opts: {
  file: string;
  dialect: SealedHeader["dialect"];
  createdAt: string;
  secret: BackupSecret;
  entries: Entry[];
}): Promise<SealedHeader> {
  const names = opts.entries.map((e) => e.name);
  const manifest: Manifest = {
    entries: opts.entries.map((e) => ({ name: checkName(e.name), bytes: fs.statSync(e.file).size })),
  };
  const manifestLine = Buffer.from(`${JSON.stringify(manifest)}\n`);
  const bytes = manifestLine.length + manifest.entries.reduce((n, e) => n + e.bytes, 0);
  const kdf = { name: "scrypt" as const, ...SCRYPT, salt: randomBytes(16).toString("base64") };
  const iv = randomBytes(12);
  const header: SealedHeader = {
    dialect: opts.dialect,
    createdAt: opts.createdAt,
    secret: opts.secret.kind,
    kdf,
    iv: iv.toString("base64"),
    bytes,
    keyFile: names.includes("secret.key"),
  };
  const headerBytes = Buffer.from(`${MAGIC}\n${JSON.stringify(header)}\n`);
  const key = await deriveKey(opts.secret, kdf);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  cipher.setAAD(headerBytes);
  const partial = `${opts.file}.partial`;
  fs.mkdirSync(path.dirname(path.resolve(opts.file)), { recursive: true });
  // A partial file a crash left behind keeps its mode when truncated: start from a new one.
  fs.rmSync(partial, { force: true });
  const fd = fs.openSync(partial, "wx", 0o600);
  const hash = createHash("sha256");
  const put = (b: Buffer) => {
    if (b.length === 0) return;
    hash.update(b);
    let off = 0;
    while (off < b.length) off += fs.writeSync(fd, b, off);
  };
  try {
    put(headerBytes);
    put(cipher.update(manifestLine));
    const chunk = Buffer.alloc(1 << 20);
    for (const [i, e] of opts.entries.entries()) {
      const src = fs.openSync(e.file, "r");
      try {
        let left = manifest.entries[i]!.bytes;
        while (left > 0) {
          const n = fs.readSync(src, chunk, 0, Math.min(chunk.length, left), null);
          if (n === 0) throw new BackupError(`${e.file} shrank while it was being backed up`);
          put(cipher.update(chunk.subarray(0, n)));
          left -= n;
        }
      } finally {
        fs.closeSync(src);
      }
    }
    put(cipher.final());
    put(cipher.getAuthTag());
    const end = Buffer.from(`${END_PREFIX}${hash.digest("hex")}\n`);
    let off = 0;
    while (off < end.length) off += fs.writeSync(fd, end, off);
    fs.fsyncSync(fd);
  } catch (err) {
    fs.closeSync(fd);
    fs.rmSync(partial, { force: true });
    throw err;
  }
  fs.closeSync(fd);
  fs.renameSync(partial, opts.file);
  return header;
}

/** What a backup file says of itself: its version and header, and where the ciphertext begins. */
export type FileHead =
  | {
      version: 1;
      header: { dialect: "sqlite" | "postgres"; createdAt: string; keyFile: string | null };
      offset: number;
    }
  | { version: 2; header: SealedHeader; headerBytes: Buffer; offset: number };

/** Reads the header lines (no secret needed): refuses what is not a Berth backup. */
export function readHead(file: string): FileHead {
  let fd: number;
  try {
    fd = fs.openSync(file, "r");
  } catch (err) {
    throw new BackupError(`${file} cannot be read: ${(err as Error).message}`);
  }
  try {
    const buf = Buffer.alloc(MAX_HEADER_BYTES);
    const n = fs.readSync(fd, buf, 0, buf.length, 0);
    const text = buf.subarray(0, n).toString("latin1");
    const first = text.indexOf("\n");
    const magic = first < 0 ? text : text.slice(0, first);
    if (magic !== MAGIC && magic !== MAGIC_V1)
      throw new BackupError(`${file} is not a Berth backup (it should begin with "${MAGIC}")`);
    const second = text.indexOf("\n", first + 1);
    if (second < 0) throw new BackupError(`${file} is truncated: its header is incomplete`);
    let header: Record<string, unknown>;
    try {
      header = JSON.parse(buf.subarray(first + 1, second).toString("utf8")) as Record<string, unknown>;
    } catch {
      throw new BackupError(`${file} is corrupted: its header is not readable`);
    }
    if (header.dialect !== "sqlite" && header.dialect !== "postgres")
      throw new BackupError(`${file} is corrupted: unknown database kind "${String(header.dialect)}"`);
    if (magic === MAGIC_V1)
      return {
        version: 1,
        header: header as FileHead["header"] & { keyFile: string | null },
        offset: second + 1,
      } as FileHead;
    return {
      version: 2,
      header: header as unknown as SealedHeader,
      headerBytes: buf.subarray(0, second + 1),
      offset: second + 1,
    };
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Checks the whole file against its end line (truncated, corrupted), then decrypts it into
 * `stagingDir` (which must exist and be empty, owner only) entry by entry. Nothing is written
 * there before the checksum holds; entries are complete only when this resolves (a wrong secret
 * fails at the GCM tag, and the caller removes the staging directory).
 */
export async function openSealed(
  file: string,
  secret: BackupSecret | undefined,
  stagingDir: string,
): Promise<{ header: SealedHeader; entries: string[] }> {
  const head = readHead(file);
  if (head.version !== 2) throw new BackupError(`${file} is a version 1 backup: it is not sealed`);
  const { header, headerBytes, offset } = head;
  const size = fs.statSync(file).size;
  const fd = fs.openSync(file, "r");
  let digest: string;
  try {
    if (size < offset + END_BYTES)
      throw new BackupError(`${file} is truncated: it ends before its end line (${size} bytes)`);
    const end = Buffer.alloc(END_BYTES);
    fs.readSync(fd, end, 0, END_BYTES, size - END_BYTES);
    const endText = end.toString("latin1");
    if (!endText.startsWith(END_PREFIX) || !/^[0-9a-f]{64}\n$/.test(endText.slice(END_PREFIX.length)))
      throw new BackupError(`${file} is truncated: its end line is missing (${size} bytes)`);
    digest = endText.slice(END_PREFIX.length, END_PREFIX.length + 64);
  } finally {
    fs.closeSync(fd);
  }
  const hash = createHash("sha256");
  await pipeline(fs.createReadStream(file, { end: size - END_BYTES - 1 }), hash);
  if (hash.digest("hex") !== digest)
    throw new BackupError(`${file} is corrupted: its checksum does not match its contents`);
  if (size !== offset + header.bytes + TAG_BYTES + END_BYTES)
    throw new BackupError(`${file} is corrupted: its size does not match its header`);
  if (!secret)
    throw new BackupError(
      `${file} is sealed with a ${header.secret === "key-file" ? "key file" : "passphrase"}: give it with --${header.secret === "key-file" ? "key-file" : "passphrase-file"}`,
    );
  if (secret.kind !== header.secret)
    throw new BackupError(
      `${file} is sealed with a ${header.secret === "key-file" ? "key file" : "passphrase"}, not a ${secret.kind === "key-file" ? "key file" : "passphrase"}`,
    );
  const key = await deriveKey(secret, header.kdf);
  const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(header.iv, "base64"));
  decipher.setAAD(headerBytes);
  const tag = Buffer.alloc(TAG_BYTES);
  const tfd = fs.openSync(file, "r");
  try {
    fs.readSync(tfd, tag, 0, TAG_BYTES, offset + header.bytes);
  } finally {
    fs.closeSync(tfd);
  }
  decipher.setAuthTag(tag);
  // The plaintext goes to one private file first; it is split into entries once the tag holds.
  const plain = path.join(stagingDir, ".plain");
  await pipeline(
    fs.createReadStream(file, { start: offset, end: offset + header.bytes - 1 }),
    decipher,
    fs.createWriteStream(plain, { mode: 0o600, flags: "wx" }),
  ).catch((err: Error) => {
    throw new BackupError(
      /unable to authenticate|auth/i.test(err.message)
        ? `${file} cannot be opened with this ${secret.kind === "key-file" ? "key file" : "passphrase"} (${secret.source}): wrong secret`
        : `${file} cannot be decrypted: ${err.message}`,
    );
  });
  const entries = splitEntries(plain, stagingDir, file);
  fs.rmSync(plain, { force: true });
  return { header, entries };
}

function splitEntries(plain: string, stagingDir: string, file: string): string[] {
  const fd = fs.openSync(plain, "r");
  try {
    const head = Buffer.alloc(MAX_HEADER_BYTES);
    const n = fs.readSync(fd, head, 0, head.length, 0);
    const nl = head.subarray(0, n).indexOf(10);
    let manifest: Manifest;
    try {
      manifest = JSON.parse(head.subarray(0, nl).toString("utf8")) as Manifest;
    } catch {
      throw new BackupError(`${file} is corrupted: its list of entries is not readable`);
    }
    let pos = nl + 1;
    const chunk = Buffer.alloc(1 << 20);
    const names: string[] = [];
    for (const e of manifest.entries) {
      const target = path.join(stagingDir, checkName(e.name));
      fs.mkdirSync(path.dirname(target), { recursive: true, mode: 0o700 });
      const out = fs.openSync(target, "wx", 0o600);
      try {
        let left = e.bytes;
        while (left > 0) {
          const r = fs.readSync(fd, chunk, 0, Math.min(chunk.length, left), pos);
          if (r === 0) throw new BackupError(`${file} is corrupted: entry ${e.name} is shorter than listed`);
          let off = 0;
          while (off < r) off += fs.writeSync(out, chunk, off, r - off);
          pos += r;
          left -= r;
        }
        fs.fsyncSync(out);
      } finally {
        fs.closeSync(out);
      }
      names.push(e.name);
    }
    return names;
  } finally {
    fs.closeSync(fd);
  }
}
