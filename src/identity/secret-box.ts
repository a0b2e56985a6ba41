// Encryption at rest for secrets Berth must be able to read back (service keys for
// PLATFORM_AUTH, engine TLS keys, registry credentials): AES-256-GCM with a key from
// BERTH_SECRET_KEY or a key file generated once in the data directory.
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { ensurePrivateDir, tightenIfPresent } from "../config/private-files.ts";

export class SecretBox {
  private constructor(private readonly key: Buffer) {}

  /** From a configured secret (any string: it is hashed to 32 bytes) or the data directory's key file. */
  static open(opts: { secret?: string; dataDir: string }): SecretBox {
    if (opts.secret) return new SecretBox(createHash("sha256").update(opts.secret).digest());
    const file = path.join(opts.dataDir, "secret.key");
    if (!fs.existsSync(file)) {
      ensurePrivateDir(opts.dataDir);
      // wx: never overwrite a key another process just wrote.
      try {
        fs.writeFileSync(file, randomBytes(32).toString("base64"), { mode: 0o600, flag: "wx" });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
    }
    // A key file copied in by hand (or by an older tool) with a readable mode is tightened.
    tightenIfPresent(file);
    return new SecretBox(Buffer.from(fs.readFileSync(file, "utf8").trim(), "base64"));
  }

  /** `v1.<iv>.<tag>.<ciphertext>`, base64url parts. */
  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.key, iv);
    const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
    return ["v1", iv, cipher.getAuthTag(), body]
      .map((p) => (typeof p === "string" ? p : p.toString("base64url")))
      .join(".");
  }

  /**
   * A secret bound to `purpose` and this key (HMAC-SHA256, base64url): it can be shown again without
   * being stored (trigger URLs keep only its hash), and it changes when the key changes.
   */
  derive(purpose: string): string {
    return createHmac("sha256", this.key).update(purpose).digest("base64url");
  }

  open(sealed: string): string {
    const [v, iv, tag, body] = sealed.split(".");
    if (v !== "v1" || !iv || !tag || body === undefined) throw new Error("not a sealed secret");
    const decipher = createDecipheriv("aes-256-gcm", this.key, Buffer.from(iv, "base64url"));
    decipher.setAuthTag(Buffer.from(tag, "base64url"));
    return Buffer.concat([decipher.update(Buffer.from(body, "base64url")), decipher.final()]).toString(
      "utf8",
    );
  }
}
