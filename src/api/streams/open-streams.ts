// Streams open at once per API key (quota streams_per_key, issue 26): counted at the upgrade by
// the process that holds them, released when the socket closes. A key opening more than its
// limit is refused before the upgrade (403 `quota_exceeded`), like every other refusal.
import { quotaExceeded } from "../../domain/quotas.ts";
import type { Principal } from "../../identity/service.ts";

/** What one key's streams are counted under: the key's hash, or the user for other credentials. */
export function streamKeyOf(p: Principal): string {
  return p.keyHash ? `key:${p.keyHash}` : `${p.via}:${p.user.id}`;
}

export class OpenStreams {
  private readonly counts = new Map<string, number>();

  /** How many streams the key holds open now. */
  count(key: string): number {
    return this.counts.get(key) ?? 0;
  }

  /**
   * Takes one slot for the key, or refuses when it holds `limit` already (null: no limit). The
   * answer gives the slot back; calling it more than once gives it back once.
   */
  reserve(key: string, limit: number | null, namespace: string): () => void {
    const held = this.count(key);
    if (limit !== null && held >= limit) throw quotaExceeded(namespace, "streams_per_key", limit, held);
    this.counts.set(key, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const now = this.count(key) - 1;
      if (now > 0) this.counts.set(key, now);
      else this.counts.delete(key);
    };
  }
}
