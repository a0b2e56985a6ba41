// The orphans controller: engine containers that carry Berth's labels for a terminated record are
// removed (the labels are the proof of ownership), each with a "Container Cleanup" action that
// says which and why. Those whose record Berth does not hold at all (made after a restored
// backup) are never removed: they are reported once and left running (unknown-containers.ts).
// A node is queued by each pass of the replica that owns it; one sweep per node at a time, a few
// nodes at once, the sweeps of a pass sharing turns of the event loop (pace.ts).
import { randomUUID } from "node:crypto";
import { LABELS } from "../../domain/service.ts";
import { containerUri } from "../../domain/uri.ts";
import type { ContainerSummary } from "../../drivers/engine.ts";
import type { EngineSource } from "../../nodes/provisioners.ts";
import { turnPacer } from "../../pace.ts";
import type { NodeRow } from "../../store/nodes.ts";
import { ADOPTION_META, type RecordAction, reportUnknown } from "../unknown-containers.ts";
import { type ControllerContext, held, type NodeKey } from "./context.ts";
import { Controller } from "./controller.ts";

/** How long an engine container without a record is given before it is reported: a record is written before its engine container. */
const CREATION_GRACE_MS = 60_000;

export interface OrphansDeps extends ControllerContext {
  engines: EngineSource;
  /** The node's Berth containers, listed at most once per pass (the pass's comparison may have listed them). */
  listing(node: NodeRow): Promise<ContainerSummary[]>;
  /** Forgets the pass's listing of the node (the sweep has used it). */
  forgetListing(nodeUuid: string): void;
  /** Records what the sweep did (an action with its log line). */
  record: RecordAction;
}

export class OrphansController extends Controller<NodeKey> {
  /** The sweeps of a pass (one per node, a few at once) share turns of the event loop (pace.ts). */
  private readonly pace = turnPacer();

  constructor(private readonly d: OrphansDeps) {
    super({ id: (k) => k.node, nodeOf: (k) => k.node, perNode: 1, workers: 4, onError: d.onError });
  }

  protected async work([k]: NodeKey[]): Promise<undefined> {
    if (k) await this.sweep(k.node);
    return undefined;
  }

  private async sweep(nodeUuid: string): Promise<void> {
    const { store } = this.d;
    await this.pace();
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
    await this.pace();
    const unknown: ContainerSummary[] = [];
    for (const o of ours) {
      const recordUuid = o.labels[LABELS.container];
      if (!recordUuid) continue;
      const record = records.get(recordUuid);
      if (record && record.state !== "Terminated") continue;
      if (!record) {
        if (this.d.clock.now() - o.createdAt >= CREATION_GRACE_MS) unknown.push(o);
        continue;
      }
      if (await held(store, [containerUri(record)])) continue;
      const removed = await engine.removeContainer(o.id, { force: true, removeVolumes: true }).then(
        () => undefined,
        (err: unknown) => (err instanceof Error ? err.message : String(err)),
      );
      await this.d
        .record({
          uuid: randomUUID(),
          namespace: record.namespace,
          object: containerUri(record),
          name: "Container Cleanup",
          meta: { ...ADOPTION_META, userAgent: "berth-reconciler" },
          state: removed === undefined ? "Success" : "Failed",
          logLine:
            removed === undefined
              ? `Engine container ${o.id.slice(0, 12)} (${o.name}, ${o.state}) of this terminated container was still on node ${node.uuid}: removed with its anonymous volumes`
              : `Engine container ${o.id.slice(0, 12)} (${o.name}) of this terminated container is still on node ${node.uuid}, and removing it failed: ${removed}`,
        })
        .catch((err) => this.d.onError(err));
    }
    await reportUnknown(
      { store, record: this.d.record },
      node,
      unknown,
      "no record of it was ever written here",
    ).catch((err) => this.d.onError(err));
  }
}
