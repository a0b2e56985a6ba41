// The serial of the certificate each node's router last served for each host name (issue 30): a
// new serial is a renewal (router/controller.ts records its expiry and an event whatever the
// difference of expiries). Kept in memory and in the database (router_serials, migration 0037),
// so the first report after a restart of Berth is compared with the last one before it rather
// than only setting the starting point. The database is read once per node and host name per
// process, and written only when a serial changes.
import { RouterStore } from "../store/router.ts";
import type { Store } from "../store/store.ts";

export class ServedSerials {
  private readonly known = new Map<string, string>();
  /** `<node> <host>` pairs whose stored serial was read (or found absent). */
  private readonly read = new Set<string>();
  private readonly store: RouterStore;

  constructor(
    store: Store,
    private readonly now: () => number,
  ) {
    this.store = new RouterStore(store);
  }

  /** The serials last served by the node's router for the host names (reading the stored ones not read yet). */
  async before(nodeUuid: string, hosts: readonly string[]): Promise<Map<string, string>> {
    const unread = hosts.filter((h) => !this.read.has(`${nodeUuid} ${h}`));
    if (unread.length > 0) {
      const stored = await this.store.serialsOf(nodeUuid, unread);
      for (const h of unread) {
        const serial = stored.get(h);
        if (serial !== undefined && !this.known.has(`${nodeUuid} ${h}`))
          this.known.set(`${nodeUuid} ${h}`, serial);
        this.read.add(`${nodeUuid} ${h}`);
      }
    }
    const out = new Map<string, string>();
    for (const h of hosts) {
      const serial = this.known.get(`${nodeUuid} ${h}`);
      if (serial !== undefined) out.set(h, serial);
    }
    return out;
  }

  /** The node's router serves this serial for the host name now. */
  async seen(nodeUuid: string, host: string, serial: string | undefined): Promise<void> {
    if (!serial || this.known.get(`${nodeUuid} ${host}`) === serial) return;
    this.known.set(`${nodeUuid} ${host}`, serial);
    await this.store.putSerial({ node_uuid: nodeUuid, host, serial, updated: this.now() });
  }

  /** The node is gone. */
  async forgetNode(nodeUuid: string): Promise<void> {
    for (const key of [...this.known.keys(), ...this.read])
      if (key.startsWith(`${nodeUuid} `)) {
        this.known.delete(key);
        this.read.delete(key);
      }
    await this.store.deleteSerialsOfNode(nodeUuid);
  }
}
