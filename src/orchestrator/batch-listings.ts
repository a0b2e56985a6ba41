// The engine containers of a batch's records (a service's start, redeploy, stop, terminate; the
// reconciler's observations), read with one label-filtered listing per node and batch instead of
// one listing per record: a deploy of N containers on a node then costs the engine one listing,
// not N. Why a listing taken before a record's turn is still safe is said where it is used
// (generation-start.ts: create by a name of the record's generation; stop-records.ts: removal left to
// the orphan sweep).
import { addTo } from "../domain/collections.ts";
import { LABELS } from "../domain/service.ts";
import type { ContainerSummary, Engine } from "../drivers/engine.ts";

export class BatchListings {
  /** Records of the batch per node. */
  private readonly counts = new Map<string, number>();
  /** The node's Berth containers by record, listed once (when its first record asks). */
  private readonly listings = new Map<string, Promise<Map<string, ContainerSummary[]>>>();

  constructor(rows: readonly { node_uuid: string }[]) {
    for (const r of rows) this.counts.set(r.node_uuid, (this.counts.get(r.node_uuid) ?? 0) + 1);
  }

  /**
   * The engine containers carrying the record's label. A node with one record of the batch is
   * asked for that record's containers only (a listing of the whole node would cost more); a node
   * with several is listed once for all of them. A failed listing is not kept: the records that
   * ask later list again.
   */
  async of(c: { uuid: string; node_uuid: string }, engine: Engine): Promise<ContainerSummary[]> {
    if ((this.counts.get(c.node_uuid) ?? 0) < 2) {
      return engine.listContainers({ labels: { [LABELS.container]: c.uuid }, all: true });
    }
    let listing = this.listings.get(c.node_uuid);
    if (!listing) {
      listing = engine.listContainers({ labels: { [LABELS.node]: c.node_uuid }, all: true }).then((found) => {
        const byRecord = new Map<string, ContainerSummary[]>();
        for (const x of found) {
          const uuid = x.labels[LABELS.container];
          if (uuid !== undefined) addTo(byRecord, uuid, x);
        }
        return byRecord;
      });
      this.listings.set(c.node_uuid, listing);
      listing.catch(() => {
        if (this.listings.get(c.node_uuid) === listing) this.listings.delete(c.node_uuid);
      });
    }
    return (await listing).get(c.uuid) ?? [];
  }
}
