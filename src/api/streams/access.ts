// Access re-checked on open streams (issue 14 item 4). A stream was authorized once, at its
// upgrade; when access ends — its API key is revoked, its user removed from the organization it
// reads, the user deactivated, or the service whose PLATFORM_AUTH opened it terminated (which
// revokes that key) — the stream is closed with 1008 and a reason within moments.
//
// Driven by changes, not by a poll per stream: identity changes signal in process
// (`IdentityService.onAccessChange`, which other replicas' identity changes reach too: a key
// revoked, a member removed, a session signed out, a password changed, a user deactivated), and a
// service reaching Terminated on the change feed signals too (it may have been terminated by
// another process). A signal re-checks each distinct caller of the open streams once.
// A dashboard session's end is known in advance: one timer, set for the earliest, closes the
// streams of sessions that expired, without a read.
import type { WebSocket } from "ws";
import { type Clock, systemClock } from "../../domain/time.ts";
import type { IdentityService, Principal } from "../../identity/service.ts";
import type { EventFeed } from "./feed.ts";
import { CLOSE, closeSocket } from "./sockets.ts";

interface Watched {
  principal: Principal;
  /** The namespace the stream reads; undefined: every namespace the caller may read (events). */
  namespace?: string;
  /** Told the namespaces the caller may read now (events without a namespace narrow to them). */
  onNamespaces?: (readable: Set<string>) => void;
}

export class StreamAccessGuard {
  private readonly streams = new Map<WebSocket, Watched>();
  private unlistenFeed: (() => void) | undefined;
  private readonly unlistenIdentity: () => void;
  private checking = false;
  private again = false;
  /** The timer that closes streams of expired sessions, and the expiry it is set for. */
  private expiryTimer: NodeJS.Timeout | undefined;
  private expiryAt = Number.POSITIVE_INFINITY;

  constructor(
    private readonly identity: IdentityService,
    private readonly feed: EventFeed,
    private readonly onError: (err: unknown) => void,
    private readonly clock: Clock = systemClock,
  ) {
    this.unlistenIdentity = identity.onAccessChange(() => this.recheck());
  }

  /** Watches an open stream until it closes. */
  watch(ws: WebSocket, watched: Watched): void {
    this.streams.set(ws, watched);
    const expires = watched.principal.expiresMs;
    if (expires !== undefined && expires < this.expiryAt) this.scheduleExpiry(expires);
    this.unlistenFeed ??= this.feed.listen((event) => {
      if (event.type === "service" && event.state === "Terminated") this.recheck();
    });
    ws.once("close", () => {
      this.streams.delete(ws);
      if (this.streams.size === 0) {
        this.unlistenFeed?.();
        this.unlistenFeed = undefined;
      }
    });
  }

  private scheduleExpiry(at: number): void {
    clearTimeout(this.expiryTimer);
    this.expiryTimer = undefined;
    this.expiryAt = at;
    if (at === Number.POSITIVE_INFINITY) return;
    // setTimeout's limit is about 24.8 days: a later expiry sets the timer again when it fires.
    const delay = Math.min(Math.max(0, at - this.clock.now()), 2 ** 31 - 1);
    this.expiryTimer = setTimeout(() => this.closeExpired(), delay);
    this.expiryTimer.unref();
  }

  /** Closes the streams of sessions that expired, and sets the timer for the next expiry. */
  private closeExpired(): void {
    this.expiryTimer = undefined;
    const now = this.clock.now();
    let next = Number.POSITIVE_INFINITY;
    for (const [ws, w] of this.streams) {
      const expires = w.principal.expiresMs;
      if (expires === undefined) continue;
      if (expires <= now) closeSocket(ws, CLOSE.policy, "access ended: the session expired");
      else if (expires < next) next = expires;
    }
    this.scheduleExpiry(next);
  }

  /** Re-checks every open stream; coalesced, one pass at a time. */
  recheck(): void {
    if (this.streams.size === 0) return;
    if (this.checking) {
      this.again = true;
      return;
    }
    this.checking = true;
    void this.pass()
      .catch(this.onError)
      .finally(() => {
        this.checking = false;
        if (this.again) {
          this.again = false;
          this.recheck();
        }
      });
  }

  private async pass(): Promise<void> {
    const byCaller = new Map<string, { principal: Principal; streams: [WebSocket, Watched][] }>();
    for (const entry of this.streams) {
      const p = entry[1].principal;
      const key = `${p.user.id}\u0000${p.keyHash ?? ""}\u0000${p.sessionHash ?? ""}\u0000${p.namespaceLimit ?? ""}`;
      const group = byCaller.get(key) ?? { principal: p, streams: [] };
      group.streams.push(entry);
      byCaller.set(key, group);
    }
    for (const { principal, streams } of byCaller.values()) {
      const fresh = await this.identity.recheck(principal);
      if (!fresh.principal) {
        for (const [ws] of streams) closeSocket(ws, CLOSE.policy, `access ended: ${fresh.reason}`);
        continue;
      }
      const readable = new Set(await this.identity.namespacesOf(fresh.principal));
      for (const [ws, w] of streams) {
        if (w.namespace !== undefined && !readable.has(w.namespace)) {
          closeSocket(
            ws,
            CLOSE.policy,
            `access ended: ${principal.user.username} may no longer read ${w.namespace}`,
          );
        } else w.onNamespaces?.(readable);
      }
    }
  }

  close(): void {
    clearTimeout(this.expiryTimer);
    this.expiryTimer = undefined;
    this.unlistenIdentity();
    this.unlistenFeed?.();
    this.unlistenFeed = undefined;
    this.streams.clear();
  }
}
