// Access re-checked on open streams (issue 14 item 4). A stream was authorized once, at its
// upgrade; when access ends — its API key is revoked, its user removed from the organization it
// reads, the user deactivated, or the service whose PLATFORM_AUTH opened it terminated (which
// revokes that key) — the stream is closed with 1008 and a reason within moments.
//
// Driven by changes, not by a poll per stream: identity changes signal in process
// (`IdentityService.onAccessChange`), and a service reaching Terminated on the change feed
// signals too (it may have been terminated by another process). A signal re-checks each distinct
// caller of the open streams once.
import type { WebSocket } from "ws";
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

  constructor(
    private readonly identity: IdentityService,
    private readonly feed: EventFeed,
    private readonly onError: (err: unknown) => void,
  ) {
    this.unlistenIdentity = identity.onAccessChange(() => this.recheck());
  }

  /** Watches an open stream until it closes. */
  watch(ws: WebSocket, watched: Watched): void {
    this.streams.set(ws, watched);
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
      const key = `${p.user.id}\u0000${p.keyHash ?? ""}\u0000${p.namespaceLimit ?? ""}`;
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
    this.unlistenIdentity();
    this.unlistenFeed?.();
    this.unlistenFeed = undefined;
    this.streams.clear();
  }
}
