// The orphans controller: engine containers that carry Berth's labels but no live record are
// removed (the labels are the proof of ownership). A node is queued by each pass of the replica
// that owns it; one sweep per node at a time, a few nodes at once.
import { LABELS } from "../../domain/service.ts";
import { containerUri } from "../../domain/uri.ts";
import type { ContainerSummary } from "../../drivers/engine.ts";
import type { EngineSource } from "../../nodes/provisioners.ts";
import type { NodeRow } from "../../store/nodes.ts";
import { type ControllerContext, held, type NodeKey } from "./context.ts";
import { Controller } from "./controller.ts";

/** How long an engine container without a record is given: a record is written before its engine container. */
const CREATION_GRACE_MS = 60_000;

export interface OrphansDeps extends ControllerContext {
  engines: EngineSource;
  /** The node's Berth containers, listed at most once per pass (the pass's comparison may have listed them). */
  listing(node: NodeRow): Promise<ContainerSummary[]>;
  /** Forgets the pass's listing of the node (the sweep has used it). */
  forgetListing(nodeUuid: string): void;
}

export class OrphansController extends Controller<NodeKey> {
  constructor(private readonly d: OrphansDeps) {
    super({ id: (k) => k.node, nodeOf: (k) => k.node, perNode: 1, workers: 4, onError: d.onError });
  }

  protected async work([k]: NodeKey[]): Promise<undefined> {
    if (k) await this.sweep(k.node);
    return undefined;
  }

  private async sweep(nodeUuid: string): Promise<void> {
    const { store } = this.d;
    const node = await store.nodes.knownNode(nodeUuid);
    if (node?.state !== "Deployed") return;
    const engine = this.d.engines.forNode(node);
    const ours = await this.d.listing(node);
    this.d.forgetListing(node.uuid);
    const records = new Map(
      // Only which records live is needed: their heads, not whole records with their definitions.
      (
        await store.services.containerHeads(
          ours.flatMap((o) => (o.labels[LABELS.container] ? [o.labels[LABELS.container]!] : [])),
        )
      ).map((r) => [r.uuid, r]),
    );
    for (const o of ours) {
      const recordUuid = o.labels[LABELS.container];
      if (!recordUuid) continue;
      const record = records.get(recordUuid);
      if (record && record.state !== "Terminated") continue;
      if (record && (await held(store, [containerUri(record)]))) continue;
      if (!record && this.d.clock.now() - o.createdAt < CREATION_GRACE_MS) continue;
      await engine
        .removeContainer(o.id, { force: true, removeVolumes: true })
        .catch((err) => this.d.onError(err));
    }
  }
}
